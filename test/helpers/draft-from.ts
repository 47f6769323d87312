// Drafts from a chosen anchor through the one speculative step: the step that computes `tokens` at nPast samples the
// anchor (its mask allows that token alone) and the drafter proposes nDraft tokens after it in the same call.
import type { Sampling } from "../../src/engine/types.ts";
import type { Cache } from "../../src/native/model.ts";

export type DraftFrom = {
  slot: number;
  nPast: number;
  tokens: Int32Array; // computed before the anchor
  pages: Int32Array; // covering nPast + tokens.length + nDraft positions
  anchor: number;
  nDraft: number;
  sampling: Sampling;
  logits?: Float32Array; // out [nDraft][vocab]
  probs?: Float32Array; // out [nDraft][vocab]
};

export function onlyToken(token: number, vocab: number): Uint32Array {
  const mask = new Uint32Array(Math.ceil(vocab / 32));
  mask[token >>> 5] = 1 << (token & 31);
  return mask;
}

// The drafts of each sequence, in one step.
export function draftFrom(cache: Cache, seqs: readonly DraftFrom[]): Int32Array[] {
  const V = cache.model.info.vocabSize;
  const results = cache.step(
    seqs.map((d) => ({
      slot: d.slot,
      nPast: d.nPast,
      tokens: d.tokens,
      pages: d.pages,
      sample: { sampling: d.sampling, allowed: onlyToken(d.anchor, V) },
      speculate: { next: d.nDraft, ...(d.logits ? { nextLogits: d.logits } : {}), ...(d.probs ? { nextProbs: d.probs } : {}) },
    })),
  );
  return results.map((r, i) => {
    if (r!.token !== seqs[i]!.anchor) throw new Error(`draftFrom: sampled ${r!.token}, not the anchor ${seqs[i]!.anchor}`);
    return r!.drafts!;
  });
}
