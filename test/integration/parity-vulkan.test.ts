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
import { join } from "node:path";
import { type Backend, Model, type Quant } from "../../src/native/model.ts";
import { compare, type EvidenceRow, FIXTURE_MODELS as ROOT, expectQuantized, goldenLogits, goldenPrompts, type Path, PATHS, printEvidence, quantizedRow, runPath } from "../helpers/parity.ts";

// Each fixture's paths, with the positions per prompt each runs (whole and verify blocks run every position).
const FIXTURES: { dir: string; golden: string; paths: Path[]; quant: Path[] }[] = [
  { dir: "qwen35-dense-tiny", golden: "qwen35-dense-tiny", paths: [PATHS.whole, PATHS.chunks3, PATHS.batchedDecode, PATHS.mixedBatch, PATHS.verifyBlocks], quant: [PATHS.whole, PATHS.batchedDecode] },
  { dir: "qwen35-moe-tiny-fused", golden: "qwen35-moe-tiny", paths: [PATHS.whole, PATHS.batchedDecode, PATHS.verifyBlocks], quant: [PATHS.whole] },
];
const LIMIT = new Map<Path, number>([[PATHS.chunks1, 40], [PATHS.chunks3, 40], [PATHS.batchedDecode, 32], [PATHS.mixedBatch, 40], [PATHS.verifyBlocks, 72]]);
const limitOf = (path: Path) => LIMIT.get(path) ?? Infinity;

const evidence: EvidenceRow[] = [];
const load = (dir: string, backend: Backend, quant: Quant = "none") => Model.load(join(ROOT, dir), { backend, quant, maxStepTokens: 512 });

describe.each(FIXTURES)("vulkan parity $dir", ({ dir, golden, paths, quant: quantPaths }) => {
  const ps = goldenPrompts(golden);
  const tokens = ps.map((p) => p.tokens);
  const std = ps.map((p) => p.std_logits);

  test("bf16 weights: every path within 1e-3 × std of transformers, same argmax everywhere", async () => {
    const model = await load(dir, "vulkan");
    try {
      const ref = goldenLogits(golden, ps);
      for (const path of paths) {
        const t0 = performance.now();
        const c = compare(ref, runPath(model, tokens, path, limitOf(path)), model.info.vocabSize, std);
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
        const ref = goldenLogits(golden, ps);
        for (const path of quant === "q8" ? quantPaths : [PATHS.whole]) {
          const t0 = performance.now();
          const got = runPath(model, tokens, path, limitOf(path));
          const seconds = (performance.now() - t0) / 1000;
          const c = compare(ref, got, model.info.vocabSize, std);
          const vsCpu = compare(runPath(cpu, tokens, path, limitOf(path)), got, model.info.vocabSize, std);
          const row = quantizedRow(dir, quant, path.name, c, `${seconds.toFixed(1)} s; `);
          evidence.push({ ...row, note: `${row.note}; vs cpu ${quant}: mean ${vsCpu.meanOverStd.toExponential(1)}, argmax ${vsCpu.same}/${vsCpu.total}` });
          expectQuantized(quant, c);
          if (quant === "q8") expect(vsCpu.meanOverStd).toBeLessThan(0.15);
        }
      } finally {
        model.free();
        cpu.free();
      }
    }, 240_000);
  }
});

afterAll(() => printEvidence("fixture (vulkan)", evidence));

test("a model reports the backend and device it runs on", async () => {
  for (const [backend, want] of [["cpu", /^cpu$/], ["vulkan", /^vulkan: \S/]] as const) {
    const model = await load("qwen35-dense-tiny", backend);
    expect(model.info.backend).toMatch(want);
    model.free();
  }
});
