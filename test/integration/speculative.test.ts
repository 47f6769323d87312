// Speculative decoding is lossless: on the fixture checkpoints (dense and MoE, random MTP layers and random DFlash and
// DFlash2 drafters) and on the embedded splash-tiny (trained MTP, DFlash and DFlash2 drafters), greedy output with a
// drafter is the output without one, token for token and log-probability for log-probability, alone, batched and
// resumed from the prefix cache — also with splash-tiny's weights quantized to q8 and q4 at load, where a verify
// block's rows go through the integer GEMM and decode's single row through the GEMV, which must agree bit for bit.
// The drafters match the fixtures' golden draft logits, and verify blocks whose drafts go wrong at every possible
// position leave exactly the state token-by-token decoding leaves (the GDN rollback), on the CPU and on Vulkan.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createEngine, type EngineOptions, type SplashEngine } from "../../src/engine/engine.ts";
import { nativeStepModel } from "../../src/engine/native-runner.ts";
import { randomTokens } from "../../src/engine/serve-bench.ts";
import type { EngineEvent, Sampling, SpeculationCounts } from "../../src/engine/types.ts";
import { Model, probeBackend, type DrafterOptions, type Quant } from "../../src/native/model.ts";
import type { KvType } from "../../src/models/kv-type.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { draftFrom } from "../helpers/draft-from.ts";

const FIXTURES = join(import.meta.dir, "../fixtures/models");
const TINY = join(import.meta.dir, "../../models/splash-tiny");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const f32 = (path: string) => new Float32Array(readFileSync(path).buffer.slice(0));

// max |a − b| / std(b) and the rows whose argmax differs
function compare(got: Float32Array, want: Float32Array, vocab: number): { diff: number; argmax: number } {
  let mean = 0;
  for (const x of want) mean += x;
  mean /= want.length;
  let sq = 0;
  let diff = 0;
  for (let i = 0; i < want.length; i++) {
    sq += (want[i]! - mean) ** 2;
    diff = Math.max(diff, Math.abs(got[i]! - want[i]!));
  }
  let argmax = 0;
  const best = (row: Float32Array) => row.indexOf(Math.max(...row));
  for (let r = 0; r < want.length / vocab; r++) if (best(got.subarray(r * vocab, (r + 1) * vocab)) !== best(want.subarray(r * vocab, (r + 1) * vocab))) argmax++;
  return { diff: diff / Math.sqrt(sq / want.length), argmax };
}

describe("drafters against the fixtures' goldens", () => {
  const pages = Int32Array.from({ length: 32 }, (_, i) => i);

  for (const fixture of ["qwen35-dense-tiny", "qwen35-moe-tiny"]) {
    test(`${fixture}: MTP first-step logits (pair (t_{i+1}, hidden_i) at position i) within 1e-3 × std, same argmax`, async () => {
      const model = await Model.load(join(FIXTURES, fixture), { threads: 2, drafter: { kind: "mtp" } });
      const cache = model.createCache({ pageTokens: 16, nPages: 32, nSlots: 1 });
      const V = model.info.vocabSize;
      const manifest = JSON.parse(readFileSync(join(FIXTURES, fixture, "golden/manifest.json"), "utf8")) as { prompts: { tokens: number[]; mtp?: { logits: { file: string } } }[] };
      for (const p of manifest.prompts.filter((p) => p.mtp)) {
        const n = p.tokens.length;
        const want = f32(join(FIXTURES, fixture, "golden", p.mtp!.logits.file));
        for (const i of new Set([0, 1, Math.floor(n / 2), n - 2])) {
          // the MTP's own K/V covers pairs 0..i−1 after a prefill of tokens 0..i; the draft is pair i
          const logits = new Float32Array(V);
          draftFrom(cache, [{ slot: 0, nPast: 0, tokens: Int32Array.from(p.tokens.slice(0, i + 1)), anchor: p.tokens[i + 1]!, nDraft: 1, pages, sampling: greedy, logits }]);
          const r = compare(logits, want.subarray(i * V, (i + 1) * V), V);
          expect(r.diff).toBeLessThan(1e-3);
          expect(r.argmax).toBe(0);
        }
      }
      cache.free();
      model.free();
    });
  }

  for (const drafter of ["qwen35-dense-tiny-dflash", "qwen35-dense-tiny-dflash-swa"]) {
    test(`${drafter}: the first block's draft logits within 1e-3 × std, same anchor and drafts`, async () => {
      const model = await Model.load(join(FIXTURES, "qwen35-dense-tiny"), { threads: 2, drafter: { kind: "dflash", dir: join(FIXTURES, drafter) } });
      const cache = model.createCache({ pageTokens: 16, nPages: 32, nSlots: 1 });
      const V = model.info.vocabSize;
      const manifest = JSON.parse(readFileSync(join(FIXTURES, drafter, "golden/manifest.json"), "utf8")) as {
        cases: { prompt: number[]; anchor: number; block_tokens: number[]; draft_argmax: number[]; draft_logits: { file: string } }[];
      };
      expect(model.drafter).toMatchObject({ kind: "dflash", blockSize: manifest.cases[0]!.block_tokens.length, maskTokenId: 1017 });
      for (const c of manifest.cases) {
        const B = c.block_tokens.length;
        const logits = new Float32Array((B - 1) * V);
        // the prompt's step samples the anchor (its own argmax) and drafts the block after it
        const [r] = cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(c.prompt), pages, sample: { sampling: greedy }, speculate: { next: B - 1, nextLogits: logits } }]);
        expect(r!.token).toBe(c.anchor);
        expect([...r!.drafts!]).toEqual(c.draft_argmax);
        const cmp = compare(logits, f32(join(FIXTURES, drafter, "golden", c.draft_logits.file)), V);
        expect(cmp.diff).toBeLessThan(1e-3);
        expect(cmp.argmax).toBe(0);
      }
      cache.free();
      model.free();
    });
  }
});

// On the CPU for both architectures, and on Vulkan (lavapipe; where a device exists) for the dense one: the replay
// of the accepted rows into the GDN state runs as backend ops on the device.
const ROLLBACK = [
  { fixture: "qwen35-dense-tiny", backend: "cpu" as const },
  { fixture: "qwen35-moe-tiny", backend: "cpu" as const },
  ...(probeBackend("vulkan").runsOn !== null ? [{ fixture: "qwen35-dense-tiny", backend: "vulkan" as const }] : []),
];

describe("verify blocks wrong at every position leave the token-by-token state", () => {
  for (const { fixture, backend } of ROLLBACK) {
    test(`${fixture} on ${backend}`, async () => {
      const model = await Model.load(join(FIXTURES, fixture), { threads: 2, backend, drafter: { kind: "mtp", maxDraft: 6 } });
      const cache = model.createCache({ pageTokens: 16, nPages: 16, nSlots: 2 });
      const pages = Int32Array.from({ length: 8 }, (_, i) => i);
      const pages2 = Int32Array.from({ length: 8 }, (_, i) => 8 + i);
      const prompt = randomTokens(37, 5, model.info.vocabSize - 8);
      // token by token
      const want: { token: number; logprob: number }[] = [];
      let [r] = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages, sample: { sampling: greedy } }]);
      want.push(r!);
      for (let n = prompt.length; want.length < 70; n++) {
        [r] = cache.step([{ slot: 0, nPast: n, tokens: Int32Array.of(want.at(-1)!.token), pages, sample: { sampling: greedy } }]);
        want.push(r!);
      }
      // verify blocks of 1..6 drafts taken from that continuation, wrong from position e on (e = k: all right)
      [r] = cache.step([{ slot: 1, nPast: 0, tokens: prompt, pages: pages2, sample: { sampling: greedy } }]);
      const got = [{ token: r!.token, logprob: r!.logprob }];
      let cycle = 0;
      while (got.length < want.length - 7) {
        const k = 1 + (cycle % 6);
        const e = Math.floor(cycle / 6) % (k + 1);
        const drafts = want.slice(got.length, got.length + k).map((t, j) => (j === e ? (t.token + 1) % 1000 : t.token));
        const nPast = prompt.length + got.length - 1;
        const [v] = cache.step([
          { slot: 1, nPast, tokens: Int32Array.from([got.at(-1)!.token, ...drafts]), pages: pages2, sample: { sampling: greedy }, speculate: { verify: { nDraft: k, nProposed: k } } },
        ]);
        expect(v!.accepted!.length).toBe(Math.min(e, k));
        got.push(...v!.accepted!.map(({ token, logprob }) => ({ token, logprob })), { token: v!.token, logprob: v!.logprob });
        cycle++;
      }
      expect(cycle).toBeGreaterThan(12);
      expect(got).toEqual(want.slice(0, got.length).map(({ token, logprob }) => ({ token, logprob })));
      cache.free();
      model.free();
    }, 30_000);
  }
});

type Outcome = { tokens: number[]; logprobs: number[]; cached: number; speculation?: SpeculationCounts };

async function generate(engine: SplashEngine, prompt: Int32Array, maxTokens: number, sampling = greedy): Promise<Outcome> {
  const out: Outcome = { tokens: [], logprobs: [], cached: -1 };
  const events: AsyncIterable<EngineEvent> = engine.generate({ prompt, maxTokens, sampling, seeded: true, stopTokens: [], topLogprobs: 0, signal: new AbortController().signal });
  for await (const ev of events) {
    if (ev.type === "admitted") out.cached = ev.cachedPromptTokens;
    else if (ev.type === "tokens") {
      out.tokens.push(...ev.tokens.map((t) => t.id));
      out.logprobs.push(...ev.tokens.map((t) => t.logprob!));
    } else if (ev.speculation) out.speculation = ev.speculation;
  }
  return out;
}

const OUTPUT = 40;
const base: EngineOptions = { kvBudget: 48 << 20, pageTokens: 16, snapshotInterval: 32 };

async function tinyPrompts(): Promise<Int32Array[]> {
  const tokenizer = await Tokenizer.load(TINY);
  const asks = [
    "Write a Python function that returns the n-th Fibonacci number.",
    "def merge_sorted(a, b):\n    \"\"\"Merge two sorted lists.\"\"\"",
    "Write a Python function that counts the vowels in a string.",
    "Write a Python function that reverses the words of a sentence.",
  ]; // all at once: 4 streams
  const prompts = asks.map((a) => tokenizer.encodeTemplate(`<|im_start|>user\n${a}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`));
  tokenizer.free();
  return prompts;
}

// kv: the KV type of both models (default f32); an int8 cache holds the drafter's K/V in int8 too. quant: the level
// the weights are quantized to at load.
const CASES: { name: string; dir: string; quant?: Quant; drafter: DrafterOptions; prompts: () => Promise<Int32Array[]>; kv?: KvType }[] = [
  { name: "dense fixture, MTP", dir: join(FIXTURES, "qwen35-dense-tiny"), drafter: { kind: "mtp" }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 11 + i, 1016)) },
  { name: "MoE fixture, MTP", dir: join(FIXTURES, "qwen35-moe-tiny"), drafter: { kind: "mtp" }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 21 + i, 504)) },
  { name: "dense fixture, DFlash", dir: join(FIXTURES, "qwen35-dense-tiny"), drafter: { kind: "dflash", dir: join(FIXTURES, "qwen35-dense-tiny-dflash") }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 31 + i, 1016)) },
  { name: "dense fixture, sliding-window DFlash", dir: join(FIXTURES, "qwen35-dense-tiny"), drafter: { kind: "dflash", dir: join(FIXTURES, "qwen35-dense-tiny-dflash-swa") }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 41 + i, 1016)) },
  { name: "dense fixture, DFlash2", dir: join(FIXTURES, "qwen35-dense-tiny"), drafter: { kind: "dflash2", dir: join(FIXTURES, "qwen35-dense-tiny-dflash2") }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 51 + i, 1016)) },
  { name: "splash-tiny, MTP", dir: TINY, drafter: { kind: "mtp" }, prompts: tinyPrompts },
  { name: "splash-tiny, DFlash", dir: TINY, drafter: { kind: "dflash", dir: join(TINY, "dflash") }, prompts: tinyPrompts },
  { name: "splash-tiny, DFlash2", dir: TINY, drafter: { kind: "dflash2", dir: join(TINY, "dflash2") }, prompts: tinyPrompts },
  { name: "splash-tiny, MTP, int8 KV", dir: TINY, drafter: { kind: "mtp" }, prompts: tinyPrompts, kv: "int8" },
  { name: "dense fixture, sliding-window DFlash, int8 KV", dir: join(FIXTURES, "qwen35-dense-tiny"), drafter: { kind: "dflash", dir: join(FIXTURES, "qwen35-dense-tiny-dflash-swa") }, prompts: async () => [17, 40, 70].map((n, i) => randomTokens(n, 51 + i, 1016)), kv: "int8" },
  { name: "splash-tiny q8, DFlash", dir: TINY, quant: "q8", drafter: { kind: "dflash", dir: join(TINY, "dflash") }, prompts: tinyPrompts },
  { name: "splash-tiny q4, MTP", dir: TINY, quant: "q4", drafter: { kind: "mtp" }, prompts: tinyPrompts },
  { name: "splash-tiny q8, DFlash2, int8 KV", dir: TINY, quant: "q8", drafter: { kind: "dflash2", dir: join(TINY, "dflash2") }, prompts: tinyPrompts, kv: "int8" },
];

for (const c of CASES) {
  describe(`lossless: ${c.name}`, () => {
    let plain: Model;
    let drafted: Model;
    let prompts: Int32Array[];
    const want: Outcome[] = [];
    beforeAll(async () => {
      plain = await Model.load(c.dir, { threads: 2, quant: c.quant });
      drafted = await Model.load(c.dir, { threads: 2, quant: c.quant, drafter: c.drafter });
      plain.setKvType(c.kv ?? "f32");
      drafted.setKvType(c.kv ?? "f32");
      prompts = await c.prompts();
      const engine = createEngine(nativeStepModel(plain), { ...base, prefixCache: false });
      for (const p of prompts) want.push(await generate(engine, p, OUTPUT));
      await engine.close();
    }, 60_000);
    afterAll(() => {
      plain.free();
      drafted.free();
    });

    test("alone, then all at once in steps of 48 tokens: the same tokens and log-probabilities", async () => {
      // Drafts of the full length every cycle: the adaptive policy's gate follows measured step times, so on a busy
      // machine it may draft little, and this test is about verification (the resumed test below keeps the policy).
      const engine = createEngine(nativeStepModel(drafted), { ...base, prefixCache: false, maxStepTokens: 48, draftLength: drafted.drafter!.maxDraft });
      const alone = [];
      for (const p of prompts) alone.push(await generate(engine, p, OUTPUT));
      const batched = await Promise.all(prompts.map((p) => generate(engine, p, OUTPUT)));
      await engine.close();
      const strip = (o: Outcome) => ({ tokens: o.tokens, logprobs: o.logprobs });
      expect(alone.map(strip)).toEqual(want.map(strip));
      expect(batched.map(strip)).toEqual(want.map(strip));
      expect(alone.every((o) => o.speculation!.cycles > 0)).toBe(true);
      if (c.dir === TINY) expect(alone.reduce((n, o) => n + o.speculation!.accepted, 0)).toBeGreaterThan(OUTPUT / 4); // a trained pair accepts
    }, 60_000);

    test("resumed from the prefix cache (the drafter's K/V rides in the shared pages): the same tokens", async () => {
      const engine = createEngine(nativeStepModel(drafted), { ...base, maxStepTokens: 48 });
      for (const [i, p] of prompts.entries()) {
        await generate(engine, p.subarray(0, Math.max(2, Math.floor(p.length * 0.7))), 3);
        const resumed = await generate(engine, p, OUTPUT);
        if (p.length > 33) expect(resumed.cached).toBeGreaterThan(0);
        expect({ tokens: resumed.tokens, logprobs: resumed.logprobs }).toEqual({ tokens: want[i]!.tokens, logprobs: want[i]!.logprobs });
      }
      await engine.close();
    }, 60_000);
  });
}

describe("sampling with a drafter", () => {
  test("reproducible for a seed, alone or batched; different seeds differ", async () => {
    const model = await Model.load(TINY, { threads: 2, drafter: { kind: "dflash", dir: join(TINY, "dflash") } });
    const engine = createEngine(nativeStepModel(model), base);
    const prompts = await tinyPrompts();
    const sampling = (seed: number): Sampling => ({ ...greedy, temperature: 0.8, topP: 0.95, topK: 20, seed });
    const alone = [];
    for (const p of prompts) alone.push((await generate(engine, p, 32, sampling(7))).tokens);
    const again = await Promise.all(prompts.map((p) => generate(engine, p, 32, sampling(7))));
    expect(again.map((o) => o.tokens)).toEqual(alone);
    const other = await generate(engine, prompts[0]!, 32, sampling(8));
    expect(other.tokens).not.toEqual(alone[0]);
    expect(engine.stats().speculation!.cycles).toBeGreaterThan(0);
    await engine.close();
    model.free();
  }, 60_000);
});
