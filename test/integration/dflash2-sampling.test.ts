// Rejection sampling over the DFlash2 selector's candidates is exact. On splash-tiny with its DFlash2 drafter, sampling
// at temperature 1 with top-k 8 on the target, many cycles run from the same state, each with its own seed: the draft
// is the selector's walk drawn from q = softmax(scores) over each row's candidates, then the target's verify block
// accepts or resamples. The first token a cycle emits must follow the target's distribution p0 at that position and,
// in cycles that kept the first draft x, the second must follow p1(· | x): χ² goodness of fit at α = 0.001 over
// fixed seeds (the same draws every run). The drafts themselves fail the same test (the selector's q is not p), and a
// good share is accepted, so the test exercises acceptance and the residual draw alike, and cannot pass by accident.
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { Sampling } from "../../src/engine/types.ts";
import { Model } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { draftFrom } from "../helpers/draft-from.ts";
import { chiSquare } from "../helpers/chi-square.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
const SAMPLING: Sampling = { temperature: 1, topP: 1, topK: 8, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const TRIALS = 4096;
const SLOTS = 8; // cycles per draft step and per verify step
const PAGE = 16;

// The target's sampling distribution (temperature 1, top-k 8) of a logits row.
function targetDist(logits: Float32Array): Float32Array {
  const top = [...logits.keys()].sort((a, b) => logits[b]! - logits[a]! || a - b).slice(0, SAMPLING.topK);
  const p = new Float32Array(logits.length);
  const mx = logits[top[0]!]!;
  const total = top.reduce((s, t) => s + Math.exp(logits[t]! - mx), 0);
  for (const t of top) p[t] = Math.exp(logits[t]! - mx) / total;
  return p;
}

const count = (m: Map<number, number>, t: number) => m.set(t, (m.get(t) ?? 0) + 1);
const entropy = (p: Float32Array) => p.reduce((h, x) => (x > 0 ? h - x * Math.log(x) : h), 0);

test("the first and second emitted tokens follow the target's p (χ², α = 0.001); the selector's drafts do not", async () => {
  const model = await Model.load(TINY, { threads: 2, drafter: { kind: "dflash2", dir: join(TINY, "dflash2") } });
  const V = model.info.vocabSize;
  const k = model.drafter!.maxDraft;
  const tokenizer = await Tokenizer.load(TINY);
  const prompt = tokenizer.encodeTemplate("<|im_start|>user\nWrite a Python function that returns the n-th Fibonacci number.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  tokenizer.free();
  const greedy = { sampling: { ...SAMPLING, temperature: 0 } };
  const explore = Math.ceil((prompt.length + 40) / PAGE); // pages 0 … explore − 1
  const cache = model.createCache({ pageTokens: PAGE, nPages: explore + 2 * (SLOTS + 2), nSlots: SLOTS + 2 });
  // the start: along the greedy continuation, the position whose next-token distribution (the p0 checked below) has
  // the most entropy among the first 32, so that both the acceptance and the residual have something to do
  const all = Int32Array.from({ length: explore }, (_, i) => i);
  let [r] = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages: all, sample: greedy }]);
  const context = [...prompt];
  let best = { context, anchor: r!.token, h: -1 };
  for (let i = 0; i < 32; i++) {
    const a = r!.token;
    const logits = new Float32Array(V);
    [r] = cache.step([{ slot: 0, nPast: context.length, tokens: Int32Array.of(a), pages: all, logits, sample: greedy }]);
    const h = entropy(targetDist(logits));
    if (h > best.h) best = { context: [...context], anchor: a, h };
    context.push(a);
  }
  // a cycle: the step of the context's last token (position n − 1) samples the anchor and drafts after it, then the
  // verify step; every cycle starts from the state of the context's first n − 1 tokens
  const n = best.context.length;
  const shared = Math.floor((n - 1) / PAGE); // full context pages every cycle reads; the rest is each slot's own
  expect(n + k + 1 - shared * PAGE).toBeLessThanOrEqual(2 * PAGE);
  const table = (slot: number) => Int32Array.from([...Array(shared).keys(), explore + 2 * slot, explore + 2 * slot + 1]);
  cache.clearSlot(0);
  cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(best.context.slice(0, n - 1)), pages: table(0) }]);
  const last = Int32Array.of(best.context[n - 1]!);
  const anchor = best.anchor;
  // a cycle's starting state in `slot`: the context's GDN state and a private copy of its last, partial page
  const fork = (slot: number) => {
    cache.copySlot(0, slot);
    cache.copyPage(table(0)[shared]!, table(slot)[shared]!);
  };
  // the target's distribution after `tokens` (anchor first) at positions n …
  const target = (tokens: number[]) => {
    const scratch = SLOTS + 1;
    fork(scratch);
    const logits = new Float32Array(V);
    cache.step([{ slot: scratch, nPast: n - 1, tokens: Int32Array.from([last[0]!, ...tokens]), pages: table(scratch), logits }]);
    return targetDist(logits);
  };

  const emitted: number[][] = [];
  const drafted = new Map<number, number>();
  for (let t0 = 0; t0 < TRIALS; t0 += SLOTS) {
    const slots = Array.from({ length: SLOTS }, (_, i) => 1 + i);
    for (const s of slots) fork(s);
    const sampling = (i: number): Sampling => ({ ...SAMPLING, seed: 1000 + t0 + i });
    const drafts = draftFrom(cache, slots.map((slot, i) => ({ slot, nPast: n - 1, tokens: last, anchor, nDraft: k, pages: table(slot), sampling: sampling(i) })));
    const results = cache.step(
      slots.map((slot, i) => ({ slot, nPast: n, tokens: Int32Array.from([anchor, ...drafts[i]!]), pages: table(slot), sample: { sampling: sampling(i) }, speculate: { verify: { nDraft: k, nProposed: k } } })),
    );
    results.forEach((r, i) => {
      emitted.push([...r!.accepted!.map((a) => a.token), r!.token]);
      count(drafted, drafts[i]![0]!);
    });
  }

  const p0 = target([anchor]);
  const firsts = new Map<number, number>();
  for (const e of emitted) count(firsts, e[0]!);
  const fit0 = chiSquare(firsts, p0, TRIALS);
  expect(fit0.bins).toBeGreaterThanOrEqual(3);
  expect(fit0.chi).toBeLessThan(fit0.critical);
  const power = chiSquare(drafted, p0, TRIALS);
  expect(power.chi).toBeGreaterThan(power.critical);

  // the second token, in the cycles that kept the most often kept first draft x
  const kept = new Map<number, number>();
  for (const e of emitted) if (e.length > 1) count(kept, e[0]!);
  const [x, nx] = [...kept].sort((a, b) => b[1] - a[1])[0]!;
  const keptTotal = [...kept.values()].reduce((a, b) => a + b, 0);
  expect(keptTotal).toBeGreaterThan(TRIALS / 4); // acceptance at work, not only the residual
  expect(nx).toBeGreaterThan(500);
  const p1 = target([anchor, x]);
  const seconds = new Map<number, number>();
  for (const e of emitted) if (e.length > 1 && e[0] === x) count(seconds, e[1]!);
  const fit1 = chiSquare(seconds, p1, nx);
  expect(fit1.bins).toBeGreaterThanOrEqual(2);
  expect(fit1.chi).toBeLessThan(fit1.critical);
  cache.free();
  model.free();
}, 300_000);

// The selector takes its candidates and their unary scores from the drafter's row as the target samples it (penalties,
// logit bias, the model's tokens): a token the bias boosts by 100 is every draft, greedy and sampled, though the raw
// row ranks it nowhere near the top; a token the bias bans is never drafted.
test("a logit bias moves the selector's candidates: boosted, every draft; banned, none", async () => {
  const model = await Model.load(TINY, { threads: 2, drafter: { kind: "dflash2", dir: join(TINY, "dflash2") } });
  const V = model.info.vocabSize;
  const k = model.drafter!.maxDraft;
  const tokenizer = await Tokenizer.load(TINY);
  const prompt = tokenizer.encodeTemplate("<|im_start|>user\nWrite a Python function that reverses a string.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  tokenizer.free();
  const cache = model.createCache({ pageTokens: PAGE, nPages: Math.ceil((prompt.length + k + 1) / PAGE), nSlots: 1 });
  const pages = Int32Array.from({ length: Math.ceil((prompt.length + k + 1) / PAGE) }, (_, i) => i);
  const greedy: Sampling = { ...SAMPLING, temperature: 0 };
  const [r] = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages, sample: { sampling: greedy } }]);
  // each draft: the prompt's step again (from a zero state), sampling its token and drafting after it
  const draft = (sampling: Sampling) => {
    const logits = new Float32Array(k * V);
    const [tokens] = draftFrom(cache, [{ slot: 0, nPast: 0, tokens: prompt, anchor: r!.token, nDraft: k, pages, sampling, logits }]);
    return { tokens: [...tokens!], logits };
  };
  const plain = draft(greedy);
  // the boosted token: the raw row's 1000th at the first draft, far outside the selector's top-k
  const row = plain.logits.subarray(0, V);
  const boosted = [...row.keys()].sort((a, b) => row[b]! - row[a]! || a - b)[1000]!;
  const bias = (id: number, value: number) => ({ ids: Int32Array.of(id), values: Float32Array.of(value) });
  expect(draft({ ...greedy, logitBias: bias(boosted, 100) }).tokens).toEqual(Array(k).fill(boosted));
  expect(draft({ ...SAMPLING, seed: 7, logitBias: bias(boosted, 100) }).tokens).toEqual(Array(k).fill(boosted));
  const banned = plain.tokens[0]!;
  for (const sampling of [greedy, { ...SAMPLING, seed: 7 }]) expect(draft({ ...sampling, logitBias: bias(banned, -100) }).tokens).not.toContain(banned);
  cache.free();
  model.free();
}, 60_000);
