// Parity of the Vulkan backend with Hugging Face transformers on the fixture models, through the same goldens and
// execution paths as parity.test.ts (the CPU backend's test): the whole prompt at once, chunks of 1 and 3, batched
// decode, a mixed batch and verify blocks. Runs on lavapipe (Mesa's CPU Vulkan, which CI installs) unless
// SPLASH_VULKAN_DEVICE picks another device.
//
// Tolerances. bf16 weights: max |Δlogit| ≤ 1e-3 × std(logits) and the same argmax at every position (the CPU
// backend's criterion: both accumulate in f32). Quantized weights: the kernels multiply f32 activations with the
// dequantized weights while the CPU rounds activations to int8 per group of 32, so the two backends differ by that
// rounding; q8 is held to parity.test.ts's q8 criterion against the goldens (mean |Δ| ≤ 0.15 × std, argmax kept at
// ≥ 95% of the confident positions) and so is its distance to the CPU backend's q8 logits (measured 0.05–0.06: the
// two roundings are as far from each other as from the goldens; a wrong scale or layout gives ~1); q4 is reported.
// lavapipe is slow (and compiles each pipeline on first use), so the paths are a subset per fixture and the
// token-by-token ones stop after the first positions of each prompt (logits are causal: a prefix compares with the
// goldens' prefix); every kernel variant (GEMV for 1 and ≤ 4 rows, both GEMM tiles, split-key decode attention, MoE
// tiles of 1 and of 4) still runs.
// Prints the evidence table.
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Backend, Model, type Quant, type StepInput } from "../../src/native/model.ts";

const ROOT = join(import.meta.dir, "../fixtures/models");
const PAGE = 16;

type Prompt = { tokens: number[]; n_tokens: number; std_logits: number; argmax: number[]; logits: { file: string } };

const FIXTURES = [
  { dir: "qwen35-dense-tiny", golden: "qwen35-dense-tiny", paths: [0, 2, 3, 4, 5], quant: [0, 3] },
  { dir: "qwen35-moe-tiny-fused", golden: "qwen35-moe-tiny", paths: [0, 3, 5], quant: [0] },
];
// Positions per prompt on each path (whole and verify blocks run every position).
const LIMIT = [Infinity, 40, 40, 32, 40, 72];

function f32(path: string): Float32Array {
  const b = readFileSync(path);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

function prompts(golden: string): Prompt[] {
  return (JSON.parse(readFileSync(join(ROOT, golden, "golden/manifest.json"), "utf8")) as { prompts: Prompt[] }).prompts;
}

// Every prompt as its own sequence; prompt k advances by advance(k, done) tokens per step with logits for all of
// them. Page tables interleave the prompts, so a wrong page lookup reads another sequence's keys.
function run(model: Model, all: Prompt[], advance: (k: number, done: number) => number, limit: number): Float32Array[] {
  const V = model.info.vocabSize;
  const ps = all.map((p) => ({ ...p, n_tokens: Math.min(p.n_tokens, limit) }));
  const pagesPer = Math.ceil(Math.max(...ps.map((p) => p.n_tokens)) / PAGE);
  const cache = model.createCache({ pageTokens: PAGE, nPages: pagesPer * ps.length, nSlots: ps.length });
  try {
    const out = ps.map((p) => new Float32Array(p.n_tokens * V));
    const done = ps.map(() => 0);
    const pages = ps.map((_, k) => Int32Array.from({ length: pagesPer }, (_, i) => i * ps.length + k));
    while (done.some((d, k) => d < ps[k]!.n_tokens)) {
      const seqs: StepInput[] = [];
      ps.forEach((p, k) => {
        const n = Math.min(advance(k, done[k]!), p.n_tokens - done[k]!);
        if (n <= 0) return;
        seqs.push({
          slot: k,
          nPast: done[k]!,
          tokens: Int32Array.from(p.tokens.slice(done[k]!, done[k]! + n)),
          pages: pages[k]!,
          logits: out[k]!.subarray(done[k]! * V, (done[k]! + n) * V),
        });
        done[k]! += n;
      });
      cache.step(seqs);
    }
    return out;
  } finally {
    cache.free();
  }
}

const PATHS: { name: string; advance: (p: Prompt) => (k: number, done: number) => number; together: boolean }[] = [
  { name: "whole", advance: (p) => () => p.n_tokens, together: false },
  { name: "chunks of 1", advance: () => () => 1, together: false },
  { name: "chunks of 3", advance: () => () => 3, together: false },
  { name: "batched decode", advance: () => () => 1, together: true },
  { name: "mixed batch 1/2/5/7", advance: () => (k) => [1, 2, 5, 7][k % 4]!, together: true },
  { name: "verify blocks of 4", advance: (p) => (_, done) => (done === 0 ? Math.ceil(p.n_tokens / 2) : 4), together: true },
];

function runPath(model: Model, ps: Prompt[], i: number): Float32Array[] {
  const path = PATHS[i]!, limit = LIMIT[i]!;
  return path.together
    ? run(model, ps, (k, done) => path.advance(ps[k]!)(k, done), limit)
    : ps.map((p, k) => run(model, [p], (_, done) => path.advance(p)(k, done), limit)[0]!);
}

// Max and mean |Δ| / std against reference logits (the golden files, or another run), argmax agreement with the
// reference's argmax, also over its confident positions (top-1/top-2 margin ≥ 0.5 × std).
function compare(ps: Prompt[], ref: Float32Array[], got: Float32Array[], V: number) {
  let maxOverStd = 0, sum = 0, same = 0, total = 0, confidentSame = 0, confident = 0;
  ps.forEach((p, k) => {
    const o = got[k]!, g = ref[k]!.subarray(0, o.length), n = o.length / V;
    for (let i = 0; i < g.length; i++) {
      const d = Math.abs(g[i]! - o[i]!);
      maxOverStd = Math.max(maxOverStd, Number.isFinite(d) ? d / p.std_logits : Infinity);
      sum += d / p.std_logits;
    }
    for (let t = 0; t < n; t++) {
      let a = 0, b = 0, first = -Infinity, second = -Infinity;
      for (let v = 0; v < V; v++) {
        if (o[t * V + v]! > o[t * V + a]!) a = v;
        const x = g[t * V + v]!;
        if (x > g[t * V + b]!) b = v;
        if (x > first) (second = first), (first = x);
        else if (x > second) second = x;
      }
      same += a === b ? 1 : 0;
      total++;
      if (first - second >= 0.5 * p.std_logits) (confidentSame += a === b ? 1 : 0), confident++;
    }
  });
  return { maxOverStd, meanOverStd: sum / (total * V), same, total, confidentSame, confident };
}

const evidence: { fixture: string; weights: string; path: string; maxOverStd: number; argmax: string; note: string }[] = [];
const load = (dir: string, backend: Backend, quant: Quant = "none") => Model.load(join(ROOT, dir), { backend, quant, maxStepTokens: 512 });

describe.each(FIXTURES)("vulkan parity $dir", ({ dir, golden, paths, quant: quantPaths }) => {
  const ps = prompts(golden);
  const goldens = () => ps.map((p) => f32(join(ROOT, golden, "golden", p.logits.file)));

  test("bf16 weights: every path within 1e-3 × std of transformers, same argmax everywhere", async () => {
    const model = await load(dir, "vulkan");
    try {
      const ref = goldens();
      for (const i of paths) {
        const path = PATHS[i]!;
        const t0 = performance.now();
        const c = compare(ps, ref, runPath(model, ps, i), model.info.vocabSize);
        const note = `${((performance.now() - t0) / 1000).toFixed(1)} s`;
        evidence.push({ fixture: dir, weights: "bf16", path: path.name, maxOverStd: c.maxOverStd, argmax: `${c.same}/${c.total}`, note });
        expect(c.maxOverStd).toBeLessThanOrEqual(1e-3);
        expect(c.same).toBe(c.total);
      }
    } finally {
      model.free();
    }
  }, 240_000);

  for (const quant of ["q8", "q4"] as Quant[]) {
    test(`${quant} weights: ${quant === "q8" ? "the q8 criterion against transformers, close to the CPU's q8" : "reported"}`, async () => {
      const model = await load(dir, "vulkan", quant);
      const cpu = await load(dir, "cpu", quant);
      try {
        const ref = goldens();
        for (const i of quant === "q8" ? quantPaths : [0]) {
          const path = PATHS[i]!;
          const t0 = performance.now();
          const got = runPath(model, ps, i);
          const seconds = (performance.now() - t0) / 1000;
          const c = compare(ps, ref, got, model.info.vocabSize);
          const vsCpu = compare(ps, runPath(cpu, ps, i), got, model.info.vocabSize);
          evidence.push({
            fixture: dir,
            weights: quant,
            path: path.name,
            maxOverStd: c.maxOverStd,
            argmax: `${c.same}/${c.total}`,
            note: `${seconds.toFixed(1)} s; mean ${c.meanOverStd.toExponential(1)}, confident ${c.confidentSame}/${c.confident}; vs cpu ${quant}: mean ${vsCpu.meanOverStd.toExponential(1)}, argmax ${vsCpu.same}/${vsCpu.total}`,
          });
          expect(Number.isFinite(c.maxOverStd)).toBe(true);
          if (quant === "q8") {
            expect(c.meanOverStd).toBeLessThan(0.15);
            expect(c.confidentSame / c.confident).toBeGreaterThanOrEqual(0.95);
            expect(vsCpu.meanOverStd).toBeLessThan(0.15);
          }
        }
      } finally {
        model.free();
        cpu.free();
      }
    }, 240_000);
  }
});

afterAll(() => {
  if (!evidence.length) return;
  const w = Math.max(...evidence.map((r) => r.path.length));
  console.log(`\nfixture (vulkan)            weights  path${" ".repeat(w - 4)}  max|Δ|/std   argmax   time, notes`);
  for (const r of evidence)
    console.log(
      `${r.fixture.padEnd(28)}${r.weights.padEnd(9)}${r.path.padEnd(w)}  ${r.maxOverStd.toExponential(2).padStart(9)}   ${r.argmax.padEnd(8)} ${r.note}`,
    );
});

test("a model reports the backend and device it runs on", async () => {
  for (const [backend, want] of [["cpu", /^cpu$/], ["vulkan", /^vulkan: \S/]] as const) {
    const model = await load("qwen35-dense-tiny", backend);
    expect(model.info.backend).toMatch(want);
    model.free();
  }
});
