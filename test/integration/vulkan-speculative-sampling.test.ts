// Speculative sampling on Vulkan keeps the target's distribution: the verify block's p(d) and the bonus token come
// from the device's sampler (kernels/sample.comp), the residual draw from the one rejected row read back. On
// splash-tiny with its MTP layer on lavapipe (skipped where no Vulkan device exists), sampling at temperature 1 with
// top-k 8, many cycles run from the same state, each with its own seed: the step before drafts 3 tokens from a chosen
// anchor, the verify step accepts or resamples. The first token a cycle emits must follow the target's distribution
// p0 at that position (χ² goodness of fit at α = 0.001 over fixed seeds), and must not fit p0 at temperature 0.5 — so
// the test can fail; both acceptance and the residual draw must be at work.
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { Sampling } from "../../src/engine/types.ts";
import { Model, probeBackend } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { chiSquare } from "../helpers/chi-square.ts";
import { draftFrom } from "../helpers/draft-from.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
const SAMPLING: Sampling = { temperature: 1, topP: 1, topK: 8, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const TRIALS = 512;
const SLOTS = 16; // cycles per draft step and per verify step
const PAGE = 16;

// The target's sampling distribution (top-k 8) of a logits row at temperature t.
function targetDist(logits: Float32Array, t: number): Float64Array {
  const top = [...logits.keys()].sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, SAMPLING.topK);
  const p = new Float64Array(logits.length);
  const mx = logits[top[0]!]!;
  const total = top.reduce((s, i) => s + Math.exp((logits[i]! - mx) / t), 0);
  for (const i of top) p[i] = Math.exp((logits[i]! - mx) / t) / total;
  return p;
}

const count = (m: Map<number, number>, t: number) => m.set(t, (m.get(t) ?? 0) + 1);
const entropy = (p: Float64Array) => p.reduce((h, x) => (x > 0 ? h - x * Math.log(x) : h), 0);

test.skipIf(probeBackend("vulkan").runsOn === null)("the first emitted token follows the target's p on Vulkan (χ², α = 0.001)", async () => {
  const model = await Model.load(TINY, { threads: 2, backend: "vulkan", drafter: { kind: "mtp", maxSeqs: SLOTS } });
  const V = model.info.vocabSize;
  const k = model.drafter!.maxDraft;
  const tokenizer = await Tokenizer.load(TINY);
  const prompt = tokenizer.encodeTemplate("<|im_start|>user\nTell me a story about a dragon.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  tokenizer.free();
  const greedy = { sampling: { ...SAMPLING, temperature: 0 } };
  const explore = Math.ceil((prompt.length + 20) / PAGE);
  const cache = model.createCache({ pageTokens: PAGE, nPages: explore + 2 * (SLOTS + 2), nSlots: SLOTS + 2 });
  // the start: along the greedy continuation, the position whose distribution has the most entropy among the first 12
  const all = Int32Array.from({ length: explore }, (_, i) => i);
  let [r] = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages: all, sample: greedy }]);
  const context = [...prompt];
  let best = { context, anchor: r!.token, h: -1, logits: new Float32Array(V) };
  for (let i = 0; i < 12; i++) {
    const a = r!.token;
    const logits = new Float32Array(V);
    [r] = cache.step([{ slot: 0, nPast: context.length, tokens: Int32Array.of(a), pages: all, logits, sample: greedy }]);
    const h = entropy(targetDist(logits, 1));
    if (h > best.h) best = { context: [...context], anchor: a, h, logits };
    context.push(a);
  }
  // a cycle: the step of the context's last token samples the anchor and drafts after it, then the verify step; every
  // cycle starts from the state of the context's first n − 1 tokens
  const n = best.context.length;
  const shared = Math.floor((n - 1) / PAGE);
  expect(n + k + 1 - shared * PAGE).toBeLessThanOrEqual(2 * PAGE);
  const table = (slot: number) => Int32Array.from([...Array(shared).keys(), explore + 2 * slot, explore + 2 * slot + 1]);
  cache.clearSlot(0);
  cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(best.context.slice(0, n - 1)), pages: table(0) }]);
  const last = Int32Array.of(best.context[n - 1]!);
  const anchor = best.anchor;
  const fork = (slot: number) => {
    cache.copySlot(0, slot);
    cache.copyPage(table(0)[shared]!, table(slot)[shared]!);
  };
  // the target's logits after the anchor at position n, as the verify block's first row sees them
  fork(SLOTS + 1);
  const logits0 = new Float32Array(V);
  cache.step([{ slot: SLOTS + 1, nPast: n - 1, tokens: Int32Array.from([last[0]!, anchor]), pages: table(SLOTS + 1), logits: logits0 }]);

  const firsts = new Map<number, number>();
  let kept = 0;
  let rejected = 0;
  for (let t0 = 0; t0 < TRIALS; t0 += SLOTS) {
    const slots = Array.from({ length: SLOTS }, (_, i) => 1 + i);
    for (const s of slots) fork(s);
    const sampling = (i: number): Sampling => ({ ...SAMPLING, seed: 5000 + t0 + i });
    const drafts = draftFrom(cache, slots.map((slot, i) => ({ slot, nPast: n - 1, tokens: last, anchor, nDraft: k, pages: table(slot), sampling: sampling(i) })));
    const results = cache.step(
      slots.map((slot, i) => ({ slot, nPast: n, tokens: Int32Array.from([anchor, ...drafts[i]!]), pages: table(slot), sample: { sampling: sampling(i) }, speculate: { verify: { nDraft: k, nProposed: k } } })),
    );
    for (const res of results) {
      const emitted = [...res!.accepted!.map((a) => a.token), res!.token];
      count(firsts, emitted[0]!);
      if (res!.accepted!.length > 0) kept++;
      if (res!.accepted!.length < k) rejected++;
    }
  }
  const fit = chiSquare(firsts, targetDist(logits0, 1), TRIALS);
  expect(fit.bins).toBeGreaterThanOrEqual(3);
  expect(fit.chi).toBeLessThan(fit.critical);
  const power = chiSquare(firsts, targetDist(logits0, 0.5), TRIALS);
  expect(power.chi).toBeGreaterThan(power.critical);
  expect(kept).toBeGreaterThan(TRIALS / 8); // acceptance at work …
  expect(rejected).toBeGreaterThan(TRIALS / 8); // … and the residual draw
  cache.free();
  model.free();
}, 600_000);
