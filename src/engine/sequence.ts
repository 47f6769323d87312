// One request as the engine loop sees it. Two numbers describe where it is, whatever it is doing: `length`, the
// tokens known (prompt + generated), and `computed`, the tokens whose KV and GDN state are in the cache. Each step
// hands a sequence tokens so `computed` catches up with `length`; when it does, the step samples the next token.
// Prefill, chunked prefill, prefix-cache resumption and decode are all this one rule.
import type { BlockExtras, BlockHash } from "./block-hash.ts";
import type { Holdings } from "./cache-manager.ts";
import { imageBlockExtras } from "./images.ts";
import type { Speculation } from "./speculation.ts";
import type { EngineEvent, GenerateRequest, GeneratedToken } from "./types.ts";

export type FinishReason = Extract<EngineEvent, { type: "done" }>["reason"];

// Where a sequence's events go (the engine's per-request stream).
export interface SequenceSink {
  admitted(promptTokens: number, cachedPromptTokens: number): void;
  tokens(tokens: GeneratedToken[]): void;
  done(reason: FinishReason): void;
  error(e: Error): void;
}

export class Sequence {
  readonly tokens: Int32Array; // prompt, then generated tokens; room for maxTokens
  readonly promptLength: number;
  length: number;
  computed = 0;
  cache: Holdings | undefined;
  readonly hashes: BlockHash[] = []; // block chain of the known tokens, as far as hashed
  readonly extras: BlockExtras | undefined; // what else names its blocks (the prompt's images)
  cancelled = false;
  mask: Uint32Array | undefined; // allowed-token bitmask, when constrained
  failed: Error | undefined; // a call to its constraint threw: it ends with this error when the step completes
  speculation: Speculation | undefined; // speculative decoding state, once the sequence drafts
  drafts: Int32Array | undefined; // what its last step drafted, verified at its next
  readonly stopTokens: Set<number>;
  readonly enqueuedAt = performance.now();
  admittedAt = 0;

  constructor(
    readonly id: number,
    readonly request: GenerateRequest,
    readonly maxTokens: number,
    readonly sink: SequenceSink,
  ) {
    this.promptLength = request.prompt.length;
    this.tokens = new Int32Array(this.promptLength + maxTokens);
    this.tokens.set(request.prompt);
    this.length = this.promptLength;
    this.stopTokens = new Set(request.stopTokens);
    this.extras = imageBlockExtras(request.images);
  }

  get generated(): number {
    return this.length - this.promptLength;
  }

  // Positions whose KV may ever be needed: the last sampled token is never fed back.
  get worstTokens(): number {
    return this.promptLength + this.maxTokens - 1;
  }
}
