// The engine loop end to end on the toy model (toy-runner.ts): outputs identical alone, batched and resumed from
// the prefix cache; admission under a tight budget; 1000 requests with random cancels; errors and limits.
import { describe, expect, test } from "bun:test";
import { SplashEngine, stepMeter, type EngineOptions } from "../../../src/engine/engine.ts";
import { planMemory } from "../../../src/engine/memory-plan.ts";
import { EngineOverloaded, PromptTooLong, type EngineEvent, type GenerateRequest, type Sampling, type TokenConstraint } from "../../../src/engine/types.ts";
import type { Machine } from "../../../src/machine.ts";
import { ToyModel, toyPrompt, type ToyOptions } from "./toy-runner.ts";

const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const bigMachine: Machine = { os: "linux", arch: "x64", cpuModel: "toy", cores: 2, totalMemory: 1e12, availableMemory: 1e12 };

// An engine on the toy model; `pages`/`slots` replace the planned counts where a test needs exact ones.
function engine(options: EngineOptions & { toy?: ToyOptions; pages?: number; slots?: number } = {}) {
  const model = new ToyModel(options.toy);
  const pageTokens = options.pageTokens ?? 4;
  const planned = planMemory(model, { kvBudget: options.kvBudget ?? 1e6, pageTokens, maxSeqs: options.maxSeqs ?? 8 }, bigMachine);
  const nPages = options.pages ?? planned.nPages;
  const nSlots = options.slots ?? planned.nSlots;
  const plan = { ...planned, nPages, nSlots, stateBytes: nPages * planned.pageBytes + nSlots * planned.slotBytes };
  const runner = model.createRunner({ pageTokens, nPages: plan.nPages, nSlots: plan.nSlots });
  const e = new SplashEngine(model, runner, plan, { maxStepTokens: 32, snapshotInterval: 16, ...options, pageTokens });
  // A page named for the cache, or read by two sequences, must never be written.
  runner.readOnly = (page) => e.cache.pool.refCount(page) > 1 || e.cache.pool.pageHashOf(page) !== undefined;
  return { e, runner, plan };
}

function request(prompt: Int32Array, maxTokens: number, extra: Partial<GenerateRequest> = {}): GenerateRequest {
  return { prompt, maxTokens, sampling: greedy, stopTokens: [], signal: new AbortController().signal, ...extra };
}

type Outcome = { tokens: number[]; reason: string; cached: number; events: EngineEvent[] };

async function collect(stream: AsyncIterable<EngineEvent>): Promise<Outcome> {
  const out: Outcome = { tokens: [], reason: "", cached: -1, events: [] };
  for await (const ev of stream) {
    out.events.push(ev);
    if (ev.type === "admitted") out.cached = ev.cachedPromptTokens;
    if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
    if (ev.type === "done") out.reason = ev.reason;
  }
  return out;
}

const prompts = [5, 9, 16, 17, 31, 40, 63, 64, 65, 90].map((n, i) => toyPrompt(n, i + 1));

describe("engine loop on the toy model", () => {
  test("greedy output is the same alone, batched, and resumed from the prefix cache", async () => {
    const alone: number[][] = [];
    for (const p of prompts) {
      const { e } = engine({ prefixCache: false });
      alone.push((await collect(e.generate(request(p, 20)))).tokens);
      await e.close();
    }
    expect(new Set(alone.map((t) => t.join())).size).toBe(prompts.length); // the toy really depends on the prompt

    const { e: batched } = engine({ prefixCache: false, maxSeqs: 8 });
    const all = await Promise.all(prompts.map((p) => collect(batched.generate(request(p, 20)))));
    expect(all.map((o) => o.tokens)).toEqual(alone);
    await batched.close();

    // Resumed: each prompt runs once as a prefix (its first half), then whole, on one engine with the cache on.
    const { e: cached } = engine({ maxSeqs: 8 });
    for (const [i, p] of prompts.entries()) {
      await collect(cached.generate(request(p.subarray(0, Math.ceil(p.length / 2) + 3), 4)));
      const again = await collect(cached.generate(request(p, 20)));
      expect(again.tokens).toEqual(alone[i]!);
      if (p.length >= 17) expect(again.cached).toBeGreaterThan(0);
    }
    // And the identical prompt again: every token hits, the last block runs again.
    const repeat = await collect(cached.generate(request(prompts[9]!, 20)));
    expect(repeat.cached).toBe(88);
    expect(repeat.tokens).toEqual(alone[9]!);
    expect(cached.stats().prefixCacheHitTokens).toBeGreaterThan(88);
    await cached.close();
  });

  test("counts the prompt tokens it computed (cache hits left out) and the tokens it handed out", async () => {
    const { e } = engine();
    const first = await collect(e.generate(request(prompts[6]!, 12)));
    expect(e.stats()).toMatchObject({ promptTokensComputed: 63, generatedTokens: 12 });
    // The same prompt again: the cached blocks are not computed; the tokens are counted again as they are handed out.
    const again = await collect(e.generate(request(prompts[6]!, 5)));
    expect(again.cached).toBeGreaterThan(0);
    expect(e.stats()).toMatchObject({ promptTokensComputed: 63 + 63 - again.cached, generatedTokens: 17 });
    expect(first.tokens.length + again.tokens.length).toBe(17);
    await e.close();
  });

  test("many concurrent requests under a tight budget all complete; the queue drains", async () => {
    // 12 pages of 4 tokens; each request needs up to 30 + 10 − 1 = 39 positions = 10 pages: one at a time.
    const { e } = engine({ pages: 12, slots: 4, maxSeqs: 2, prefixCache: false });
    const reqs = Array.from({ length: 20 }, (_, i) => collect(e.generate(request(toyPrompt(30, 100 + i), 10))));
    expect(e.stats().queued).toBe(20);
    const done = await Promise.all(reqs);
    expect(done.every((o) => o.reason === "length" && o.tokens.length === 10)).toBe(true);
    const s = e.stats();
    expect(s.running + s.queued).toBe(0);
    expect(s.peakSequenceStateBytes).toBeLessThanOrEqual(s.stateBytesBudget);
    expect(s.peakSequenceStateBytes).toBe(10 * 400 + 1600);
    await e.close();
  });

  test("shared prefix pages count once: more requests run at once than their worst cases alone allow", async () => {
    const system = toyPrompt(32, 7);
    for (const prefixCache of [true, false]) {
      const { e, runner } = engine({ pages: 27, slots: 8, maxSeqs: 4, prefixCache });
      await collect(e.generate(request(system, 1))); // caches the shared part: 7 pages and a snapshot at 28
      let widest = 0;
      const step = runner.step.bind(runner);
      runner.step = (seqs) => ((widest = Math.max(widest, seqs.length)), step(seqs));
      // Each: 40 prompt tokens + 8 = 47 positions, 12 pages. Four need 48 > 27 pages; sharing 7, 4 × 5 + 7 = 27.
      const outs = await Promise.all(
        Array.from({ length: 4 }, (_, i) => {
          const p = new Int32Array(40);
          p.set(system);
          p.set(toyPrompt(8, 50 + i), 32);
          return collect(e.generate(request(p, 8)));
        }),
      );
      // the first resumes from the system prompt's snapshot at 28; the others wait for it to compute the block they
      // all share (28..32, where it keeps its state) and resume there
      expect(outs.map((o) => [o.reason, o.cached])).toEqual(prefixCache ? [["length", 28], ["length", 32], ["length", 32], ["length", 32]] : Array(4).fill(["length", 0]));
      expect(widest).toBe(prefixCache ? 4 : 2);
      await e.close();
    }
  });

  test("1000 requests with random cancels leave no memory held", async () => {
    for (const prefixCache of [false, true]) {
      const { e, runner } = engine({ kvBudget: 40 * 400 + 8 * 1600, maxSeqs: 4, maxQueue: 2000, prefixCache });
      // At every step: the guarantee holds, and each page's ref count is the number of page tables holding it.
      let checked = 0;
      const step = runner.step.bind(runner);
      runner.step = (seqs) => {
        const pool = e.cache.pool;
        expect(e.cache.outstandingPages).toBeLessThanOrEqual(pool.availablePages);
        const readers = new Map<number, number>();
        for (const s of e.scheduler.running) for (const p of s.cache!.pages.subarray(0, s.cache!.nPages)) readers.set(p, (readers.get(p) ?? 0) + 1);
        for (const [p, n] of readers) expect(pool.refCount(p)).toBe(n);
        expect(pool.heldPages).toBe(readers.size);
        expect(pool.workingSlots).toBe(e.scheduler.running.length);
        checked++;
        return step(seqs);
      };
      let seed = 12345;
      const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
      const jobs: Promise<Outcome>[] = [];
      for (let i = 0; i < 1000; i++) {
        const ac = new AbortController();
        const prompt = toyPrompt(1 + Math.floor(rand() * 40), i % 50); // repeats, so the cache hits too
        const r = rand();
        if (r < 0.1) ac.abort(); // before it starts
        const stream = e.generate(request(prompt, 1 + Math.floor(rand() * 20), { signal: ac.signal }));
        const cancelAfter = r < 0.4 ? Math.floor(rand() * 5) : -1; // while waiting or mid-generation
        jobs.push(
          (async () => {
            const out: Outcome = { tokens: [], reason: "", cached: 0, events: [] };
            for await (const ev of stream) {
              if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
              if (ev.type === "done") out.reason = ev.reason;
              if (cancelAfter >= 0 && out.tokens.length >= cancelAfter) ac.abort();
            }
            return out;
          })(),
        );
        if (rand() < 0.3) await Bun.sleep(0);
      }
      const outs = await Promise.all(jobs);
      expect(checked).toBeGreaterThan(500);
      const reasons = new Set(outs.map((o) => o.reason));
      expect(reasons).toEqual(new Set(["length", "cancelled"]));
      const s = e.stats();
      expect([s.running, s.queued, s.sequenceStateBytes]).toEqual([0, 0, 0]);
      expect(e.cache.outstandingPages).toBe(0);
      if (!prefixCache) expect(s.stateBytesInUse).toBe(0);
      else expect(s.stateBytesInUse).toBeLessThanOrEqual(s.stateBytesBudget);
      await e.close();
    }
  }, 30_000);

  test("a reader that stops early cancels its request", async () => {
    const { e } = engine({ toy: { stepDelayMs: 1 } });
    for await (const ev of e.generate(request(toyPrompt(10, 1), 1000))) if (ev.type === "tokens") break;
    await Bun.sleep(10);
    expect(e.stats().running).toBe(0);
    expect(e.stats().sequenceStateBytes).toBe(0);
    await e.close();
  });

  test("limits: queue full, prompt too long, max tokens capped at the context", async () => {
    const { e } = engine({ maxQueue: 2, toy: { contextTokens: 64 } });
    e.generate(request(toyPrompt(5, 1), 5));
    e.generate(request(toyPrompt(5, 2), 5));
    expect(() => e.generate(request(toyPrompt(5, 3), 5))).toThrow(EngineOverloaded);
    expect(() => e.generate(request(toyPrompt(64, 3), 5))).toThrow(PromptTooLong);
    expect(() => e.generate(request(new Int32Array(0), 5))).toThrow(RangeError);
    await Bun.sleep(5);
    const out = await collect(e.generate(request(toyPrompt(60, 4), 100)));
    expect(out.tokens.length).toBe(4);
    expect(out.reason).toBe("length");
    await e.close();
  });

  test("stop tokens, top logprobs and constraints reach the step and come back", async () => {
    const { e } = engine();
    const free = await collect(e.generate(request(toyPrompt(12, 3), 8)));
    const stopAt = free.tokens[3]!;
    const stopped = await collect(e.generate(request(toyPrompt(12, 3), 8, { stopTokens: [stopAt] })));
    expect(stopped.reason).toBe("stop");
    expect(stopped.tokens).toEqual(free.tokens.slice(0, free.tokens.indexOf(stopAt)));

    const withTop = await collect(e.generate(request(toyPrompt(12, 3), 2, { topLogprobs: 2 })));
    const first = withTop.events.find((ev) => ev.type === "tokens");
    expect(first).toEqual({ type: "tokens", tokens: [{ id: free.tokens[0]!, logprob: -0.5, top: [{ id: free.tokens[0]!, logprob: -0 }, { id: (free.tokens[0]! + 1) % 97, logprob: -1 }] }] });

    const log: string[] = [];
    const evenOnly: TokenConstraint = {
      fillMask(mask) {
        log.push("mask");
        mask.fill(0x55555555); // even token ids
      },
      accept(token) {
        log.push(`accept ${token}`);
        return token % 2 === 0;
      },
      rollback() {},
      isComplete: () => log.filter((l) => l.startsWith("accept")).length === 3,
    };
    const constrained = await collect(e.generate(request(toyPrompt(12, 3), 8, { constraint: evenOnly })));
    expect(constrained.reason).toBe("constraint_complete");
    expect(constrained.tokens.length).toBe(3);
    expect(constrained.tokens.every((t) => t % 2 === 0)).toBe(true);
    expect(log.map((l) => l.split(" ")[0])).toEqual(["mask", "accept", "mask", "accept", "mask", "accept"]);
    await e.close();
  });

  test("a failing step fails its requests, and the engine keeps serving", async () => {
    const { e, runner } = engine();
    const step = runner.step.bind(runner);
    runner.step = async () => {
      runner.step = step;
      throw new Error("native step failed");
    };
    await expect(collect(e.generate(request(toyPrompt(5, 1), 3)))).rejects.toThrow("native step failed");
    expect((await collect(e.generate(request(toyPrompt(5, 1), 3)))).tokens.length).toBe(3);
    expect(e.stats().sequenceStateBytes).toBe(0);
    await e.close();
  });

  test("a constraint that throws ends only its own request; the requests beside it and the engine go on", async () => {
    const { e } = engine();
    const alone = (await collect(e.generate(request(toyPrompt(12, 3), 8)))).tokens;
    // throws at its n-th call of `method`, else allows every token and never completes
    const throwing = (method: "fillMask" | "accept" | "isComplete", n: number): TokenConstraint => {
      let calls = 0;
      const maybeThrow = (m: string) => {
        if (m === method && ++calls === n) throw new Error(`grammar engine failed in ${m}`);
      };
      return {
        fillMask: (mask) => (maybeThrow("fillMask"), mask.fill(0xffffffff)),
        accept: () => (maybeThrow("accept"), true),
        rollback() {},
        isComplete: () => (maybeThrow("isComplete"), false),
      };
    };
    for (const method of ["fillMask", "accept", "isComplete"] as const) {
      const [plain, failing, other] = await Promise.allSettled([
        collect(e.generate(request(toyPrompt(12, 3), 8))),
        collect(e.generate(request(toyPrompt(12, 3), 8, { constraint: throwing(method, 3) }))),
        collect(e.generate(request(toyPrompt(12, 3), 8, { constraint: throwing(method, 1000) }))),
      ]);
      expect(failing).toMatchObject({ status: "rejected", reason: { message: `grammar engine failed in ${method}` } });
      expect(plain).toMatchObject({ status: "fulfilled", value: { tokens: alone, reason: "length" } });
      expect(other).toMatchObject({ status: "fulfilled", value: { tokens: alone, reason: "length" } });
    }
    expect((await collect(e.generate(request(toyPrompt(5, 1), 3)))).tokens.length).toBe(3);
    expect(e.stats().sequenceStateBytes).toBe(0);
    await e.close();
  });

  test("close cancels what runs and waits, and frees the cache", async () => {
    const { e, runner } = engine({ maxSeqs: 1, toy: { stepDelayMs: 1 } });
    const a = collect(e.generate(request(toyPrompt(5, 1), 1000)));
    const b = collect(e.generate(request(toyPrompt(5, 2), 1000)));
    await Bun.sleep(5);
    await e.close();
    expect((await a).reason).toBe("cancelled");
    expect((await b).reason).toBe("cancelled");
    expect(runner.closed).toBe(true);
    expect(() => e.generate(request(toyPrompt(5, 1), 1))).toThrow(/closed/);
  });
});

test("a step's cost: the wall clock counts a wait on a device, the CPU clock only the computing threads' time", async () => {
  const wall = stepMeter("wall");
  const cpu = stepMeter("cpu");
  await Bun.sleep(60);
  expect(wall()).toBeGreaterThanOrEqual(55);
  expect(cpu()).toBeLessThan(40);
  const busy = stepMeter("cpu");
  const worker = new Worker(URL.createObjectURL(new Blob(["const t = performance.now(); while (performance.now() - t < 80); postMessage(0);"])));
  await new Promise((resolve) => (worker.onmessage = resolve));
  worker.terminate();
  expect(busy()).toBeGreaterThan(20); // another thread computing: counted (at least a quarter of its 80 ms on a loaded machine)
});
