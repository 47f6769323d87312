// `splash logits MODEL --tokens 1,2,3 [--chunk N] --out FILE [--quant q8|q4]`: runs the tokens through the model
// and writes the logits of every position as float32 little-endian, shape [T, vocab]. --chunk N feeds the prompt N
// tokens per step (N = 1 is the token-by-token decode path; default: all at once). MODEL is a checkpoint directory.
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";
import { NativeError } from "../native/errors.ts";
import { readCheckpointConfig } from "../models/config.ts";
import { applyKvType } from "../models/kv-type.ts";
import { specForConfig } from "../models/registry.ts";
import { Model, NATIVE_QUANT } from "../native/model.ts";
import { CliError, command, intOption, parseOption, UsageError } from "./_command.ts";
import { loadFlags, parseLoadFlags, parseQuant, quantFlag } from "./_load-flags.ts";

const tokensOption = z
  .string()
  .regex(/^\d+(,\d+)*$/, { error: "expected comma-separated token ids, e.g. 1,2,3" })
  .transform((s) => Int32Array.from(s.split(",").map(Number)));

const PAGE_TOKENS = 16;

// Logits [T][vocab] of `tokens`, fed `chunk` at a time to one sequence.
export function promptLogits(model: Model, tokens: Int32Array, chunk: number): Float32Array {
  const V = model.info.vocabSize;
  const T = tokens.length;
  const nPages = Math.ceil(T / PAGE_TOKENS);
  const cache = model.createCache({ pageTokens: PAGE_TOKENS, nPages, nSlots: 1 });
  try {
    const pages = Int32Array.from({ length: nPages }, (_, i) => i);
    const out = new Float32Array(T * V);
    for (let t0 = 0; t0 < T; t0 += chunk) {
      const n = Math.min(chunk, T - t0);
      cache.step([{ slot: 0, nPast: t0, tokens: tokens.subarray(t0, t0 + n), pages, logits: out.subarray(t0 * V, (t0 + n) * V) }]);
    }
    return out;
  } finally {
    cache.free();
  }
}

export default command({
  meta: { name: "logits", description: "Write the logits of every position of a token sequence (float32 LE, [T, vocab])" },
  args: {
    model: { type: "positional", required: true, description: "Checkpoint directory (config.json + safetensors)" },
    tokens: { type: "string", required: true, description: "Token ids, comma-separated" },
    chunk: { type: "string", description: "Tokens per step (1 = token by token; default: all at once)" },
    out: { type: "string", required: true, description: "Output file" },
    quant: quantFlag("bf16"),
    ...loadFlags,
  },
  async run({ args }) {
    const tokens = parseOption("logits", "tokens", tokensOption, args.tokens);
    const chunk = args.chunk === undefined ? tokens.length : parseOption("logits", "chunk", intOption(1), args.chunk);
    const load = parseLoadFlags("logits", args);
    const quant = parseQuant("logits", args.quant) ?? "bf16";
    const dir = resolve(args.model);
    if (!existsSync(dir) || !statSync(dir).isDirectory())
      throw new UsageError(`${args.model} is not a directory: MODEL here is a checkpoint directory`, "logits");
    let model: Model | undefined;
    try {
      model = await Model.load(dir, { quant: NATIVE_QUANT[quant], maxStepTokens: Math.min(chunk, tokens.length), ...(load.backend ? { backend: load.backend } : {}), ...(load.threads ? { threads: load.threads } : {}) });
      applyKvType(model, load.kvType, specForConfig(readCheckpointConfig(dir))?.cache.kv);
      const logits = promptLogits(model, tokens, chunk);
      await Bun.write(args.out, logits);
    } catch (e) {
      if (e instanceof NativeError) throw new CliError(e.message, "check the checkpoint directory and that every token id is below the vocabulary size");
      throw e;
    } finally {
      model?.free();
    }
  },
});
