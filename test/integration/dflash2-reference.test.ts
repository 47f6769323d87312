// DFlash2 drafters against goldens from z-lab's own DFlash2DraftModel in float64 (scripts/fixtures/dflash2_goldens.py):
// a tiny drafter for qwen35-dense-tiny and one at Qwen3.8-27B-DFlash2's layer shapes. For the first block after a
// prefill, the drafter's logits per block position match within 2e-4 × std, the selector's greedy walk is the
// reference's, and a sampled walk (Splash's RNG, so both draw the same u) takes the same path with the same q over
// each row's candidates. The loader tells DFlash and DFlash2 directories apart by their config.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Sampling } from "../../src/engine/types.ts";
import { findSpec } from "../../src/models/registry.ts";
import { Model } from "../../src/native/model.ts";
import { dflash2LayerFixture } from "../helpers/dflash2-fixture.ts";
import { draftFrom } from "../helpers/draft-from.ts";

const FIXTURES = join(import.meta.dir, "../fixtures/models");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const f32 = (path: string) => new Float32Array(readFileSync(path).buffer.slice(0));

type Case = {
  prompt: number[];
  anchor: number;
  n_draft: number;
  draft_logits: { file: string };
  std_logits: number;
  greedy: number[];
  sampled: { temperature: number; seed: number; tokens: number[]; candidates: number[][]; q: { file: string } };
};
type Manifest = { tolerance: { max_abs_logit_diff_over_std: number }; cases: Case[] };

function maxDiff(got: Float32Array, want: Float32Array): number {
  let d = 0;
  for (let i = 0; i < want.length; i++) d = Math.max(d, Math.abs(got[i]! - want[i]!));
  return d;
}

async function checkGoldens(target: string, drafter: string, goldenDir: string) {
  const manifest = JSON.parse(readFileSync(join(goldenDir, "manifest.json"), "utf8")) as Manifest;
  const tol = manifest.tolerance.max_abs_logit_diff_over_std;
  expect(tol).toBe(2e-4);
  const model = await Model.load(target, { threads: 2, drafter: { kind: "dflash2", dir: drafter } });
  expect(model.drafter).toMatchObject({ kind: "dflash2" });
  const V = model.info.vocabSize;
  const cache = model.createCache({ pageTokens: 16, nPages: 8, nSlots: 1 });
  const pages = Int32Array.from({ length: 8 }, (_, i) => i);
  const worst = { logits: 0, q: 0 };
  for (const c of manifest.cases) {
    const [r] = cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(c.prompt), pages, sample: { sampling: greedy } }]);
    expect(r!.token).toBe(c.anchor);
    // each draft: the prompt's step again (from a zero state), sampling the anchor and drafting after it
    const base = { slot: 0, nPast: 0, tokens: Int32Array.from(c.prompt), anchor: c.anchor, nDraft: c.n_draft, pages };
    // greedy: the walk, and the drafter's logits of every block row
    const logits = new Float32Array(c.n_draft * V);
    const [walk] = draftFrom(cache, [{ ...base, sampling: greedy, logits }]);
    expect([...walk!]).toEqual(c.greedy);
    const d = maxDiff(logits, f32(join(goldenDir, c.draft_logits.file))) / c.std_logits;
    worst.logits = Math.max(worst.logits, d);
    // sampled: the same draws, hence the same path, and its q
    const s = c.sampled;
    const probs = new Float32Array(c.n_draft * V);
    const [path] = draftFrom(cache, [{ ...base, sampling: { ...greedy, temperature: s.temperature, seed: s.seed }, probs }]);
    expect([...path!]).toEqual(s.tokens);
    const q = f32(join(goldenDir, s.q.file));
    const k = s.candidates[0]!.length;
    for (let j = 0; j < c.n_draft; j++) {
      const row = probs.subarray(j * V, (j + 1) * V);
      let mass = 0;
      for (let t = 0; t < k; t++) {
        const id = s.candidates[j]![t]!;
        worst.q = Math.max(worst.q, Math.abs(Math.log(row[id]!) - Math.log(q[j * k + t]!)) / ((2 * c.std_logits) / s.temperature));
        mass += row[id]!;
      }
      expect(mass).toBeCloseTo(1, 5); // nothing outside the candidates
    }
  }
  expect(worst.logits).toBeLessThan(tol);
  expect(worst.q).toBeLessThan(tol);
  cache.free();
  model.free();
  return worst;
}

describe("DFlash2 against z-lab's reference (float64)", () => {
  test("tiny drafter for qwen35-dense-tiny: logits per block position within 2e-4 × std, greedy and sampled selector walks, q", async () => {
    await checkGoldens(join(FIXTURES, "qwen35-dense-tiny"), join(FIXTURES, "qwen35-dense-tiny-dflash2"), join(FIXTURES, "qwen35-dense-tiny-dflash2/golden"));
  }, 60_000);

  test("Qwen3.8-27B-DFlash2 layer shapes (one layer, vocabulary 2048): the same checks", async () => {
    const fx = dflash2LayerFixture();
    // the shapes are the checkpoint's, as its spec records them, but for the layer count and the vocabulary
    const want = (findSpec("qwen3.8-27b")!.draft.dflash2 as { shapes: Record<string, unknown> }).shapes;
    const cfg = fx.manifest.config as Record<string, unknown> & { dflash_config: Record<string, unknown> };
    const got: Record<string, unknown> = { ...cfg, ...cfg.dflash_config, target_hidden_size: cfg.hidden_size };
    for (const [k, v] of Object.entries(want)) if (!["num_hidden_layers", "target_layer_ids", "vocab_size"].includes(k)) expect({ k, v: got[k] }).toEqual({ k, v });
    await checkGoldens(fx.target, fx.drafter, join(FIXTURES, "dflash2-27b-layer/golden"));
  }, 600_000);
});

describe("DFlash and DFlash2 directories are told apart by their config", () => {
  test("a DFlash2 drafter attached as DFlash, and a DFlash one as DFlash2, are refused saying which they are", async () => {
    const model = await Model.load(join(FIXTURES, "qwen35-dense-tiny"), { threads: 1 });
    expect(() => model.attachDrafter({ kind: "dflash", dir: join(FIXTURES, "qwen35-dense-tiny-dflash2") })).toThrow(/holds a DFlash2 drafter.*--draft dflash2/);
    expect(() => model.attachDrafter({ kind: "dflash2", dir: join(FIXTURES, "qwen35-dense-tiny-dflash") })).toThrow(/holds a DFlash \(v1\) drafter.*--draft dflash\)/);
    model.free();
  });
});
