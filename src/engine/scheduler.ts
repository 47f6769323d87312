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
//
// With a drafter (speculation.ts), each sampled chunk also asks for the next k drafts (chunk.next), proposed in the
// same step after its token; the drafts come back with the result, and at the sequence's next step its chunk becomes
// the verify block [last token, drafts…] (a constraint keeps the prefix it allows); complete() advances the sequence
// by the accepted drafts plus one. Verified drafts come out of the room prompts would use, but never below one block
// of prompt while a prompt is waiting.
//
// A constraint call that throws (the grammar engine failing) ends only its sequence: it runs the step unconstrained
// and ends with the error when the step completes; the sequences beside it, and the loop, go on.
//
// A request may be cancelled while its step computes (the step runs on another thread); its caller then releases its
// constraint at once, so a cancelled sequence's constraint is never called again: its drafts are verified
// unconstrained and its verified block is applied without it, and the sequence ends when the step completes.
import type { KVCacheManager, LoadedState } from "./cache-manager.ts";
import type { DrafterSpec, StepInput, SampledToken, TokenChoice } from "./runner.ts";
import { stepImages } from "./images.ts";
import type { FinishReason, Sequence } from "./sequence.ts";
import { applyVerified, prepareDrafts, SpeculationPolicy, wantsDraft } from "./speculation.ts";
import type { GeneratedToken } from "./types.ts";

export type SchedulerOptions = {
  maxStepTokens: number;
  maxRunning: number;
  maxQueue: number;
  vocabSize: number;
  drafter?: DrafterSpec;
  draftLength?: number; // fixed drafts per cycle (at most the drafter's maximum) instead of the adaptive policy's
};

// A verify block's `verify` says how many drafts it verifies of how many proposed, with the allowed set at each of its
// positions under a constraint; a chunk that drafts asks for `next` drafts after its token.
export type StepChunk = {
  seq: Sequence;
  start: number;
  count: number;
  sample: boolean;
  verify?: { nDraft: number; nProposed: number; masks: Uint32Array | null };
  next?: number;
};
export type StepPlan = {
  chunks: StepChunk[];
  batch: StepInput[];
  decodeTokens: number; // decode tokens and the drafts they verify
  promptTokens: number;
  draftTokens: number; // drafts asked for the next step
};

export class Scheduler {
  readonly waiting: Sequence[] = [];
  readonly running: Sequence[] = [];
  readonly policy: SpeculationPolicy | undefined; // draft lengths, from the costs the engine reports (with a drafter)
  // Since start: prompt tokens computed (prefix-cache hits excluded) and tokens handed to requests.
  readonly totals = { promptTokens: 0, generatedTokens: 0 };
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
    this.policy = options.drafter ? new SpeculationPolicy(options.drafter.maxDraft) : undefined;
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
  // forever by small ones). A sequence whose prompt shares more with a running sequence's unfinished prefill than the
  // cache can serve now stays waiting, and is passed over, until that prefill has computed the shared part (see
  // awaitsPrefix): requests that arrive together with one cold prefix compute it once. Returns how many were
  // admitted.
  admit(): number {
    let n = 0;
    for (let i = 0; i < this.waiting.length && this.running.length < this.options.maxRunning; ) {
      const seq = this.waiting[i]!;
      if (this.awaitsPrefix(seq)) {
        i++;
        continue;
      }
      const h = this.cache.admit(seq.request.prompt, seq.worstTokens, seq.request.snapshotAt, seq.hashes, seq.extras);
      if (!h) break;
      this.waiting.splice(i, 1);
      seq.cache = h;
      seq.computed = h.resume;
      seq.admittedAt = performance.now();
      this.running.push(seq);
      if (!h.load) seq.sink.admitted(seq.promptLength, h.resume); // else once its disk part is loaded
      n++;
    }
    return n;
  }

  // True when a running sequence is still prefilling a longer prefix of `seq`'s prompt than the cache holds now (in
  // memory or on disk); that sequence is then made to keep its state where the two prompts part (the last block
  // boundary they share, before seq's last token), so seq resumes there once it is computed.
  private awaitsPrefix(seq: Sequence): boolean {
    const B = this.cache.options.pageTokens;
    if (!this.cache.options.prefixCache) return false;
    this.cache.hashPrompt(seq.request.prompt, seq.hashes, seq.extras);
    const last = Math.floor((seq.promptLength - 1) / B);
    let cached: number | undefined;
    for (const other of this.running) {
      const h = other.cache!;
      if (other.computed >= other.promptLength) continue; // its prompt is done: what it shares is cached already
      let shared = 0;
      while (shared < last && shared < h.hashes.length && h.hashes[shared] === seq.hashes[shared]) shared++;
      const point = shared * B;
      if (point <= other.computed) continue;
      cached ??= this.cache.cachedPrefix(seq.request.prompt, seq.extras, seq.hashes);
      if (point <= cached) continue;
      this.cache.addSnapshotPoint(h, point);
      return true;
    }
    return false;
  }

  // The disk read of a sequence admitted with part of its prefix on disk completed (data) or failed (undefined): the
  // sequence resumes after what was loaded, or where memory left it, and runs from the next step.
  loaded(seq: Sequence, data: LoadedState | undefined): void {
    const h = seq.cache;
    if (!h?.load) return; // it ended meanwhile
    if (data) this.cache.applyLoad(h, data);
    else this.cache.abandonLoad(h, seq.promptLength);
    seq.computed = h.resume;
    seq.sink.admitted(seq.promptLength, h.resume);
  }

  // The next step, or undefined when no sequence has anything to compute. `promptLimit` caps the prompt tokens of
  // a step that also carries decode tokens.
  schedule(promptLimit = Infinity): StepPlan | undefined {
    const chunks: StepChunk[] = [];
    const ready = this.running.filter((s) => !s.cache!.load); // a sequence waits for its disk part
    for (const seq of ready) {
      if (seq.length - seq.computed === 1) chunks.push({ seq, start: seq.computed, count: 1, sample: true });
    }
    const decoding = chunks.length;
    const prompting = ready.some((s) => s.length - s.computed > 1);
    const verified = this.verifyDrafts(chunks, this.options.maxStepTokens - decoding - (prompting ? this.cache.options.pageTokens : 0));
    const decodeTokens = decoding + verified;
    let room = this.options.maxStepTokens - decodeTokens;
    if (decodeTokens > 0) room = Math.min(room, Math.max(promptLimit, this.cache.options.pageTokens));
    for (const seq of ready) {
      if (seq.length - seq.computed <= 1 || room === 0) continue;
      const count = this.chunkLength(seq, room);
      if (count === 0) continue;
      chunks.push({ seq, start: seq.computed, count, sample: seq.computed + count === seq.length });
      room -= count;
    }
    if (chunks.length === 0) return undefined;
    const promptTokens = chunks.reduce((n, c) => n + c.count, 0) - decodeTokens;
    const draftTokens = this.planDrafts(chunks, this.options.maxStepTokens - chunks.filter((c) => c.sample).length - (prompting ? this.cache.options.pageTokens : 0));
    return { chunks, batch: chunks.map((c) => this.stepSequence(c)), decodeTokens, promptTokens, draftTokens };
  }

  // Applies a step's results: advances `computed`, names full blocks and takes snapshots, appends sampled tokens,
  // and finishes sequences that are done. A sequence the step refused ends with its error; the others go on.
  complete(plan: StepPlan, results: readonly (SampledToken | Error | null)[]): void {
    this.totals.promptTokens += plan.promptTokens;
    plan.chunks.forEach((c, i) => {
      const seq = c.seq;
      const r = results[i];
      if (r instanceof Error) return this.finish(seq, r);
      if (c.sample && !r) throw new Error(`step returned no token for sequence ${seq.id}`);
      /* a verify block keeps its anchor and the accepted drafts (already in seq.tokens past seq.length) */
      const constraint = seq.cancelled ? undefined : seq.request.constraint;
      const emitted = c.verify ? this.guard(seq, () => applyVerified(r!, c.verify!.nDraft, constraint), null) : null;
      if (seq.failed) return this.finish(seq, seq.failed);
      if (c.verify) this.policy!.record(seq.speculation!, c.verify.nDraft, emitted!.length - 1);
      seq.computed = c.start + (emitted ? emitted.length : c.count);
      this.cache.commit(seq.cache!, seq.tokens, seq.computed);
      if (seq.cancelled) return this.finish(seq, "cancelled");
      if (!c.sample) return;
      seq.drafts = r!.drafts; /* verified at the sequence's next step */
      if (!emitted) return void this.accept(seq, r!, true, true);
      /* the drafts were taken by the constraint when they were checked (it stands after the last accepted one);
         the last token is new to it */
      const last = emitted.length - 1;
      emitted.every((t, j) => this.accept(seq, t, j === last, j >= last - 1));
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

  private stepSequence(c: StepChunk): StepInput {
    const seq = c.seq;
    const h = seq.cache!;
    /* the drafter writes its K/V for the next drafts ahead of the positions the step commits */
    const end = c.start + c.count + (c.next ?? 0);
    this.cache.allocate(h, end);
    let allowed: Uint32Array | null = null;
    const constraint = seq.request.constraint;
    if (c.sample && constraint && !c.verify) {
      const mask = (seq.mask ??= new Uint32Array(Math.ceil(this.options.vocabSize / 32)));
      allowed = this.guard(seq, () => (constraint.fillMask(mask), mask), null);
    }
    const v = c.verify;
    return {
      slot: h.slot,
      nPast: c.start,
      tokens: seq.tokens.subarray(c.start, c.start + c.count),
      // the pages covering the chunk (a sequence may hold more: pages meant for an abandoned disk read)
      pages: h.pages.subarray(0, Math.ceil(end / this.cache.options.pageTokens)),
      sample: c.sample
        ? { sampling: seq.request.sampling, penaltyTokens: seq.tokens.subarray(seq.promptLength, seq.length), topLogprobs: seq.request.topLogprobs ?? 0, allowed }
        : undefined,
      ...(v || c.next ? { speculate: { ...(v ? { verify: { nDraft: v.nDraft, nProposed: v.nProposed, allowed: v.masks } } : {}), ...(c.next ? { next: c.next } : {}) } } : {}),
      ...stepImages(seq.request.images, c.start, c.count),
    };
  }

  // A sampled token: a stop token ends the output (and is not part of it); any other is appended and streamed.
  // `advance`: the constraint has not seen the token yet (accepted drafts it took when they were checked); `current`:
  // the constraint stands right after this token, so its completion is this token's. Returns whether the sequence
  // goes on.
  private accept(seq: Sequence, r: TokenChoice, advance: boolean, current: boolean): boolean {
    if (seq.stopTokens.has(r.token)) return this.finish(seq, "stop"), false;
    const constraint = seq.request.constraint;
    if (constraint && advance && !this.guard(seq, () => constraint.accept(r.token), false)) {
      this.finish(seq, seq.failed ?? new Error(`token ${r.token} was sampled but the constraint does not allow it`));
      return false;
    }
    seq.tokens[seq.length++] = r.token;
    this.totals.generatedTokens++;
    const token: GeneratedToken = { id: r.token };
    if (seq.request.topLogprobs !== undefined) token.logprob = r.logprob;
    if (r.top) token.top = r.top;
    seq.sink.tokens([token]);
    if (seq.generated >= seq.maxTokens) this.finish(seq, "length");
    else if (current && constraint && this.guard(seq, () => constraint.isComplete(), false)) this.finish(seq, "constraint_complete");
    else if (seq.failed) this.finish(seq, seq.failed);
    else return true;
    return false;
  }

  // A call to the sequence's constraint; if it throws, the sequence is marked failed and gets `fallback` (see the top
  // of the file).
  private guard<T>(seq: Sequence, call: () => T, fallback: T): T {
    if (seq.failed) return fallback;
    try {
      return call();
    } catch (e) {
      seq.failed = e instanceof Error ? e : new Error(String(e));
      return fallback;
    }
  }

  // Turns decoding chunks into verify blocks of the drafts their sequence's last step proposed, within `room` tokens,
  // the drafter's verify capacity and what the output can still use (a constraint keeps the prefix it allows); returns
  // the draft tokens verified. Drafts left out are dropped.
  private verifyDrafts(chunks: StepChunk[], room: number): number {
    const drafter = this.options.drafter;
    let tokens = 0;
    let rows = 0;
    let seqs = 0;
    /* seeded sequences first, as when their drafts were asked for (planDrafts) */
    for (const c of [...chunks].sort((a, b) => Number(b.seq.speculation?.seeded ?? false) - Number(a.seq.speculation?.seeded ?? false))) {
      const seq = c.seq;
      const drafts = seq.drafts;
      seq.drafts = undefined;
      if (!drafter || !drafts) continue;
      /* the accepted drafts and the token after them must fit the output: k ≤ tokens left − 1 */
      const k = Math.min(drafts.length, seq.maxTokens - seq.generated - 1, room - tokens, drafter.maxSeqs * (drafter.maxDraft + 1) - rows - 1);
      if (k < 1 || seqs === drafter.maxSeqs) continue;
      const constraint = seq.cancelled ? undefined : seq.request.constraint;
      const verify = this.guard(seq, () => prepareDrafts(drafts.subarray(0, k), constraint, this.options.vocabSize), { nDraft: 0, nProposed: 0, masks: null });
      if (verify.nProposed === 0) continue;
      seq.tokens.set(drafts.subarray(0, verify.nDraft), seq.length);
      c.count = 1 + verify.nDraft;
      c.verify = verify;
      tokens += verify.nDraft;
      rows += c.count;
      seqs++;
    }
    return tokens;
  }

  // Draft lengths for the next step of the sampled chunks that speculate, within `room` tokens of the next step and
  // the drafter's capacity; returns the drafts asked for.
  private planDrafts(chunks: StepChunk[], room: number): number {
    const drafter = this.options.drafter;
    if (!drafter) return 0;
    let tokens = 0;
    let rows = 0;
    let seqs = 0;
    const speculating = chunks.filter((c) => c.sample && !c.seq.cancelled && wantsDraft(c.seq.request, drafter));
    const policy = this.policy!;
    const states = speculating.map((c) => (c.seq.speculation ??= policy.start(c.seq.request.sampling.temperature > 0 && c.seq.request.seeded === true)));
    const fixed = this.options.draftLength;
    const wanted = fixed === undefined ? policy.plan(states) : states.map(() => Math.min(fixed, drafter.maxDraft));
    /* seeded sequences first: the step's caps fall on the others, whose block lengths may vary with the batch */
    const order = speculating.map((_, i) => i).sort((i, j) => Number(states[j]!.seeded) - Number(states[i]!.seeded));
    for (const i of order) {
      const c = speculating[i]!;
      const seq = c.seq;
      /* after this step's token at least one fewer is left, and the next verify block takes ≤ tokens left − 1; the
         drafts' positions stay within the sequence's worst case */
      const left = seq.maxTokens - seq.generated - 1;
      const k = Math.min(wanted[i]!, left - 1, seq.worstTokens - (c.start + c.count), room - tokens, drafter.maxSeqs * (drafter.maxDraft + 1) - rows - 1);
      if (k < 1 || seqs === drafter.maxSeqs) continue;
      c.next = k;
      tokens += k;
      rows += k + 1;
      seqs++;
    }
    return tokens;
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
