// The scheduler's speculative cycle without a model: which chunks ask for drafts, how the next step's verify block is
// built from them (a constraint keeps the prefix it allows), and how its result advances the sequence: accepted drafts
// plus the target's token, the constraint rolled back over the rejected drafts, and the end of a constrained value
// right after the token that completes it.
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

// One sequence per constraint given (undefined: unconstrained), prefilled together, each having sampled 4 and drafted
// `drafts[i]` after it (3 drafts a cycle, the drafter's seats allowing). `requests` overrides fields of each
// sequence's request; `maxSeqs` is how many sequences the drafter takes a step.
function setupMany(constraints: (TokenConstraint | undefined)[], { drafts = [], requests = [], maxSeqs = 4 }: { drafts?: Int32Array[]; requests?: Partial<GenerateRequest>[]; maxSeqs?: number } = {}) {
  const pool = new BlockPool(64, 8);
  const cache = new KVCacheManager(pool, { copySlot: () => {}, clearSlot: () => {} }, { pageTokens: 4, pageBytes: 1, slotBytes: 1, root: rootHash("s"), prefixCache: true, snapshotInterval: 64 });
  const scheduler = new Scheduler(cache, { maxStepTokens: 32, maxRunning: 4, maxQueue: 8, vocabSize: VOCAB, drafter: { kind: "mtp", maxDraft: 3, maxSeqs }, draftLength: 3 });
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
  // the prompt's last chunk samples and asks for the next block in the same step
  if (constraints.length <= maxSeqs) {
    expect(prefill.chunks.map((c) => c.next)).toEqual(constraints.map(() => 3));
    expect(prefill.batch.map((b) => b.speculate)).toEqual(constraints.map(() => ({ next: 3 })));
    expect(prefill.batch[0]!.pages).toHaveLength(2); // positions 0 … 5: the drafter writes its K/V ahead
  }
  scheduler.complete(prefill, prefill.chunks.map((c, i) => ({ token: 4, logprob: 0, top: null, ...(c.next ? { drafts: drafts[i] ?? Int32Array.of(8, 9, 10) } : {}) })));
  return { scheduler, runs, prefill };
}

function setup(constraint?: TokenConstraint, drafts?: Int32Array) {
  const { scheduler, runs } = setupMany([constraint], drafts ? { drafts: [drafts] } : {});
  return { scheduler, ...runs[0]! };
}

test("a sampled chunk drafts in its step; the next step verifies the drafts, and the accepted ones and the target's token advance the sequence", () => {
  const { scheduler, seq, events } = setup();
  const plan = scheduler.schedule()!;
  expect([...plan.batch[0]!.tokens]).toEqual([4, 8, 9, 10]);
  expect(plan.batch[0]!.speculate).toEqual({ verify: { nDraft: 3, nProposed: 3, allowed: null }, next: 3 });
  expect(plan.decodeTokens).toBe(4);
  // the target keeps the first draft and then says 11, and drafts [12, 13, 14] after it
  scheduler.complete(plan, [{ token: 11, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }], drafts: Int32Array.of(12, 13, 14) }]);
  expect(events).toEqual(["4", "8", "11"]);
  expect([seq.computed, seq.length]).toEqual([5, 6]);
  expect([...seq.tokens.subarray(0, 6)]).toEqual([1, 2, 3, 4, 8, 11]);
  expect(seq.speculation!.cycles).toBe(1);
  expect(seq.speculation!.accepted).toBe(1);
  const next = scheduler.schedule()!;
  expect(next.chunks[0]).toMatchObject({ start: 5, count: 4 });
  expect([...next.batch[0]!.tokens]).toEqual([11, 12, 13, 14]);
});

test("drafts beyond what the output can still use are dropped unseen, and no drafts are asked for past its end", () => {
  const { scheduler, seq } = setup();
  seq.length = seq.promptLength + 18; // 2 tokens left: the block verifies one draft, the token after it is the last
  seq.computed = seq.length - 1;
  const plan = scheduler.schedule()!;
  expect(plan.batch[0]!.speculate).toEqual({ verify: { nDraft: 1, nProposed: 1, allowed: null } });
});

test("a constraint keeps the drafts it allows, rolls back the rejected ones, and the value ends right after the draft that completes it", () => {
  const constraint = new Closing();
  const { scheduler, events } = setup(constraint, Int32Array.of(9, 13, 5));
  let plan = scheduler.schedule()!;
  // 13 is not allowed: only [9] is verified, with the mask at each block position; 13 counts as proposed and rejected
  expect(plan.batch[0]!.speculate!.verify).toMatchObject({ nDraft: 1, nProposed: 2 });
  expect(plan.batch[0]!.speculate!.verify!.allowed).toHaveLength(2);
  scheduler.complete(plan, [{ token: 6, logprob: 0, top: null, drafts: Int32Array.of(5, 7, 2) }]); // 9 rejected
  expect(constraint.taken).toEqual([4, 6]);
  plan = scheduler.schedule()!;
  // 7 completes the value: the block stops right after it
  expect(plan.batch[0]!.speculate!.verify).toMatchObject({ nDraft: 2 });
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
  // the failing one runs its anchor alone, unconstrained; the other keeps its drafts and masks
  expect(plan.batch[0]!.speculate?.verify).toBeUndefined();
  expect(plan.batch[0]!.sample!.allowed).toBeNull();
  expect(plan.batch[1]!.speculate!.verify!.nDraft).toBeGreaterThan(0);
  scheduler.complete(plan, [{ token: 5, logprob: 0, top: null }, { token: 6, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }] }]);
  expect(runs[0]!.events).toEqual(["4", "error grammar engine failed"]);
  expect(runs[1]!.events).toEqual(["4", "8", "6"]);
  expect(scheduler.running.map((s) => s.id)).toEqual([1]);
});

// The caller releases a cancelled request's constraint at once, while its verify step may still be computing on the
// model's thread: the scheduler must not call it again.
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

test("a sequence cancelled while its verify step computes never calls its released constraint; its computed blocks are kept", () => {
  const constraint = new Released();
  const { scheduler, seq, events } = setup(constraint);
  const plan = scheduler.schedule()!;
  scheduler.cancel(seq);
  constraint.released = true;
  scheduler.complete(plan, [{ token: 11, logprob: 0, top: null, accepted: [{ token: 8, logprob: 0, top: null }] }]);
  expect(events).toEqual(["4", "done cancelled"]);
  expect(scheduler.running).toHaveLength(0);
  expect(seq.computed).toBe(5); // anchor and the accepted draft
});

test("a sampling sequence speculates by its own acceptance only when its caller chose the seed, and takes the drafter's seat first", () => {
  const sampled = { ...greedy, temperature: 1 };
  const { runs, prefill } = setupMany([undefined, undefined], { requests: [{ sampling: sampled }, { sampling: sampled, seeded: true }], maxSeqs: 1 });
  expect(runs.map((r) => r.seq.speculation!.seeded)).toEqual([false, true]);
  // one seat: the seeded sequence's block length must not depend on its neighbour, so it drafts
  expect(prefill.chunks.map((c) => c.next ?? 0)).toEqual([0, 3]);
});
