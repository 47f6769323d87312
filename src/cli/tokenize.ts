// `splash tokenize MODEL [--file F]`: prints the token ids of a text (stdin by default) as a JSON array. The text is
// encoded as plain text: no special tokens are added, and added-token strings in it ("<|im_end|>") stay text, as
// client text in a chat does. MODEL is a model id under models/ or any directory with a tokenizer.json.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, command } from "./_command.ts";

const modelsDir = join(import.meta.dir, "..", "..", "models");

// The directory holding MODEL's tokenizer.json: MODEL itself when it is a directory, else models/MODEL.
export function resolveTokenizerDir(model: string, commandName: string): string {
  const candidates = [resolve(model), join(modelsDir, model)];
  for (const dir of candidates) {
    if (existsSync(dir) && statSync(dir).isDirectory()) {
      if (existsSync(join(dir, "tokenizer.json"))) return dir;
      throw new CliError(`${dir} has no tokenizer.json`, "point MODEL at a model directory or one holding tokenizer.json");
    }
  }
  throw new CliError(`no model or directory named ${model}`, `run \`splash ${commandName} --help\`; MODEL is a model id or a directory with tokenizer.json`);
}

export default command({
  meta: { name: "tokenize", description: "Print the token ids of a text (stdin by default) as a JSON array" },
  args: {
    model: { type: "positional", required: true, description: "Model id or directory with tokenizer.json" },
    file: { type: "string", alias: "f", description: "Read the text from this file instead of stdin" },
  },
  async run({ args }) {
    const dir = resolveTokenizerDir(args.model, "tokenize");
    let text: string;
    if (args.file) {
      try {
        text = readFileSync(args.file, "utf8");
      } catch (e) {
        throw new CliError(`cannot read ${args.file}: ${(e as Error).message}`);
      }
    } else text = await Bun.stdin.text();
    const tok = await Tokenizer.load(dir);
    console.log(JSON.stringify(Array.from(tok.encode(text))));
    tok.free();
  },
});
