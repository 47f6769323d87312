// The scheduler without a loop: what each step carries, FIFO admission, the queue bound, cancellation.
import { describe, expect, test } from "bun:test";
import { rootHash } from "../../../src/engine/block-hash.ts";
import { BlockPool } from "../../../src/engine/block-pool.ts";
import { KVCacheManager } from "../../../src/engine/cache-manager.ts";
import { Scheduler, type StepPlan } from "../../../src/engine/scheduler.ts";
import { Sequence, type FinishReason } from "../../../src/engine/sequence.ts";
import { StepTimer } from "../../../src/engine/step-timer.ts";
import type { GenerateRequest } from "../../../src/engine/types.ts";

const greedy = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 1 };

function setup(o: { nPages?: number; nSlots?: number; maxStepTokens?: number; maxRunning?: number; maxQueue?: number; snapshotInterval?: number } = {}) {
  const pool = new BlockPool(o.nPages ?? 64, o.nSlots ?? 8);
  const cache = new KVCacheManager(
    pool,
    { copySlot: () => {}, clearSlot: () => {} },
    { pageTokens: 4, pageBytes: 1, slotBytes: 1, root: rootHash("s"), prefixCache: true, snapshotInterval: o.snapshotInterval ?? 64 },
  );
  const scheduler = new Scheduler(cache, { maxStepTokens: o.maxStepTokens ?? 16, maxRunning: o.maxRunning ?? 4, maxQueue: o.maxQueue ?? 8, vocabSize: 10 });
  return { pool, cache, scheduler };
}

let nextId = 0;
function sequence(promptLength: number, maxTokens: number, first = 1) {
  const events: string[] = [];
  const request: GenerateRequest = {
    prompt: Int32Array.from({ length: promptLength }, (_, i) => first + i),
    maxTokens,
    sampling: greedy,
    stopTokens: [0],
    signal: new AbortController().signal,
  };
  const seq = new Sequence(nextId++, request, maxTokens, {
    admitted: (p, c) => events.push(`admitted ${p} ${c}`),
    tokens: (t) => events.push(`tokens ${t.map((x) => x.id).join(",")}`),
    done: (r: FinishReason) => events.push(`done ${r}`),
    error: (e) => events.push(`error ${e.message}`),
  });
  return { seq, events };
}

const shape = (plan: StepPlan | undefined) => plan?.chunks.map((c) => `${c.seq.id}:${c.start}+${c.count}${c.sample ? "s" : ""}`);
const reply = (plan: StepPlan, token = 5) => plan.chunks.map((c) => (c.sample ? { token, logprob: 0, top: null } : null));

describe("Scheduler", () => {
  test("one invariant: a sequence gets tokens until computed catches up with known, then samples", () => {
    const { scheduler } = setup({ maxStepTokens: 16 });
    const { seq, events } = sequence(30, 2);
    scheduler.enqueue(seq);
    expect(scheduler.admit()).toBe(1);
    const id = seq.id;
    let plan = scheduler.schedule()!;
    expect(shape(plan)).toEqual([`${id}:0+16`]);
    scheduler.complete(plan, reply(plan));
    plan = scheduler.schedule()!;
    expect(shape(plan)).toEqual([`${id}:16+12`]); // up to the snapshot point 28 (last block boundary before 29)
    scheduler.complete(plan, reply(plan));
    plan = scheduler.schedule()!;
    expect(shape(plan)).toEqual([`${id}:28+2s`]);
    expect(plan.batch[0]!.pages.length).toBe(8);
    scheduler.complete(plan, reply(plan, 7));
    plan = scheduler.schedule()!;
    expect(shape(plan)).toEqual([`${id}:30+1s`]); // decode: the sampled token is the one pending token
    expect([...plan.batch[0]!.tokens]).toEqual([7]);
    expect([...plan.batch[0]!.sample!.penaltyTokens!]).toEqual([7]);
    scheduler.complete(plan, reply(plan, 8));
    expect(events).toEqual(["admitted 30 0", "tokens 7", "tokens 8", "done length"]);
    expect(scheduler.running.length).toBe(0);
    expect(scheduler.schedule()).toBeUndefined();
  });

  test("decoding sequences go first, one token each; prompts fill the rest in block-aligned chunks", () => {
    const { scheduler } = setup({ maxStepTokens: 16, maxRunning: 4 });
    const a = sequence(3, 50, 100).seq;
    const b = sequence(3, 50, 200).seq;
    for (const s of [a, b]) scheduler.enqueue(s);
    scheduler.admit();
    const first = scheduler.schedule()!;
    expect(shape(first)).toEqual([`${a.id}:0+3s`, `${b.id}:0+3s`]);
    scheduler.complete(first, reply(first));
    const long = sequence(40, 5, 300).seq;
    scheduler.enqueue(long);
    scheduler.admit();
    const budgets: number[] = [];
    for (let i = 0; i < 4; i++) {
      const plan = scheduler.schedule()!;
      expect(plan.chunks.slice(0, 2).map((c) => c.seq.id)).toEqual([a.id, b.id]); // every step, both streams
      budgets.push(plan.chunks.reduce((n, c) => n + c.count, 0));
      const p = plan.chunks.find((c) => c.seq === long);
      if (p && !p.sample) expect((p.start + p.count) % 4).toBe(0);
      scheduler.complete(plan, reply(plan));
    }
    // 14 tokens of room after two decodes: the prompt advances 12 (block-aligned), 12, 12, then 4 to its end.
    expect(budgets).toEqual([14, 14, 14, 6]);
  });

  test("prompts share what decodes leave; one that cannot get a whole block waits for the next step", () => {
    expect(() => setup({ maxStepTokens: 7, maxRunning: 4 })).toThrow(/decode token per running sequence/);
    const { scheduler } = setup({ maxStepTokens: 9, maxRunning: 4 });
    const decoders = [sequence(2, 50, 10).seq, sequence(2, 50, 20).seq];
    for (const s of decoders) scheduler.enqueue(s);
    scheduler.admit();
    let plan = scheduler.schedule()!;
    scheduler.complete(plan, reply(plan));
    const [p, q] = [sequence(20, 5, 30).seq, sequence(20, 5, 60).seq];
    scheduler.enqueue(p);
    scheduler.enqueue(q);
    scheduler.admit();
    plan = scheduler.schedule()!;
    // 9 − 2 decodes = 7 of room: p gets one block (4), q would need 4 more of the 3 left.
    expect(shape(plan)).toEqual([`${decoders[0]!.id}:2+1s`, `${decoders[1]!.id}:2+1s`, `${p.id}:0+4`]);
  });

  test("admission is FIFO: a head that does not fit blocks the queue", () => {
    const { scheduler, cache } = setup({ nPages: 10, maxRunning: 4 });
    const big = sequence(4, 33, 1).seq; // 36 positions: 9 pages
    const bigger = sequence(4, 37, 50).seq; // 10 pages
    const small = sequence(4, 1, 90).seq; // 1 page
    for (const s of [big, bigger, small]) scheduler.enqueue(s);
    expect(scheduler.admit()).toBe(1);
    expect(scheduler.waiting).toEqual([bigger, small]); // small would fit, but waits behind bigger
    expect(cache.outstandingPages).toBe(9);
    scheduler.cancel(big);
    scheduler.reap();
    expect(scheduler.admit()).toBe(1);
    expect(scheduler.running).toEqual([bigger]);
  });

  test("the wait queue is bounded; a waiting sequence cancels at once, a running one at the next boundary", () => {
    const { scheduler, pool } = setup({ maxQueue: 2, maxRunning: 1 });
    const [a, b, c] = [sequence(5, 5), sequence(5, 5), sequence(5, 5)];
    expect(scheduler.enqueue(a.seq)).toBe(true);
    expect(scheduler.enqueue(b.seq)).toBe(true);
    expect(scheduler.enqueue(c.seq)).toBe(false);
    scheduler.admit();
    scheduler.cancel(b.seq);
    expect(b.events).toEqual(["done cancelled"]);
    expect(scheduler.waiting.length).toBe(0);
    const plan = scheduler.schedule()!;
    scheduler.cancel(a.seq); // mid-step
    expect(scheduler.running.length).toBe(1);
    scheduler.complete(plan, reply(plan));
    expect(a.events).toEqual(["admitted 5 0", "done cancelled"]);
    expect(scheduler.running.length).toBe(0);
    expect(pool.heldPages).toBe(0);
    expect(pool.workingSlots).toBe(0);
  });

  test("a stop token ends the output without being part of it", () => {
    const { scheduler } = setup();
    const { seq, events } = sequence(3, 10);
    scheduler.enqueue(seq);
    scheduler.admit();
    const plan = scheduler.schedule()!;
    scheduler.complete(plan, reply(plan, 0));
    expect(events).toEqual(["admitted 3 0", "done stop"]);
  });

  test("a failed step ends its sequences with the error and frees them", () => {
    const { scheduler, pool } = setup();
    const { seq, events } = sequence(3, 10);
    scheduler.enqueue(seq);
    scheduler.admit();
    scheduler.fail(scheduler.schedule()!, new Error("boom"));
    expect(events).toEqual(["admitted 3 0", "error boom"]);
    expect(pool.heldPages + pool.workingSlots).toBe(0);
  });
});

describe("decode stall bound", () => {
  test("with streams decoding, a step carries at most promptLimit prompt tokens (at least a block)", () => {
    const { scheduler } = setup({ maxStepTokens: 64, maxRunning: 4 });
    const stream = sequence(3, 50, 100).seq;
    scheduler.enqueue(stream);
    scheduler.admit();
    let plan = scheduler.schedule(8)!;
    expect(shape(plan)).toEqual([`${stream.id}:0+3s`]); // no decode yet: the limit does not apply
    scheduler.complete(plan, reply(plan));
    const long = sequence(100, 5, 300).seq;
    scheduler.enqueue(long);
    scheduler.admit();
    plan = scheduler.schedule(8)!;
    expect([plan.decodeTokens, plan.promptTokens]).toEqual([1, 8]);
    scheduler.complete(plan, reply(plan));
    plan = scheduler.schedule(2)!;
    expect([plan.decodeTokens, plan.promptTokens]).toEqual([1, 4]);
    scheduler.complete(plan, reply(plan));
    expect(scheduler.schedule()!.promptTokens).toBe(52); // no limit: up to the snapshot point at 64
  });
});

describe("StepTimer", () => {
  test("learns the decode cost and the cost per prompt token, and sizes chunks to a target", () => {
    const timer = new StepTimer(16);
    expect(timer.promptTokensWithin(200)).toBeUndefined();
    timer.observe(0, 512, 1024); // 2 ms a prompt token
    expect(timer.promptTokensWithin(200)).toBe(100);
    timer.observe(2, 0, 40); // decode steps: 40 ms
    expect(timer.promptTokensWithin(200)).toBe(80);
    timer.observe(2, 10, 100); // too few prompt tokens to learn from
    expect(timer.promptTokensWithin(200)).toBe(80);
    expect(timer.promptTokensWithin(20)).toBe(16); // never below a block
  });
});
