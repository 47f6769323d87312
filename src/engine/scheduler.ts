// Policy: who waits, who runs, and what each step carries. Synchronous and model-free (the engine loop in engine.ts
// runs the steps), so every decision can be tested on a toy.
//
// A step carries at most maxStepTokens tokens. Sequences that are one token behind (decoding) go first, one token
// each, so a stream gets a token every step whatever else arrives; the rest of the budget goes to sequences that are
// further behind (prompts), oldest first, in chunks. While any stream is decoding, the prompt tokens of a step are
// further capped by the engine (`promptLimit`, from the measured cost of a prompt token and a target step time), so
// a long new prompt delays each running stream's next token by about that target: the decode-stall bound.
//
// Chunks are cut at block boundaries (multiples of pageTokens) and at snapshot points, so a prompt is split at the
// same positions whether it runs alone, next to others, or resumes from the prefix cache.
import type { KVCacheManager } from "./cache-manager.ts";
import type { StepSequence, SampledToken } from "./runner.ts";
import type { FinishReason, Sequence } from "./sequence.ts";
import type { GeneratedToken } from "./types.ts";

export type SchedulerOptions = {
  maxStepTokens: number;
  maxRunning: number;
  maxQueue: number;
  vocabSize: number;
};

export type StepChunk = { seq: Sequence; start: number; count: number; sample: boolean };
export type StepPlan = { chunks: StepChunk[]; batch: StepSequence[]; decodeTokens: number; promptTokens: number };

export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  // Called with each finished sequence (after its memory is released).
  onFinish: (seq: Sequence) => void = () => {};

  constructor(
    readonly cache: KVCacheManager,
    readonly options: SchedulerOptions,
  ) {
    const B = cache.options.pageTokens;
    if (options.maxStepTokens < options.maxRunning + B) {
      throw new Error(`maxStepTokens (${options.maxStepTokens}) must hold a decode token per running sequence (${options.maxRunning}) plus a block (${B})`);
    }
  }

  // False when the wait queue is full.
  enqueue(seq: Sequence): boolean {
    if (this.waiting.length >= this.options.maxQueue) return false;
    this.waiting.push(seq);
    return true;
  }

  // A waiting sequence leaves at once; a running one is marked and released at the next step boundary (reap).
  cancel(seq: Sequence): void {
    seq.cancelled = true;
    const i = this.waiting.indexOf(seq);
    if (i >= 0) {
      this.waiting.splice(i, 1);
      this.finish(seq, "cancelled");
    }
  }

  // Releases cancelled running sequences.
  reap(): void {
    for (const seq of this.running.filter((s) => s.cancelled)) this.finish(seq, "cancelled");
  }

  // Admits waiting sequences in order while the head fits (strictly FIFO: a large request is not overtaken
  // forever by small ones). Returns how many were admitted.
  admit(): number {
    let n = 0;
    while (this.waiting.length > 0 && this.running.length < this.options.maxRunning) {
      const seq = this.waiting[0]!;
      const h = this.cache.admit(seq.request.prompt, seq.worstTokens, seq.request.snapshotAt, seq.hashes);
      if (!h) break;
      this.waiting.shift();
      seq.cache = h;
      seq.computed = h.resume;
      seq.admittedAt = performance.now();
      this.running.push(seq);
      seq.sink.admitted(seq.promptLength, h.resume);
      n++;
    }
    return n;
  }

  // The next step, or undefined when no sequence has anything to compute. `promptLimit` caps the prompt tokens of
  // a step that also carries decode tokens.
  schedule(promptLimit = Infinity): StepPlan | undefined {
    const chunks: StepChunk[] = [];
    for (const seq of this.running) {
      if (seq.length - seq.computed === 1) chunks.push({ seq, start: seq.computed, count: 1, sample: true });
    }
    const decodeTokens = chunks.length;
    let room = this.options.maxStepTokens - decodeTokens;
    if (decodeTokens > 0) room = Math.min(room, Math.max(promptLimit, this.cache.options.pageTokens));
    for (const seq of this.running) {
      if (seq.length - seq.computed <= 1 || room === 0) continue;
      const count = this.chunkLength(seq, room);
      if (count === 0) continue;
      chunks.push({ seq, start: seq.computed, count, sample: seq.computed + count === seq.length });
      room -= count;
    }
    if (chunks.length === 0) return undefined;
    const promptTokens = chunks.reduce((n, c) => n + c.count, 0) - decodeTokens;
    return { chunks, batch: chunks.map((c) => this.stepSequence(c)), decodeTokens, promptTokens };
  }

  // Applies a step's results: advances `computed`, names full blocks and takes snapshots, appends sampled tokens,
  // and finishes sequences that are done.
  complete(plan: StepPlan, results: readonly (SampledToken | null)[]): void {
    plan.chunks.forEach((c, i) => {
      const seq = c.seq;
      seq.computed = c.start + c.count;
      this.cache.commit(seq.cache!, seq.tokens, seq.computed);
      if (seq.cancelled) return this.finish(seq, "cancelled");
      if (!c.sample) return;
      const r = results[i];
      if (!r) throw new Error(`step returned no token for sequence ${seq.id}`);
      this.accept(seq, r);
    });
  }

  // A failed step: every sequence in it ends with the error.
  fail(plan: StepPlan, e: Error): void {
    for (const c of plan.chunks) if (c.seq.cache) this.finish(c.seq, e);
  }

  // Every sequence, waiting or running, ends as cancelled (engine shutdown).
  cancelAll(): void {
    for (const seq of [...this.waiting]) this.cancel(seq);
    for (const seq of [...this.running]) this.finish(seq, "cancelled");
  }

  // ---- internal ----

  // How many of the sequence's pending tokens fit in `room`: up to its end or its next snapshot point; if that is
  // too long, up to the last block boundary that fits (0 if none: it waits for a step with more room).
  private chunkLength(seq: Sequence, room: number): number {
    const start = seq.computed;
    let end = seq.length;
    const snap = this.cache.nextSnapshotPoint(seq.cache!, start);
    if (snap !== undefined && snap < end) end = snap;
    if (end - start <= room) return end - start;
    const B = this.cache.options.pageTokens;
    return Math.max(0, Math.floor((start + room) / B) * B - start);
  }

  private stepSequence(c: StepChunk): StepSequence {
    const seq = c.seq;
    const h = seq.cache!;
    this.cache.allocate(h, c.start + c.count);
    let allowed: Uint32Array | null = null;
    const constraint = seq.request.constraint;
    if (c.sample && constraint) {
      seq.mask ??= new Uint32Array(Math.ceil(this.options.vocabSize / 32));
      constraint.fillMask(seq.mask);
      allowed = seq.mask;
    }
    return {
      slot: h.slot,
      nPast: c.start,
      tokens: seq.tokens.subarray(c.start, c.start + c.count),
      pages: h.pages.subarray(0, h.nPages),
      sample: c.sample,
      sampling: seq.request.sampling,
      penaltyTokens: seq.tokens.subarray(seq.promptLength, seq.length),
      topLogprobs: seq.request.topLogprobs ?? 0,
      allowed,
    };
  }

  // A sampled token: a stop token ends the output (and is not part of it); any other is appended and streamed.
  private accept(seq: Sequence, r: SampledToken): void {
    if (seq.stopTokens.has(r.token)) return this.finish(seq, "stop");
    const constraint = seq.request.constraint;
    if (constraint && !constraint.accept(r.token)) {
      return this.finish(seq, new Error(`token ${r.token} was sampled but the constraint does not allow it`));
    }
    seq.tokens[seq.length++] = r.token;
    const token: GeneratedToken = { id: r.token };
    if (seq.request.topLogprobs !== undefined) token.logprob = r.logprob;
    if (r.top) token.top = r.top;
    seq.sink.tokens([token]);
    if (seq.generated >= seq.maxTokens) this.finish(seq, "length");
    else if (constraint?.isComplete()) this.finish(seq, "constraint_complete");
  }

  private finish(seq: Sequence, outcome: FinishReason | Error): void {
    if (seq.cache) {
      this.cache.free(seq.cache);
      seq.cache = undefined;
      this.running.splice(this.running.indexOf(seq), 1);
    }
    if (outcome instanceof Error) seq.sink.error(outcome);
    else seq.sink.done(outcome);
    this.onFinish(seq);
  }
}
