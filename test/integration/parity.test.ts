// Parity of the native forward pass with Hugging Face transformers (golden logits made by scripts/fixtures/ with
// transformers 5.17, float32 compute on the fixtures' bf16 weights; test/fixtures/models/README.md) on every
// execution path: the whole prompt at once, chunks of 1, 3 and 64, batched decode of several sequences together,
// a mixed batch (sequences advancing by different chunk sizes in the same steps) and block verification (K
// positions with logits per step, several sequences at once). bf16: max |Δlogit| ≤ 1e-3 × std(logits) and the same
// argmax at every position. Quantized weights are judged against the same goldens, and here the issue's criterion
// for q8 (the same argmax at ≥ 99% of positions) cannot be met by any q8 format: these random fixtures are chaotic
// (a quarter of their positions have a top-1/top-2 margin under 0.1 × std), and transformers itself, run on the same
// weights quantized to q8 (weights only), keeps the argmax at only 86–91% of positions. So q8 is held to what does
// separate a correct q8 path from a broken one: mean |Δlogit| ≤ 0.15 × std (measured 0.04–0.08; a wrong scale or
// layout gives ~1) and the argmax kept at ≥ 95% of the confident positions (golden margin ≥ 0.5 × std); the
// agreement over all positions is reported, and so is everything about q4.
// Prints the evidence table.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Model, type Quant } from "../../src/native/model.ts";
import { compare, type EvidenceRow, f32, FIXTURE_MODELS as ROOT, type GoldenPrompt, goldenLogits, goldenPrompts, expectQuantized, PATHS, printEvidence, quantizedRow, runPath, runPrompts } from "../helpers/parity.ts";

const TRACE = join(import.meta.dir, "../../build/debug/tests/qwen35_trace");

const FIXTURES = [
  { dir: "qwen35-dense-tiny", golden: "qwen35-dense-tiny" },
  { dir: "qwen35-dense-tiny-sharded", golden: "qwen35-dense-tiny" },
  { dir: "qwen35-dense-rope50", golden: "qwen35-dense-rope50" },
  { dir: "qwen35-moe-tiny", golden: "qwen35-moe-tiny" },
  { dir: "qwen35-moe-tiny-fused", golden: "qwen35-moe-tiny" },
];

const evidence: EvidenceRow[] = [];

// The first traced intermediate (embeddings, each layer's residual stream, final norm) that leaves the golden
// hidden states, from the debug build's trace tool: where to look when the logits disagree.
function divergence(dir: string, golden: string, prompt: GoldenPrompt): { layers: { name: string; maxDiff: number }[] } {
  const out = mkdtempSync(join(tmpdir(), "splash-trace-"));
  try {
    const r = Bun.spawnSync([TRACE, join(ROOT, dir), prompt.tokens.join(","), out]);
    if (r.exitCode !== 0) throw new Error(`qwen35_trace failed: ${r.stderr.toString()}`);
    const hidden = f32(join(ROOT, golden, "golden", prompt.hidden.file));
    const [stack, n, H] = prompt.hidden.shape as [number, number, number]; // [L + 2][n][hidden]
    const names = ["embed.-1", ...Array.from({ length: stack - 2 }, (_, i) => `layer_out.${i}`), "final_norm.-1"];
    const size = n * H;
    return {
      layers: names.map((name, i) => {
        const ours = f32(join(out, `${name}.f32`));
        const ref = hidden.subarray(i * size, (i + 1) * size);
        let md = 0;
        for (let j = 0; j < size; j++) md = Math.max(md, Math.abs(ours[j]! - ref[j]!));
        return { name, maxDiff: md };
      }),
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

describe.each(FIXTURES)("parity $dir", ({ dir, golden }) => {
  const prompts = goldenPrompts(golden);
  const tokens = prompts.map((p) => p.tokens);
  const judge = (got: Float32Array[], V: number) => compare(goldenLogits(golden, prompts), got, V, prompts.map((p) => p.std_logits));

  test("bf16 weights: every path within 1e-3 × std with the same argmax everywhere", async () => {
    const model = await Model.load(join(ROOT, dir), { maxStepTokens: 512 });
    try {
      const whole = runPrompts(model, tokens, (k) => tokens[k]!.length); // every prompt in one step
      for (const path of Object.values(PATHS)) {
        const got = runPath(model, tokens, path);
        const c = judge(got, model.info.vocabSize);
        const identical = got.every((g, k) => g.every((x, i) => x === whole[k]![i]));
        evidence.push({
          fixture: dir,
          weights: "bf16",
          path: path.name + (identical ? " (bit-identical to whole)" : ""),
          maxOverStd: c.maxOverStd,
          argmax: `${c.same}/${c.total}`,
        });
        if (c.maxOverStd > 1e-3 || c.same !== c.total) {
          const worst = prompts[prompts.length - 1]!;
          const d = divergence(dir, golden, worst);
          throw new Error(
            `${dir} ${path.name}: max |Δ|/std ${c.maxOverStd.toExponential(2)}, argmax ${c.same}/${c.total}; ` +
              `per layer (prompt of ${worst.n_tokens}): ${d.layers.map((l) => `${l.name} ${l.maxDiff.toExponential(1)}`).join(", ")}`,
          );
        }
      }
    } finally {
      model.free();
    }
  });

  for (const quant of ["q8", "q4"] as Quant[]) {
    test(`${quant} weights: ${quant === "q8" ? "confident positions keep the argmax" : "reported"}`, async () => {
      const model = await Model.load(join(ROOT, dir), { quant, maxStepTokens: 512 });
      try {
        for (const path of [PATHS.whole, PATHS.batchedDecode]) {
          const c = judge(runPath(model, tokens, path), model.info.vocabSize);
          evidence.push(quantizedRow(dir, quant, path.name, c));
          expectQuantized(quant, c);
        }
      } finally {
        model.free();
      }
    });
  }
});

describe("per-layer hidden states against the golden (debug build's trace hook)", () => {
  for (const { dir, golden } of [FIXTURES[0]!, FIXTURES[2]!, FIXTURES[3]!]) {
    test(dir, () => {
      expect(existsSync(TRACE)).toBe(true);
      const prompt = goldenPrompts(golden).at(-1)!;
      const d = divergence(dir, golden, prompt);
      console.log(`${dir}, prompt of ${prompt.n_tokens}: ${d.layers.map((l) => `${l.name} ${l.maxDiff.toExponential(1)}`).join("  ")}`);
      for (const l of d.layers) expect(l.maxDiff).toBeLessThan(1e-3);
    });
  }
});

afterAll(() => printEvidence("fixture", evidence));
