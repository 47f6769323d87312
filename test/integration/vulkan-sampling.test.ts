// Sampling at temperature > 0 on Vulkan follows the distribution the settings define. On splash-tiny with
// --backend vulkan (lavapipe in CI; skipped where no Vulkan device exists), many rows sample the same next-token
// distribution, each with its own seed, under temperature 0.7, top-k 20, top-p 0.9 and min-p 0.02, batched as a step
// of 16 sequences forked from one state. The counts must fit that distribution, computed here from the row's logits
// (χ² goodness of fit at α = 0.001 over fixed seeds), and must not fit the same filters at temperature 1 — so a
// sampler that ignored the temperature fails. Each token's logprob is log_softmax of the logits.
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { Sampling } from "../../src/engine/types.ts";
import { Model, probeBackend } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { chiSquare } from "../helpers/chi-square.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
const SAMPLING: Sampling = { temperature: 0.7, topP: 0.9, topK: 20, minP: 0.02, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const TRIALS = 1024;
const SLOTS = 16;
const PAGE = 16;

// The sampling distribution of a logits row under s: weights exp((z − max) / T), top-k, then the smallest most-likely
// set reaching top-p of the kept mass, then min-p relative to the most likely; ranked by weight, ties to the lower id.
function dist(logits: Float32Array, s: Sampling): Float64Array {
  const rank = [...logits.keys()].sort((a, b) => logits[b]! - logits[a]! || a - b);
  const mx = logits[rank[0]!]!;
  const w = (t: number) => Math.exp((logits[t]! - mx) / s.temperature);
  let kept = s.topK > 0 ? rank.slice(0, s.topK) : rank;
  const total = kept.reduce((a, t) => a + w(t), 0);
  let cum = 0;
  kept = kept.filter((t) => {
    const keep = cum < s.topP * total;
    cum += w(t);
    return keep;
  });
  kept = kept.filter((t) => w(t) >= s.minP);
  const mass = kept.reduce((a, t) => a + w(t), 0);
  const p = new Float64Array(logits.length);
  for (const t of kept) p[t] = w(t) / mass;
  return p;
}

const entropy = (p: Float64Array) => p.reduce((h, x) => (x > 0 ? h - x * Math.log(x) : h), 0);

test.skipIf(probeBackend("vulkan").runsOn === null)("device sampling follows temperature, top-k, top-p and min-p (χ², α = 0.001)", async () => {
  const model = await Model.load(TINY, { threads: 2, backend: "vulkan" });
  const V = model.info.vocabSize;
  const tokenizer = await Tokenizer.load(TINY);
  const prompt = tokenizer.encodeTemplate("<|im_start|>user\nTell me a story about a dragon.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  tokenizer.free();
  const greedy = { sampling: { ...SAMPLING, temperature: 0 } };
  const explore = Math.ceil((prompt.length + 20) / PAGE);
  const pages = Int32Array.from({ length: explore }, (_, i) => i);
  const cache = model.createCache({ pageTokens: PAGE, nPages: explore + SLOTS + 1, nSlots: SLOTS + 1 });
  // the start: along the greedy continuation, the position whose distribution has the most entropy among the first 16
  let [r] = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages, sample: greedy }]);
  const context = [...prompt];
  let best = { n: context.length, token: r!.token, h: -1 };
  for (let i = 0; i < 16; i++) {
    const a = r!.token;
    const logits = new Float32Array(V);
    [r] = cache.step([{ slot: 0, nPast: context.length, tokens: Int32Array.of(a), pages, logits, sample: greedy }]);
    const h = entropy(dist(logits, SAMPLING));
    context.push(a);
    if (h > best.h) best = { n: context.length, token: a, h };
  }
  // every trial samples after context[0 .. best.n): each slot starts from slot 0's state after all but the last token,
  // reads the full pages they share and replays the last token into its own copy of the partial page
  const n = best.n;
  const shared = Math.floor((n - 1) / PAGE);
  const table = (slot: number) => Int32Array.from([...Array(shared).keys(), explore + slot]);
  cache.clearSlot(0);
  cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(context.slice(0, n - 1)), pages: table(0) }]);
  const fork = (slot: number) => {
    cache.copySlot(0, slot);
    cache.copyPage(explore, explore + slot);
  };
  const last = Int32Array.of(context[n - 1]!);
  const logits = new Float32Array(V);
  const counts = new Map<number, number>();
  let worst = 0;
  for (let t0 = 0; t0 < TRIALS; t0 += SLOTS) {
    const slots = Array.from({ length: SLOTS }, (_, i) => 1 + i);
    for (const s of slots) fork(s);
    const rows = slots.map((slot, i) => ({
      slot,
      nPast: n - 1,
      tokens: last,
      pages: table(slot),
      logits: t0 === 0 && i === 0 ? logits : undefined,
      sample: { sampling: { ...SAMPLING, seed: 5000 + t0 + i } },
    }));
    const results = cache.step(rows);
    const mx = logits.reduce((a, b) => Math.max(a, b), -Infinity);
    const lse = mx + Math.log(logits.reduce((a, z) => a + Math.exp(z - mx), 0));
    for (const res of results) {
      counts.set(res!.token, (counts.get(res!.token) ?? 0) + 1);
      worst = Math.max(worst, Math.abs(res!.logprob - (logits[res!.token]! - lse)));
    }
  }
  expect(worst).toBeLessThan(1e-4);
  const fit = chiSquare(counts, dist(logits, SAMPLING), TRIALS);
  expect(fit.bins).toBeGreaterThanOrEqual(4);
  expect(fit.chi).toBeLessThan(fit.critical);
  const power = chiSquare(counts, dist(logits, { ...SAMPLING, temperature: 1 }), TRIALS);
  expect(power.chi).toBeGreaterThan(power.critical);
  cache.free();
  model.free();
}, 600_000);
