// `splash tokenize [MODEL] [--file F]`: prints the token ids of a text (stdin by default) as a JSON array. The text is
// encoded as plain text: no special tokens are added, and added-token strings in it ("<|im_end|>") stay text, as
// client text in a chat does. MODEL is what every command takes (a model id or alias, a checkpoint directory, or
// nothing for the embedded model), or any directory holding a tokenizer.json.
import { existsSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { resolveModel } from "../models/resolve.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, command } from "./_command.ts";

// The directory holding MODEL's tokenizer.json: MODEL itself when it is a directory, else the model's own files.
export function resolveTokenizerDir(model: string | undefined): string {
  const dir = model !== undefined && existsSync(model) && statSync(model).isDirectory() ? resolve(model) : resolveModel(model).dir;
  if (!existsSync(join(dir, "tokenizer.json"))) throw new CliError(`${dir} has no tokenizer.json`, "point MODEL at a model directory or one holding tokenizer.json");
  return dir;
}

export default command({
  meta: { name: "tokenize", description: "Print the token ids of a text (stdin by default) as a JSON array" },
  args: {
    model: { type: "positional", required: false, description: "Model id, or directory with tokenizer.json (default: the embedded model)" },
    file: { type: "string", alias: "f", description: "Read the text from this file instead of stdin" },
  },
  async run({ args }) {
    const dir = resolveTokenizerDir(args.model);
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
