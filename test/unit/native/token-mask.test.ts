// The rows of the output head that are no token (padding past the tokenizer, unused ids) are never sampled, drafted,
// accepted or listed, on the CPU and on Vulkan (lavapipe), and greedy or sampled: the model is loaded with the ids
// that are tokens, and the rows it would like best are made the ones that are not. Log-probabilities are taken over
// the tokens only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Sampling } from "../../../src/engine/types.ts";
import { StepRefusals } from "../../../src/native/errors.ts";
import { type Backend, Model, type StepInput, type TokenIds } from "../../../src/native/model.ts";

const DENSE = join(import.meta.dir, "../../fixtures/models/qwen35-dense-tiny");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const V = 1024;
const pages = Int32Array.from([0, 1]);

// Prompts and their raw logits at the last position, from a model loaded without a token mask.
async function rawLogits(prompts: Int32Array[]): Promise<Float32Array[]> {
  const m = await Model.load(DENSE, { threads: 2, backend: "cpu" });
  const cache = m.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
  const out = prompts.map((tokens) => {
    const logits = new Float32Array(V);
    cache.step([{ slot: 0, nPast: 0, tokens, pages, logits }]);
    return logits;
  });
  cache.free();
  m.free();
  return out;
}

const byLogit = (z: Float32Array) => Array.from(z.keys()).sort((a, b) => z[b]! - z[a]! || a - b);
const isToken = (ids: TokenIds, t: number) => t < ids.count && (!ids.mask || ((ids.mask[t >>> 5]! >>> (t & 31)) & 1) === 1);

// log Σ exp over the ids that are tokens
function lse(z: Float32Array, ids: TokenIds): number {
  let mx = -Infinity;
  for (let t = 0; t < V; t++) if (isToken(ids, t)) mx = Math.max(mx, z[t]!);
  let s = 0;
  for (let t = 0; t < V; t++) if (isToken(ids, t)) s += Math.exp(z[t]! - mx);
  return mx + Math.log(s);
}

const prompts = Array.from({ length: 6 }, (_, k) => Int32Array.from({ length: 9 }, (_, i) => (k * 131 + i * 37 + 5) % 1000));
let raw: Float32Array[];
// Holes: the 48 ids each prompt's logits rank highest are not tokens. Tail: the ids from the highest argmax of the
// prompts on are padding, so that prompt's best row is a padded one.
let holes: TokenIds;
let tail: TokenIds;

beforeAll(async () => {
  raw = await rawLogits(prompts);
  const mask = new Uint32Array(V / 32).fill(0xffffffff);
  for (const z of raw) for (const t of byLogit(z).slice(0, 48)) mask[t >>> 5]! &= ~(1 << (t & 31));
  holes = { count: V, mask };
  tail = { count: Math.max(...raw.map((z) => byLogit(z)[0]!)), mask: null };
  expect(tail.count).toBeGreaterThanOrEqual(256); // room for 20 alternatives below it
});

describe.each(["cpu", "vulkan"] as Backend[])("on %s", (backend) => {
  for (const [name, ids] of [["unused ids", () => holes], ["padding past the tokenizer", () => tail]] as const) {
    describe(name, () => {
      let model: Model;
      beforeAll(async () => {
        model = await Model.load(DENSE, { threads: 2, backend, tokens: ids() });
      });
      afterAll(() => model?.free());

      const step = (tokens: Int32Array, sample: NonNullable<StepInput["sample"]>) => {
        const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
        try {
          return cache.step([{ slot: 0, nPast: 0, tokens, pages, sample }])[0]!;
        } finally {
          cache.free();
        }
      };

      test("greedy takes the most likely token, with its log-probability over the tokens and 20 alternatives that are tokens", () => {
        prompts.forEach((tokens, k) => {
          const z = raw[k]!;
          const best = byLogit(z).find((t) => isToken(ids(), t))!;
          expect(step(tokens, { sampling: greedy }).token).toBe(best); // the GPU's own greedy path: no logprobs asked
          const out = step(tokens, { sampling: greedy, topLogprobs: 20 });
          expect(out.token).toBe(best);
          expect(out.logprob).toBeCloseTo(z[best]! - lse(z, ids()), 3);
          expect(out.top!.map((x) => x.id)).toEqual(byLogit(z).filter((t) => isToken(ids(), t)).slice(0, 20));
        });
      });

      test("sampling at temperature 2 never draws a row that is no token, nor lists one", () => {
        for (let seed = 0; seed < 40; seed++) {
          const k = seed % prompts.length;
          const out = step(prompts[k]!, { sampling: { ...greedy, temperature: 2, seed }, topLogprobs: 20 });
          expect(isToken(ids(), out.token)).toBe(true);
          for (const x of out.top!) expect(isToken(ids(), x.id)).toBe(true);
        }
      });

      test("a grammar mask that allows only rows that are no token refuses that sequence", () => {
        const allowed = new Uint32Array(V / 32);
        const t = byLogit(raw[0]!).find((x) => !isToken(ids(), x))!;
        allowed[t >>> 5] = 1 << (t & 31);
        let err: unknown;
        try {
          step(prompts[0]!, { sampling: greedy, allowed });
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(StepRefusals);
        expect((err as StepRefusals).message).toContain("allows none of the model's tokens");
      });

      test("a logit bias naming a row that is no token refuses that sequence", () => {
        const t = byLogit(raw[0]!).find((x) => !isToken(ids(), x))!;
        let err: unknown;
        try {
          step(prompts[0]!, { sampling: { ...greedy, logitBias: { ids: Int32Array.from([t]), values: Float32Array.from([-5]) } } });
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(StepRefusals);
        expect((err as StepRefusals).message).toContain(`bias_ids[0] = ${t} is not a token of the model`);
      });
    });
  }
});

test("an MTP drafter never proposes a row that is no token, greedy or sampled", async () => {
  const model = await Model.load(DENSE, { threads: 2, backend: "cpu", tokens: tail, drafter: { kind: "mtp", maxDraft: 3 } });
  const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
  try {
    for (const [k, tokens] of prompts.entries()) {
      for (const sampling of [greedy, { ...greedy, temperature: 2, seed: k }]) {
        const [r] = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling }, speculate: { next: 3 } }]);
        expect(r!.drafts).toHaveLength(3);
        for (const d of r!.drafts!) expect(d).toBeLessThan(tail.count);
      }
    }
  } finally {
    cache.free();
    model.free();
  }
});

test("a tokenizer with more ids than the output head has rows is refused at load", async () => {
  let err: unknown;
  try {
    await Model.load(DENSE, { threads: 2, tokens: { count: V + 1, mask: null } });
  } catch (e) {
    err = e;
  }
  expect(String(err)).toContain("n_tokens 1025: the tokenizer has more ids than the model's 1024 output rows");
});
