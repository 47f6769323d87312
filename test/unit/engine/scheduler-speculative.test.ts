// The scheduler's speculative cycle without a model: which chunks draft, how a verify block is built from the drafts
// (a constraint keeps the prefix it allows), and how its result advances the sequence: accepted drafts plus the
// target's token, the constraint rolled back over the rejected drafts, and the end of a constrained value right after
// the token that completes it.
import { expect, test } from "bun:test";
import { rootHash } from "../../../src/engine/block-hash.ts";
import { BlockPool } from "../../../src/engine/block-pool.ts";
import { KVCacheManager } from "../../../src/engine/cache-manager.ts";
import { Scheduler } from "../../../src/engine/scheduler.ts";
import { Sequence, type FinishReason } from "../../../src/engine/sequence.ts";
import type { GenerateRequest, TokenConstraint } from "../../../src/engine/types.ts";

const greedy = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 1 };
const VOCAB = 16;

// Allows any token but 13; complete once it has taken token 7 (then only the stop token 0 may follow).
class Closing implements TokenConstraint {
  readonly taken: number[] = [];
  fillMask(mask: Uint32Array): void {
    mask[0] = this.isComplete() ? 1 : 0xffff & ~(1 << 13) & ~1;
  }
  accept(t: number): boolean {
    if (t === 13 || (this.isComplete() && t !== 0)) return false;
    this.taken.push(t);
    return true;
  }
  rollback(n: number): void {
    this.taken.length -= n;
  }
  isComplete(): boolean {
    return this.taken.includes(7);
  }
}

// One sequence per constraint given (undefined: unconstrained), prefilled together, each having sampled 4.
// `requests` overrides fields of each sequence's request; `maxSeqs` is how many sequences the drafter takes a step.
function setupMany(constraints: (TokenConstraint | undefined)[], requests: Partial<GenerateRequest>[] = [], maxSeqs = 4) {
  const pool = new BlockPool(64, 8);
  const cache = new KVCacheManager(pool, { copySlot: () => {}, clearSlot: () => {} }, { pageTokens: 4, pageBytes: 1, slotBytes: 1, root: rootHash("s"), prefixCache: true, snapshotInterval: 64 });
  const scheduler = new Scheduler(cache, { maxStepTokens: 32, maxRunning: 4, maxQueue: 8, vocabSize: VOCAB, drafter: { kind: "mtp", maxDraft: 3, maxSeqs } });
  const runs = constraints.map((constraint, i) => {
    const events: string[] = [];
    const request: GenerateRequest = { prompt: Int32Array.of(1, 2, 3), maxTokens: 20, sampling: greedy, stopTokens: [0], signal: new AbortController().signal, constraint, ...requests[i] };
    const seq = new Sequence(i, request, 20, {
      admitted: () => {},
      tokens: (t) => events.push(...t.map((x) => String(x.id))),
      done: (r: FinishReason) => events.push(`done ${r}`),
      error: (e) => events.push(`error ${e.message}`),
    });
    scheduler.enqueue(seq);
    return { seq, events };
  });
  scheduler.admit();
  const prefill = scheduler.schedule()!;
  scheduler.complete(prefill, prefill.chunks.map(() => ({ token: 4, logprob: 0, top: null })));
  return { scheduler, runs };
}

function setup(constraint?: TokenConstraint) {
  const { scheduler, runs } = setupMany([constraint]);
  return { scheduler, ...runs[0]! };
}

test("a decoding sequence drafts; the accepted drafts and the target's token advance it, the rest are dropped", () => {
  const { scheduler, seq, events } = setup();
  const plan = scheduler.schedule()!;
  expect(plan.drafts).toHaveLength(1);
  expect(plan.drafts[0]).toMatchObject({ nPast: 3, anchor: 4 });
  const k = plan.drafts[0]!.nDraft;
  scheduler.attachDrafts(plan, [Int32Array.from({ length: k }, (_, j) => 8 + j)]);
  expect([...plan.batch[0]!.tokens]).toEqual([4, ...Array.from({ length: k }, (_, j) => 8 + j)]);
  expect(plan.batch[0]!.verify).toEqual({ nDraft: k, nProposed: k, draftIndex: 0, allowed: null });
  // the target keeps the first draft and then says 11
  scheduler.complete(plan, [{ token: 11, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }] }]);
  expect(events).toEqual(["4", "8", "11"]);
  expect([seq.computed, seq.length]).toEqual([5, 6]);
  expect([...seq.tokens.subarray(0, 6)]).toEqual([1, 2, 3, 4, 8, 11]);
  expect(seq.spec!.cycles).toBe(1);
  expect(seq.spec!.accepted).toBe(1);
});

test("a constraint keeps the drafts it allows, rolls back the rejected ones, and the value ends right after the draft that completes it", () => {
  const constraint = new Closing();
  const { scheduler, events } = setup(constraint);
  let plan = scheduler.schedule()!;
  // 13 is not allowed: only [9] is verified, with the mask at each block position
  scheduler.attachDrafts(plan, [Int32Array.of(9, 13, 5).subarray(0, plan.drafts[0]!.nDraft)]);
  expect(plan.batch[0]!.verify).toMatchObject({ nDraft: 1 });
  expect(plan.batch[0]!.verify!.allowed).toHaveLength(2);
  scheduler.complete(plan, [{ token: 6, logprob: 0, top: null }]); // 9 rejected
  expect(constraint.taken).toEqual([4, 6]);
  plan = scheduler.schedule()!;
  // 7 completes the value: the block stops right after it
  scheduler.attachDrafts(plan, [Int32Array.of(5, 7, 2).subarray(0, plan.drafts[0]!.nDraft)]);
  expect(plan.batch[0]!.verify).toMatchObject({ nDraft: 2 });
  scheduler.complete(plan, [{ token: 0, logprob: 0, top: null, accepted: [{ token: 5, logprob: 0, top: null }, { token: 7, logprob: 0, top: null }] }]);
  expect(events).toEqual(["4", "6", "5", "7", "done constraint_complete"]);
});

test("a constraint that throws while drafts are checked ends only its sequence, at the end of the step", () => {
  const failing = new Closing();
  const { scheduler, runs } = setupMany([failing, new Closing()]);
  failing.fillMask = () => {
    throw new Error("grammar engine failed");
  };
  const plan = scheduler.schedule()!;
  expect(plan.drafts).toHaveLength(2);
  scheduler.attachDrafts(plan, plan.drafts.map((d) => Int32Array.from({ length: d.nDraft }, (_, j) => 8 + j)));
  // the failing one verifies its anchor alone, unconstrained; the other keeps its drafts and masks
  expect(plan.batch[0]!.verify).toMatchObject({ nDraft: 0 });
  expect(plan.batch[0]!.verify!.allowed).toBeNull();
  expect(plan.batch[1]!.verify!.nDraft).toBeGreaterThan(0);
  scheduler.complete(plan, [{ token: 5, logprob: 0, top: null }, { token: 6, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }] }]);
  expect(runs[0]!.events).toEqual(["4", "error grammar engine failed"]);
  expect(runs[1]!.events).toEqual(["4", "8", "6"]);
  expect(scheduler.running.map((s) => s.id)).toEqual([1]);
});

// The caller releases a cancelled request's constraint at once, while its draft or its verify step may still be
// computing on the model's thread: the scheduler must not call it again.
class Released extends Closing {
  released = false;
  private check(): void {
    if (this.released) throw new Error("the constraint was called after its release");
  }
  override fillMask(mask: Uint32Array): void {
    this.check();
    super.fillMask(mask);
  }
  override accept(t: number): boolean {
    this.check();
    return super.accept(t);
  }
  override rollback(n: number): void {
    this.check();
    super.rollback(n);
  }
  override isComplete(): boolean {
    this.check();
    return super.isComplete();
  }
}

test("a sequence cancelled while its draft or its verify step computes never calls its released constraint; its computed blocks are kept", () => {
  for (const cancelAt of ["draft", "step"] as const) {
    const constraint = new Released();
    const { scheduler, seq, events } = setup(constraint);
    const plan = scheduler.schedule()!;
    const k = plan.drafts[0]!.nDraft;
    const drafts = Int32Array.from({ length: k }, (_, j) => 8 + j);
    const cancel = () => {
      scheduler.cancel(seq);
      constraint.released = true;
    };
    if (cancelAt === "draft") cancel();
    scheduler.attachDrafts(plan, [drafts]);
    if (cancelAt === "step") cancel();
    scheduler.complete(plan, [{ token: 11, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }] }]);
    expect(events).toEqual(["4", "done cancelled"]);
    expect(scheduler.running).toHaveLength(0);
    expect(seq.computed).toBe(5); // anchor and the accepted draft
  }
});

test("a sampling sequence speculates by its own acceptance only when its caller chose the seed, and takes the drafter's seat first", () => {
  const sampled = { ...greedy, temperature: 1 };
  const { scheduler, runs } = setupMany([undefined, undefined], [{ sampling: sampled }, { sampling: sampled, seeded: true }], 1);
  const plan = scheduler.schedule()!;
  expect(runs.map((r) => r.seq.spec!.seeded)).toEqual([false, true]);
  // one seat: the seeded sequence's block length must not depend on its neighbour, so it drafts
  expect(plan.chunks.map((c) => c.draft ?? 0)).toEqual([0, 3]);
});
