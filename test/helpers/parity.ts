// The one parity runner: prompts fed to a model along an execution path (the whole prompt at once, chunks, batched
// decode, a mixed batch, verify blocks) with the logits of every position, and the figures that hold those logits
// to a reference (transformers' goldens, mlx-lm's logits, or another run). The tests pick the matrix of fixture ×
// backend × path: parity.test.ts (CPU), parity-vulkan.test.ts, mlx.test.ts, packed.test.ts, pull.test.ts.
import { expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Model, StepInput } from "../../src/native/model.ts";

export const FIXTURE_MODELS = join(import.meta.dir, "../fixtures/models");
const PAGE = 16;

export function f32(path: string): Float32Array {
  const b = readFileSync(path);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

// A prompt of a fixture's golden manifest (scripts/fixtures/: transformers' logits and hidden states for it).
export type GoldenPrompt = {
  tokens: number[];
  n_tokens: number;
  std_logits: number;
  argmax: number[];
  logits: { file: string };
  hidden: { file: string; shape: number[] };
};

export function goldenPrompts(golden: string): GoldenPrompt[] {
  return (JSON.parse(readFileSync(join(FIXTURE_MODELS, golden, "golden/manifest.json"), "utf8")) as { prompts: GoldenPrompt[] }).prompts;
}

export function goldenLogits(golden: string, prompts: GoldenPrompt[]): Float32Array[] {
  return prompts.map((p) => f32(join(FIXTURE_MODELS, golden, "golden", p.logits.file)));
}

// Runs every prompt as its own sequence (slot k, its own pages), its first `limit` tokens at most. Each step, prompt
// k advances by advance(k, done) tokens and asks logits for all of them, so the logits of every position come back.
// Returns [n][vocab] per prompt.
export function runPrompts(model: Model, prompts: readonly ArrayLike<number>[], advance: (k: number, done: number) => number, limit = Infinity): Float32Array[] {
  const V = model.info.vocabSize;
  const tokens = prompts.map((p) => Array.from(p).slice(0, limit));
  const pagesPer = Math.ceil(Math.max(...tokens.map((t) => t.length)) / PAGE);
  const cache = model.createCache({ pageTokens: PAGE, nPages: pagesPer * tokens.length, nSlots: tokens.length });
  try {
    const out = tokens.map((t) => new Float32Array(t.length * V));
    const done = tokens.map(() => 0);
    // page tables interleave the prompts' pages, so a wrong page lookup reads another sequence's keys
    const pages = tokens.map((_, k) => Int32Array.from({ length: pagesPer }, (_, i) => i * tokens.length + k));
    while (done.some((d, k) => d < tokens[k]!.length)) {
      const seqs: StepInput[] = [];
      tokens.forEach((t, k) => {
        const n = Math.min(advance(k, done[k]!), t.length - done[k]!);
        if (n <= 0) return;
        seqs.push({ slot: k, nPast: done[k]!, tokens: Int32Array.from(t.slice(done[k]!, done[k]! + n)), pages: pages[k]!, logits: out[k]!.subarray(done[k]! * V, (done[k]! + n) * V) });
        done[k]! += n;
      });
      cache.step(seqs);
    }
    return out;
  } finally {
    cache.free();
  }
}

// An execution path: how far each prompt advances per step (given its length), and whether the prompts share steps.
export type Path = { name: string; advance: (length: number) => (k: number, done: number) => number; together: boolean };

export const PATHS = {
  whole: { name: "whole", advance: (n) => () => n, together: false },
  chunks1: { name: "chunks of 1", advance: () => () => 1, together: false },
  chunks3: { name: "chunks of 3", advance: () => () => 3, together: false },
  chunks64: { name: "chunks of 64", advance: () => () => 64, together: false },
  // every prompt decoded token by token, all sequences in the same steps
  batchedDecode: { name: "batched decode", advance: () => () => 1, together: true },
  // prefill chunks and single-token decodes in the same steps
  mixedBatch: { name: "mixed batch 1/2/5/7", advance: () => (k) => [1, 2, 5, 7][k % 4]!, together: true },
  // half the prompt as a prefill, then verify blocks of 4 positions (n_logits = 4) for every sequence at once
  verifyBlocks: { name: "verify blocks of 4", advance: (n) => (_, done) => (done === 0 ? Math.ceil(n / 2) : 4), together: true },
} as const satisfies Record<string, Path>;

// The path over each prompt's first `limit` tokens (a prefix compares with the reference's prefix: logits are causal);
// the path's steps are those of the whole prompt, cut at the limit.
export function runPath(model: Model, prompts: readonly ArrayLike<number>[], path: Path, limit = Infinity): Float32Array[] {
  return path.together
    ? runPrompts(model, prompts, (k, done) => path.advance(prompts[k]!.length)(k, done), limit)
    : prompts.map((p, k) => runPrompts(model, [p], (_, done) => path.advance(p.length)(k, done), limit)[0]!);
}

// Logits at every position of `tokens`, fed as one prefill of a fresh sequence, or `chunk` tokens per step.
export function promptLogits(model: Model, tokens: ArrayLike<number>, chunk = Infinity): Float32Array {
  return runPrompts(model, [tokens], () => chunk)[0]!;
}

export function argmaxRow(l: Float32Array, V: number, t: number): number {
  let a = 0;
  for (let v = 1; v < V; v++) if (l[t * V + v]! > l[t * V + a]!) a = v;
  return a;
}

// The standard deviation of every value of x.
export function stdOf(x: Float32Array): number {
  let sum = 0;
  let sq = 0;
  for (let i = 0; i < x.length; i++) (sum += x[i]!), (sq += x[i]! * x[i]!);
  return Math.sqrt(sq / x.length - (sum / x.length) ** 2);
}

export type Comparison = { maxOverStd: number; meanOverStd: number; same: number; total: number; confidentSame: number; confident: number };

// Prompt k's logits got[k] ([n][V]) against the first n rows of ref[k], in units of the reference's std (std[k], or
// computed): max and mean |Δ|, how many positions keep the reference's argmax, and the same count over its
// confident positions (top-1 − top-2 ≥ 0.5 × std).
export function compare(ref: readonly Float32Array[], got: readonly Float32Array[], V: number, std?: readonly number[]): Comparison {
  let maxOverStd = 0, sum = 0, same = 0, total = 0, confidentSame = 0, confident = 0;
  got.forEach((o, k) => {
    const n = o.length / V, g = ref[k]!.subarray(0, o.length), s = std?.[k] ?? stdOf(g);
    for (let i = 0; i < o.length; i++) {
      const d = Math.abs(g[i]! - o[i]!);
      maxOverStd = Math.max(maxOverStd, Number.isFinite(d) ? d / s : Infinity);
      sum += d / s;
    }
    for (let t = 0; t < n; t++) {
      let first = -Infinity, second = -Infinity;
      for (let v = 0; v < V; v++) {
        const x = g[t * V + v]!;
        if (x > first) (second = first), (first = x);
        else if (x > second) second = x;
      }
      const ok = argmaxRow(o, V, t) === argmaxRow(g, V, t) ? 1 : 0;
      same += ok;
      total++;
      if (first - second >= 0.5 * s) (confidentSame += ok), confident++;
    }
  });
  return { maxOverStd, meanOverStd: sum / (total * V), same, total, confidentSame, confident };
}

export type EvidenceRow = { fixture: string; weights: string; path: string; maxOverStd: number; argmax: string; note?: string };

// The evidence table a parity test prints after its runs.
export function printEvidence(title: string, rows: readonly EvidenceRow[]): void {
  if (!rows.length) return;
  const w = Math.max(4, ...rows.map((r) => r.path.length));
  console.log(`\n${title.padEnd(28)}weights  path${" ".repeat(w - 4)}  max|Δ|/std   argmax   notes`);
  for (const r of rows)
    console.log(`${r.fixture.padEnd(28)}${r.weights.padEnd(9)}${r.path.padEnd(w)}  ${r.maxOverStd.toExponential(2).padStart(9)}   ${r.argmax.padEnd(8)} ${r.note ?? ""}`);
}

// Quantized weights against float logits: q8 is held to what separates a correct q8 path from a broken one (mean
// |Δ| ≤ 0.15 × std, where a wrong scale or layout gives ~1, and the argmax kept at ≥ 95% of the confident positions:
// the random fixtures are too chaotic for more, parity.test.ts says why); anything else is reported.
export function expectQuantized(quant: string, c: Comparison): void {
  expect(Number.isFinite(c.maxOverStd)).toBe(true);
  if (quant !== "q8") return;
  expect(c.meanOverStd).toBeLessThan(0.15);
  expect(c.confidentSame / c.confident).toBeGreaterThanOrEqual(0.95);
}

export function quantizedRow(fixture: string, quant: string, path: string, c: Comparison, note = ""): EvidenceRow {
  return { fixture, weights: quant, path, maxOverStd: c.maxOverStd, argmax: `${c.same}/${c.total}`, note: `${note}mean ${c.meanOverStd.toExponential(1)}, confident ${c.confidentSame}/${c.confident}` };
}
