// Prefill sharing on the toy model (toy-runner.ts). Requests that arrive together with one cold prefix compute it
// once: the later ones wait for the first one's prefill of it and resume from its snapshot where their prompts part
// (the prompt tokens computed, as /metrics counts them, are one prefix plus the suffixes), with the outputs of
// independent runs. And rolling snapshots: a prompt that parts from a cached one after 20K shared tokens reuses 20K.
import { describe, expect, test } from "bun:test";
import { SplashEngine, type EngineOptions } from "../../../src/engine/engine.ts";
import { planMemory } from "../../../src/engine/memory-plan.ts";
import type { EngineEvent, GenerateRequest, Sampling } from "../../../src/engine/types.ts";
import type { Machine } from "../../../src/machine.ts";
import { ToyModel, toyPrompt } from "./toy-runner.ts";

const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const bigMachine: Machine = { os: "linux", arch: "x64", cpuModel: "toy", cores: 2, totalMemory: 1e12, availableMemory: 1e12 };

function engine(options: EngineOptions & { contextTokens?: number; stepDelayMs?: number } = {}) {
  const model = new ToyModel({ contextTokens: options.contextTokens ?? 4096, maxStepTokens: options.maxStepTokens ?? 32, stepDelayMs: options.stepDelayMs ?? 0 });
  const pageTokens = options.pageTokens ?? 4;
  const plan = planMemory(model, { kvBudget: 1e9, pageTokens, maxSeqs: 8 }, bigMachine);
  const runner = model.createRunner({ pageTokens, nPages: plan.nPages, nSlots: plan.nSlots });
  const e = new SplashEngine(model, runner, plan, { maxStepTokens: 32, snapshotInterval: 16, ...options, pageTokens });
  runner.readOnly = (page) => e.cache.pool.refCount(page) > 1 || e.cache.pool.pageHashOf(page) !== undefined;
  return e;
}

const request = (prompt: Int32Array, maxTokens: number): GenerateRequest => ({ prompt, maxTokens, sampling: greedy, stopTokens: [], signal: new AbortController().signal });

async function collect(stream: AsyncIterable<EngineEvent>): Promise<{ tokens: number[]; cached: number }> {
  const out = { tokens: [] as number[], cached: -1 };
  for await (const ev of stream) {
    if (ev.type === "admitted") out.cached = ev.cachedPromptTokens;
    if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
  }
  return out;
}

const concat = (...parts: Int32Array[]) => Int32Array.from(parts.flatMap((p) => [...p]));

describe("one prefill for requests that share a cold prefix", () => {
  const prefix = toyPrompt(200, 7);
  const prompts = [1, 2, 3, 4].map((i) => concat(prefix, toyPrompt(10, 100 + i)));

  async function independent(): Promise<number[][]> {
    const out: number[][] = [];
    for (const p of prompts) {
      const e = engine({ prefixCache: false });
      out.push((await collect(e.generate(request(p, 8)))).tokens);
      await e.close();
    }
    return out;
  }

  test("four at once: the prefix is computed once, the others resume from it, outputs unchanged", async () => {
    const want = await independent();
    const e = engine();
    const outs = await Promise.all(prompts.map((p) => collect(e.generate(request(p, 8)))));
    expect(outs.map((o) => o.tokens)).toEqual(want);
    // the first computes all 210 tokens; the others resume at 200 (the last block boundary they share)
    expect(outs.map((o) => o.cached)).toEqual([0, 200, 200, 200]);
    expect(e.stats().promptTokensComputed).toBe(210 + 3 * 10);
    await e.close();
  });

  test("with the prefix cache off each computes its own prompt", async () => {
    const e = engine({ prefixCache: false });
    const outs = await Promise.all(prompts.map((p) => collect(e.generate(request(p, 8)))));
    expect(outs.map((o) => o.cached)).toEqual([0, 0, 0, 0]);
    expect(e.stats().promptTokensComputed).toBe(4 * 210);
    await e.close();
  });

  test("a waiting request does not hold up one that shares nothing; a cancelled first one lets the others compute", async () => {
    const want = await independent();
    const e = engine({ stepDelayMs: 2 }); // the first one's prefill takes 7 steps: it is cancelled in the middle
    const order: string[] = [];
    const run = async (name: string, prompt: Int32Array, signal = new AbortController().signal) => {
      const out = { tokens: [] as number[] };
      for await (const ev of e.generate({ ...request(prompt, 8), signal })) {
        if (ev.type === "admitted") order.push(name);
        if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
      }
      return out;
    };
    const ac = new AbortController();
    const first = run("first", prompts[0]!, ac.signal);
    const second = run("second", prompts[1]!);
    const lone = run("lone", toyPrompt(30, 55));
    setTimeout(() => ac.abort(), 5);
    const [a, b] = await Promise.all([first, second, lone]);
    expect(order.slice(0, 2)).toEqual(["first", "lone"]); // lone passed the waiting second
    expect(a.tokens.length).toBeLessThan(8);
    expect(b.tokens).toEqual(want[1]!);
    await e.close();
  });
});

test("rolling snapshots: a prompt that parts from a cached one after 20K shared tokens reuses 20K (every 4,096)", async () => {
  const e = engine({ pageTokens: 64, snapshotInterval: 4096, maxStepTokens: 512, contextTokens: 32768 });
  const long = toyPrompt(24000, 3);
  await collect(e.generate(request(long, 1)));
  const parted = concat(long.subarray(0, 20480), toyPrompt(500, 4));
  const resumed = await collect(e.generate(request(parted, 4)));
  expect(resumed.cached).toBe(20480);
  await e.close();
  const cold = engine({ pageTokens: 64, snapshotInterval: 4096, maxStepTokens: 512, contextTokens: 32768, prefixCache: false });
  expect((await collect(cold.generate(request(parted, 4)))).tokens).toEqual(resumed.tokens);
  await cold.close();
}, 60_000);
