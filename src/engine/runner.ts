// What the engine needs from a model, and nothing more: the narrow seam between the scheduler and libsplash
// (src/engine/native-runner.ts adapts src/native/ to it; the unit tests use a toy). Ids of pages and slots are
// 0..n-1 and the engine owns their allocation; the runner only reads and writes what a step tells it.
import type { Drafter } from "../models/spec.ts";
import type { CacheGeometry, DraftInput, SampledToken, StepInput } from "../native/model.ts";
import type { HostCopies } from "./cache-manager.ts";

// A model before its sequence-state cache exists: enough to plan memory and then create the cache.
export interface StepModel {
  readonly vocabSize: number;
  readonly contextTokens: number; // the model's maximum positions
  readonly maxStepTokens: number; // tokens one step may carry (the native scratch is sized for it)
  readonly fixedBytes: number; // weights + drafter + scratch: memory that is not sequence state
  // Bytes of one KV page of `pageTokens` tokens (all full-attention layers, K and V) and of one GDN state slot
  // (recurrent S and conv tail of every linear-attention layer). The native allocator uses the same functions, so
  // a plan made from them is exact.
  pageBytes(pageTokens: number): number;
  readonly slotBytes: number;
  // The attached speculative drafter, if any (its weights and scratch are in fixedBytes, its K/V in pageBytes).
  readonly drafter?: DrafterSpec;
  createRunner(cache: CacheGeometry): StepRunner;
}

export type DrafterSpec = {
  kind: Drafter;
  maxDraft: number; // drafts per cycle at most
  maxSeqs: number; // sequences one draft call or step verifies at most
};

// The binding's own types: a cache's shape, one sequence's share of a step (its tokens at positions nPast…, its
// pages and slot, what to sample after the last position, a verify block's drafts, images), one sequence to draft
// for (its last sampled token, the anchor, at position nPast, not yet computed), and what a step samples (after a
// verify block, `accepted` holds the drafts kept before the token).
export type { CacheGeometry, DraftInput, SampledToken, StepInput, TokenChoice } from "../native/model.ts";

// Host copies (the prefix cache's disk tier) are of pageBytes(pageTokens) and slotBytes bytes, called between steps.
export interface StepRunner extends HostCopies {
  // One forward pass over the batch; an entry per sequence: its sample, null where it did not sample, or an Error
  // when the sample of that sequence alone could not be taken (the others are unaffected). The sample of a
  // sequence must not depend on the rest of the batch (its RNG is a function of its seed and position).
  step(seqs: readonly StepInput[]): Promise<(SampledToken | Error | null)[]>;
  // Proposes drafts for each sequence (only when the model has a drafter); the step right after verifies them.
  draft?(seqs: readonly DraftInput[]): Promise<Int32Array[]>;
  copySlot(src: number, dst: number): void; // GDN snapshot save and restore
  clearSlot(slot: number): void; // state of an empty prefix
  close(): void; // frees the cache (the model stays loaded)
}
