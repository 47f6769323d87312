// What the engine needs from a model, and nothing more: the narrow seam between the scheduler and libsplash
// (src/engine/native-runner.ts adapts src/native/ to it; the unit tests use a toy). Ids of pages and slots are
// 0..n-1 and the engine owns their allocation; the runner only reads and writes what a step tells it.
import type { Drafter } from "../models/spec.ts";
import type { CacheGeometry, SampledToken, StepInput } from "../native/model.ts";
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
  // How the speculation policy times a step: "cpu" where the steps compute on this machine's cores (their threads' CPU
  // time; a wall clock on a shared machine also times the neighbours), "wall" where the host records work for a
  // device and waits for it without using a core (a GPU backend).
  readonly stepClock: StepClock;
  createRunner(cache: CacheGeometry): StepRunner;
}

export type StepClock = "cpu" | "wall";

export type DrafterSpec = {
  kind: Drafter;
  maxDraft: number; // drafts per cycle at most
  maxSeqs: number; // sequences one step verifies, and drafts for, at most
};

// The binding's own types: a cache's shape, one sequence's share of a step (its tokens at positions nPast…, its
// pages and slot, what to sample after the last position, its speculative part: a verify block of the drafts its
// last step proposed and how many to draft after this one, images), and what a step samples (after a verify block,
// `accepted` holds the drafts kept before the token; `drafts` the next block's drafts).
export type { CacheGeometry, SampledToken, StepInput, TokenChoice } from "../native/model.ts";

// Host copies (the prefix cache's disk tier) are of pageBytes(pageTokens) and slotBytes bytes, called between steps.
export interface StepRunner extends HostCopies {
  // One forward pass over the batch; an entry per sequence: its sample, null where it did not sample, or an Error
  // when the sample of that sequence alone could not be taken (the others are unaffected). The sample of a
  // sequence must not depend on the rest of the batch (its RNG is a function of its seed and position). With a
  // drafter, verify blocks are accepted and the next drafts proposed in the same step.
  step(seqs: readonly StepInput[]): Promise<(SampledToken | Error | null)[]>;
  copySlot(src: number, dst: number): void; // GDN snapshot save and restore
  clearSlot(slot: number): void; // state of an empty prefix
  close(): void; // frees the cache (the model stays loaded)
}
