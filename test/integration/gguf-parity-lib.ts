// Shared by the GGUF parity tests: export a checkpoint, run the same prompts through llama.cpp (teacher-forced
// log-probabilities) and through Splash (logits of the safetensors as stored), and compare position by position.
import { join } from "node:path";
import type { LlamaPeer } from "../../src/bench/peers-client.ts";
import { promptLogits } from "../../src/cli/logits.ts";
import { exportGguf, type ExportType } from "../../src/gguf/export.ts";
import { Model } from "../../src/native/model.ts";

export type ParityContext = { dir: string; peer: LlamaPeer; models: Map<string, Model> };
export type Compare = { positions: number; argmaxAgree: number; maxAbsDelta: number };

// Prompts of 1, 9 and 70 tokens (70 crosses the GDN chunk of 64 on both sides), ids clear of the special ones.
export function prompts(vocab: number, lengths = [1, 9, 70]): Int32Array[] {
  return lengths.map((n, k) => Int32Array.from({ length: n }, (_, i) => (11 + 7919 * (i + 131 * k)) % (vocab - 16)));
}

// Same argmax count, and the largest |Δ log-prob| over the tokens Splash gives more than e^-20.
export function compare(logits: Float32Array, logprobs: Float32Array, V: number, n: number): Compare {
  let agree = 0;
  let maxd = 0;
  for (let t = 0; t < n; t++) {
    const row = logits.subarray(t * V, (t + 1) * V);
    const theirs = logprobs.subarray(t * V, (t + 1) * V);
    let m = -Infinity;
    for (const x of row) m = Math.max(m, x);
    let s = 0;
    for (const x of row) s += Math.exp(x - m);
    const lse = m + Math.log(s);
    let a = 0;
    let b = 0;
    for (let v = 0; v < V; v++) {
      const lp = row[v]! - lse;
      if (lp > -20) maxd = Math.max(maxd, Math.abs(lp - theirs[v]!));
      if (row[v]! > row[a]!) a = v;
      if (theirs[v]! > theirs[b]!) b = v;
    }
    if (a === b) agree++;
  }
  return { positions: n, argmaxAgree: agree, maxAbsDelta: maxd };
}

// Exports `model` as `type`, loads it in llama.cpp with its most exact settings (flash attention off, F32 KV) and
// compares over the prompts; logs one line for the record.
export async function parity(ctx: ParityContext, model: string, type: ExportType, lengths?: number[]): Promise<Compare> {
  const file = join(ctx.dir, `${model.replaceAll("/", "_")}-${type}.gguf`);
  exportGguf(model, file, type);
  await ctx.peer.load({ model: file, exact: true, threads: 2, contextSize: 256 });
  if (!ctx.models.has(model)) ctx.models.set(model, await Model.load(model, { threads: 2 }));
  const m = ctx.models.get(model)!;
  const V = m.info.vocabSize;
  const total: Compare = { positions: 0, argmaxAgree: 0, maxAbsDelta: 0 };
  for (const tokens of prompts(V, lengths)) {
    const c = compare(promptLogits(m, tokens, tokens.length), await ctx.peer.logprobs(tokens, V), V, tokens.length);
    total.positions += c.positions;
    total.argmaxAgree += c.argmaxAgree;
    total.maxAbsDelta = Math.max(total.maxAbsDelta, c.maxAbsDelta);
  }
  console.log(`gguf parity ${model.split("/").at(-1)} ${type}: argmax ${total.argmaxAgree}/${total.positions}, max |Δ log-prob| ${total.maxAbsDelta.toExponential(2)}`);
  return total;
}
