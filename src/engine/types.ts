import type { DiskTierStats } from "./disk-cache.ts";

// The engine's interface: token ids in, token ids out. One Engine per loaded model runs one loop that batches all
// of its requests (src/engine/scheduler.ts). The chat layer (src/chat/generate.ts) renders and tokenizes a
// conversation, calls generate(), and detokenizes and parses what comes back; the engine never sees text.
import type { DraftMethod, Drafter } from "../models/spec.ts";

export type Sampling = {
  temperature: number; // 0 = greedy
  topP: number;
  topK: number; // 0 = off
  minP: number;
  presencePenalty: number;
  frequencyPenalty: number;
  repetitionPenalty: number; // 1 = off
  seed: number; // sampling is reproducible for a given seed, whatever the batch
  logitBias?: LogitBias;
};

// Added to the logits of the named tokens before sampling (OpenAI's logit_bias): ids that are tokens of the model.
export type LogitBias = { ids: Int32Array; values: Float32Array };

// A token-level constraint (structured output): the engine asks it for the allowed tokens before each sampled
// position and tells it which token was chosen. Implemented by src/engine/grammar/.
export interface TokenConstraint {
  // Writes the allowed-token bitmask for the next position (bit t of word t>>5 set = token t allowed); stop tokens
  // are set where the output may end.
  fillMask(mask: Uint32Array): void;
  // Advances past an accepted token; false if the token was not allowed (a bug, or a draft to reject). Stop tokens
  // are never accepted: they end the output without being part of it (the engine ends the sequence on one).
  accept(token: number): boolean;
  // Undoes the last n accepted tokens (speculative decoding rejected them).
  rollback(n: number): void;
  // True when the constrained value is complete; the engine then ends the output.
  isComplete(): boolean;
  // Frees what the constraint holds (grammar matcher memory in WebAssembly). Called by whoever made the constraint
  // (src/chat/generate.ts) once the engine request has ended, however it ended; safe to call twice.
  release?(): void;
}

export type GenerateRequest = {
  prompt: Int32Array; // the rendered, tokenized prompt
  maxTokens: number; // already capped by the caller at the model's context minus the prompt
  sampling: Sampling;
  // The caller chose sampling.seed: a sampled output must then be the same for it whatever else is batched, which
  // fixes how the sequence speculates (speculation.ts). Otherwise the seed is the engine's own random pick.
  seeded?: boolean;
  stopTokens: number[]; // end of turn (e.g. <|im_end|>, <|endoftext|>)
  topLogprobs?: number; // undefined = no logprobs
  constraint?: TokenConstraint;
  // Speculative decoding with the engine's drafter: "none" turns it off; "auto" (or nothing) uses it; a named
  // drafter other than the engine's runs without speculation.
  draft?: "auto" | DraftMethod;
  signal: AbortSignal;
  // Prompt positions worth a GDN state snapshot for the prefix cache, besides the engine's own (the end of the
  // prompt and every few thousand tokens): message ends such as the end of the system prompt and tools, where other
  // conversations or the next turn diverge. The engine rounds each down to its block size.
  snapshotAt?: number[];
  // Images in the prompt (vision models; src/vision/prompt.ts builds this).
  images?: PromptImages;
};

// The pads of image k, prompt[start, start + rows), take embeds ([rows][hidden], the vision tower's output) instead of
// their embedding, and `hash` (the image's content) names the blocks that hold them in the prefix cache. positions:
// the prompt's M-RoPE (t, h, w) ids [prompt.length][3]; a token at index i past the prompt sits at i + ropeDelta.
export type PromptImages = {
  spans: { start: number; rows: number; embeds: Float32Array; hash: string }[];
  positions: Int32Array;
  ropeDelta: number;
};

export type GeneratedToken = { id: number; logprob?: number; top?: { id: number; logprob: number }[] };

export type EngineEvent =
  // Once, when the request was admitted and its prompt's cached part is known.
  | { type: "admitted"; promptTokens: number; cachedPromptTokens: number }
  // Tokens produced by one step (more than one when speculation accepted several). The stop token that ends an
  // output is not among them.
  | { type: "tokens"; tokens: GeneratedToken[] }
  | { type: "done"; reason: "stop" | "length" | "cancelled" | "constraint_complete"; speculation?: SpeculationCounts };

// Speculative decoding of one request or of all: verify cycles, drafts verified, drafts accepted. The mean
// acceptance length (tokens per cycle, the target's own token included) is (accepted + cycles) / cycles. A request's
// counts also give, per draft position j, the cycles that verified a j-th draft and those that accepted it.
export type SpeculationCounts = { cycles: number; drafted: number; accepted: number; verifiedAt?: number[]; acceptedAt?: number[] };

// Upper bounds of the per-request mean acceptance length histogram in EngineStats (the last bucket is +Inf).
export const ACCEPTANCE_BUCKETS = [1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 8, 12, 16];

export type EngineStats = {
  running: number;
  queued: number;
  stateBytesInUse: number; // KV pages + GDN state slots held by sequences and the prefix cache
  stateBytesBudget: number;
  prefixCacheHitTokens: number; // cumulative, every tier
  // The prefix cache by tier: prompt tokens served since start, and bytes held now (memory: its evictable pages and
  // snapshots; disk: its files, with the budget and activity), when the engine has the tier.
  prefixCacheTiers?: { memory: { hitTokens: number; bytes: number }; disk?: { hitTokens: number } & DiskTierStats };
  promptTokensComputed: number; // cumulative: prompt tokens run through the model (prefix-cache hits excluded)
  generatedTokens: number; // cumulative: tokens handed to requests, accepted drafts included, as they are made
  sequenceStateBytes?: number; // the part of stateBytesInUse held by running sequences (the rest is evictable cache)
  peakSequenceStateBytes?: number; // the most sequenceStateBytes has been since the engine started
  // With a drafter: cumulative counts, and how many finished requests had each mean acceptance length
  // (requestAcceptance[i] counts those ≤ ACCEPTANCE_BUCKETS[i] and above the bucket before; one more for +Inf).
  speculation?: SpeculationCounts & { drafter: Drafter; requestAcceptance: number[]; requestAcceptanceSum: number };
};

export interface Engine {
  // Streams the generation. Throws EngineOverloaded when the wait queue is full and PromptTooLong when the prompt
  // cannot fit the model's context; never fails for memory once admitted.
  generate(req: GenerateRequest): AsyncIterable<EngineEvent>;
  stats(): EngineStats;
  close(): Promise<void>;
}

export class EngineOverloaded extends Error {
  override name = "EngineOverloaded";
  constructor(readonly retryAfterSeconds: number) {
    super(`the server is at capacity; retry after ${retryAfterSeconds} s`);
  }
}

// `atLeast`: promptTokens is a lower bound (the prompt was refused before it was tokenized whole).
export class PromptTooLong extends Error {
  override name = "PromptTooLong";
  constructor(
    readonly promptTokens: number,
    readonly contextTokens: number,
    readonly atLeast = false,
  ) {
    super(`the prompt is ${atLeast ? "at least " : ""}${promptTokens} tokens, more than the model's context of ${contextTokens} tokens`);
  }
}
