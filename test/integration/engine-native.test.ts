// The engine on libsplash with the fixture checkpoints (dense and MoE), with an f32 and an int8 KV cache: greedy
// outputs are the same token for token whether a sequence runs alone, batched with others in small chunks, or
// resumed from the prefix cache; under a tight KV budget many concurrent requests all complete with those same
// outputs. The log-probabilities are compared too, exactly: chunks are cut at block boundaries and the native step
// is batch-invariant (an int8 row is quantized alone, whatever shares its step), so every path computes
// bit-identical logits.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createEngine, type EngineOptions } from "../../src/engine/engine.ts";
import { nativeStepModel } from "../../src/engine/native-runner.ts";
import type { StepModel } from "../../src/engine/runner.ts";
import { randomTokens } from "../../src/engine/serve-bench.ts";
import type { EngineEvent, Sampling } from "../../src/engine/types.ts";
import { Model } from "../../src/native/model.ts";

const FIXTURES = join(import.meta.dir, "../fixtures/models");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const OUTPUT = 12;

type Outcome = { tokens: number[]; logprobs: number[]; cached: number; reason: string };

async function generate(engine: ReturnType<typeof createEngine>, prompt: Int32Array, maxTokens = OUTPUT): Promise<Outcome> {
  const out: Outcome = { tokens: [], logprobs: [], cached: -1, reason: "" };
  const events: AsyncIterable<EngineEvent> = engine.generate({ prompt, maxTokens, sampling: greedy, stopTokens: [], topLogprobs: 0, signal: new AbortController().signal });
  for await (const ev of events) {
    if (ev.type === "admitted") out.cached = ev.cachedPromptTokens;
    else if (ev.type === "tokens") {
      out.tokens.push(...ev.tokens.map((t) => t.id));
      out.logprobs.push(...ev.tokens.map((t) => t.logprob!));
    }
    else out.reason = ev.reason;
  }
  return out;
}

// The golden prompts (their last-position argmax is known) and random ones across page and GDN-chunk boundaries.
function prompts(dir: string, vocab: number): { prompt: Int32Array; firstToken?: number }[] {
  const manifest = JSON.parse(readFileSync(join(dir, "golden/manifest.json"), "utf8")) as {
    prompts: { tokens: number[]; logits: { file: string; shape: number[] } }[];
  };
  const golden = manifest.prompts.map((p) => {
    const logits = new Float32Array(readFileSync(join(dir, "golden", p.logits.file)).buffer.slice(0));
    const last = logits.subarray(logits.length - vocab);
    return { prompt: Int32Array.from(p.tokens), firstToken: last.indexOf(Math.max(...last)) };
  });
  const random = [17, 33, 64, 100, 131, 257].map((n, i) => ({ prompt: randomTokens(n, 31 + i, vocab - 8) }));
  return [...golden, ...random];
}

for (const [fixture, kvType] of [["qwen35-dense-tiny", "f32"], ["qwen35-moe-tiny", "f32"], ["qwen35-dense-tiny", "int8"], ["qwen35-moe-tiny", "int8"]] as const) {
  describe(`engine on ${fixture}, ${kvType} KV`, () => {
    let model: Model;
    let step: StepModel;
    let cases: { prompt: Int32Array; firstToken?: number }[];
    const alone: { tokens: number[]; logprobs: number[] }[] = [];
    const base: EngineOptions = { kvBudget: 32 << 20, pageTokens: 16, snapshotInterval: 32 };

    beforeAll(async () => {
      model = await Model.load(join(FIXTURES, fixture), { threads: 2 });
      model.setKvType(kvType);
      step = nativeStepModel(model);
      cases = prompts(join(FIXTURES, fixture), model.info.vocabSize);
      const engine = createEngine(step, { ...base, prefixCache: false });
      for (const c of cases) {
        const { tokens, logprobs } = await generate(engine, c.prompt);
        alone.push({ tokens, logprobs });
      }
      await engine.close();
    }, 60_000);
    afterAll(() => model.free());

    // The goldens are f32 computations; an int8 cache moves logits by more than their argmax margin guarantees.
    test.if(kvType === "f32")("alone: the first token is the golden argmax", () => {
      for (const [i, c] of cases.entries()) if (c.firstToken !== undefined) expect(alone[i]!.tokens[0]).toBe(c.firstToken);
      expect(alone.every((t) => t.tokens.length === OUTPUT)).toBe(true);
    });

    test("batched, in chunks of at most 48 tokens: the same tokens", async () => {
      const engine = createEngine(step, { ...base, prefixCache: false, maxStepTokens: 48, maxSeqs: 8 });
      const outs = await Promise.all(cases.map((c) => generate(engine, c.prompt)));
      expect(outs.map(({ tokens, logprobs }) => ({ tokens, logprobs }))).toEqual(alone);
      await engine.close();
    }, 60_000);

    test("resumed from the prefix cache: the same tokens", async () => {
      const engine = createEngine(step, base);
      for (const [i, c] of cases.entries()) {
        if (c.prompt.length < 33) continue;
        await generate(engine, c.prompt.subarray(0, Math.floor(c.prompt.length * 0.6)), 2); // an earlier turn
        const resumed = await generate(engine, c.prompt);
        expect(resumed.cached).toBeGreaterThan(0);
        expect({ tokens: resumed.tokens, logprobs: resumed.logprobs }).toEqual(alone[i]!);
        const again = await generate(engine, c.prompt); // every token hits: the last block runs again
        expect(again.cached).toBe(Math.floor((c.prompt.length - 1) / 16) * 16);
        expect({ tokens: again.tokens, logprobs: again.logprobs }).toEqual(alone[i]!);
      }
      expect(engine.stats().prefixCacheHitTokens).toBeGreaterThan(0);
      await engine.close();
    }, 60_000);

    test("a tight budget: 30 concurrent requests all complete with the same tokens; memory returns", async () => {
      // 40 pages of 16 tokens (more with an int8 cache, whose pages are small beside the state slots the plan keeps
      // half the budget for): a few of the longest requests at once (257 + 12 positions = 17 pages).
      const pageBytes = model.pageBytes(16);
      const engine = createEngine(step, { ...base, kvBudget: 40 * pageBytes + 8 * model.slotBytes + 1, maxSeqs: 4 });
      expect(engine.plan.nPages).toBeGreaterThanOrEqual(40);
      expect(engine.plan.nPages).toBeLessThan(5 * 17);
      const jobs = Array.from({ length: 30 }, (_, k) => k % cases.length);
      const outs = await Promise.all(jobs.map((i) => generate(engine, cases[i]!.prompt)));
      outs.forEach((o, k) => {
        expect(o.reason).toBe("length");
        expect({ tokens: o.tokens, logprobs: o.logprobs }).toEqual(alone[jobs[k]!]!);
      });
      const s = engine.stats();
      expect([s.running, s.queued, s.sequenceStateBytes]).toEqual([0, 0, 0]);
      expect(s.peakSequenceStateBytes).toBeLessThanOrEqual(s.stateBytesBudget);
      await engine.close();
    }, 60_000);

    test("200 requests with random cancels: every one ends, and no memory stays held (1000 on the toy: test/unit/engine/engine.test.ts)", async () => {
      const engine = createEngine(step, { ...base, kvBudget: 60 * model.pageBytes(16) + 8 * model.slotBytes + 1, maxSeqs: 4, maxQueue: 200 });
      let seed = 7;
      const rand = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
      const jobs = Array.from({ length: 200 }, async (_, i) => {
        const ac = new AbortController();
        const cancelAfter = rand() < 0.4 ? Math.floor(rand() * 4) : -1;
        const prompt = cases[i % cases.length]!.prompt.subarray(0, 1 + Math.floor(rand() * 80));
        const events = engine.generate({ prompt, maxTokens: 1 + Math.floor(rand() * 6), sampling: greedy, stopTokens: [], signal: ac.signal });
        let n = 0;
        let reason = "";
        for await (const ev of events) {
          if (ev.type === "tokens") n += ev.tokens.length;
          if (ev.type === "done") reason = ev.reason;
          if (cancelAfter >= 0 && n >= cancelAfter) ac.abort();
        }
        return reason;
      });
      const reasons = await Promise.all(jobs);
      expect(reasons.every((r) => r === "length" || r === "cancelled")).toBe(true);
      expect(reasons.filter((r) => r === "cancelled").length).toBeGreaterThan(20);
      const s = engine.stats();
      expect([s.running, s.queued, s.sequenceStateBytes]).toEqual([0, 0, 0]);
      expect(engine.cache.outstandingPages).toBe(0);
      await engine.close();
    }, 60_000);
  });
}

// Admission counts the KV type's real bytes: under one budget that holds 16 int8 contexts of these requests (and so
// only 4 f32 ones, a quarter of the bytes each), 16 concurrent requests all run at once with an int8 cache; with an
// f32 cache they queue, at most 4 running, and all complete too.
describe("admission under one budget, int8 vs f32 KV", () => {
  test("16 concurrent 1K-token requests: 16 at once with int8, 4 at once with f32, all complete", async () => {
    const dir = join(FIXTURES, "qwen35-dense-tiny");
    const PAGE = 64;
    const prompt = 1024 - PAGE; // + 8 output tokens: 16 pages of 64 each
    const peaks: Record<string, { running: number; completed: number }> = {};
    let budget = 0;
    for (const kv of ["int8", "f32"] as const) {
      const model = await Model.load(dir, { threads: 2 });
      model.setKvType(kv);
      if (kv === "int8") budget = 16 * 16 * model.pageBytes(PAGE) + 32 * model.slotBytes;
      const engine = createEngine(nativeStepModel(model), { kvBudget: budget, pageTokens: PAGE, maxSeqs: 16, prefixCache: false });
      let running = 0;
      const outs = await Promise.all(
        Array.from({ length: 16 }, async (_, i) => {
          let reason = "";
          for await (const ev of engine.generate({ prompt: randomTokens(prompt, 900 + i, 1016), maxTokens: 8, sampling: greedy, stopTokens: [], signal: new AbortController().signal })) {
            running = Math.max(running, engine.stats().running);
            if (ev.type === "done") reason = ev.reason;
          }
          return reason;
        }),
      );
      peaks[kv] = { running, completed: outs.filter((r) => r === "length").length };
      await engine.close();
      model.free();
    }
    expect(peaks).toEqual({ int8: { running: 16, completed: 16 }, f32: { running: 4, completed: 16 } });
  }, 120_000);
});
