// Speculative decoding is lossless on every backend, through the HTTP API: splash-tiny answers 16 prompts greedily
// with --draft mtp, --draft dflash and --draft dflash2 exactly as with --draft none, token for token, on the CPU and
// on Vulkan (lavapipe, Mesa's CPU Vulkan, in CI; skipped where no Vulkan device exists). Every other prompt asks for a JSON
// schema, so a grammar's masks and refused drafts meet speculation, alone (one stream) and four at once (a step
// mixing sequences with and without a grammar); the prefix cache is on, so later requests resume from the shared
// chat prefix with the drafter's K/V in the shared pages. The drafts are of full length every cycle (draftLength):
// the adaptive policy follows measured step times and may draft little on a busy machine, and this is about
// verification. Prompts are a few words and answers 8 tokens; lavapipe computes every row of a step on the CPU (a
// request takes seconds there, against milliseconds on the CPU backend), so on Vulkan the first 4 prompts run four
// at once and the first alone. The caches are f32, and on Vulkan int8 too (what `--kv-type auto` gives splash-tiny
// there): the drafters' attention reads int8 pages and verify rows quantize their K/V as decode rows do. On Vulkan one
// prompt of over 256 tokens (its prefill takes the chunked Gated DeltaNet) is answered as the CPU answers it and with
// each drafter as without.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel, type LoadedModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { probeBackend } from "../../src/native/model.ts";
import { createApp } from "../../src/server/app.ts";

const M = "splash-tiny";
const MAX_TOKENS = 8;
const ASKS = ["Say hi.", "Name a color.", "Count to five.", "Name a fruit.", "Write a number.", "Say yes.", "Name a day.", "Pick a letter.",
  "Name an animal.", "Say goodbye.", "Name a planet.", "Write a word.", "Name a month.", "Say thanks.", "Name a shape.", "Pick a vowel."];
// A prompt of over 256 tokens: on a GPU its prefill runs the Gated DeltaNet in chunks, the CPU token by token.
const LONG = `Summarize this list in one word: ${Array.from({ length: 40 }, (_, i) => `item ${i} is a ${["red", "blue", "green"][i % 3]} box`).join(", ")}.`;
const SCHEMA = { type: "object", properties: { answer: { type: "string" }, n: { type: "integer" } }, required: ["answer", "n"], additionalProperties: false };
type Draft = "none" | "mtp" | "dflash" | "dflash2";

// prompts: how many run four at once; alone: how many of them run one at a time
const vulkan = probeBackend("vulkan").runsOn !== null;
const BACKENDS = [
  { backend: "cpu" as const, kvType: "f32" as const, run: true, prompts: 16, alone: 16 },
  { backend: "vulkan" as const, kvType: "f32" as const, run: vulkan, prompts: 4, alone: 1 },
  { backend: "vulkan" as const, kvType: "int8" as const, run: vulkan, prompts: 4, alone: 1 },
];
const DRAFTERS = ["mtp", "dflash", "dflash2"] as const;

for (const { backend, kvType, run, prompts, alone } of BACKENDS) {
  describe.skipIf(!run)(`lossless through the API: splash-tiny on ${backend}, ${kvType} KV`, () => {
    const servers = new Map<Draft, { loaded: LoadedModel; app: ReturnType<typeof createApp> }>();
    beforeAll(async () => {
      for (const draft of ["none", ...DRAFTERS] as const) {
        const loaded = await loadModel(resolveModel(M), { threads: 2, kvBudget: 32 << 20, backend, draft, kvType, draftLength: draft === "none" ? undefined : 8 });
        servers.set(draft, { loaded, app: createApp({ models: [loaded.chat] }) });
      }
    }, 60_000);
    afterAll(async () => {
      for (const { loaded } of servers.values()) await loaded.close();
    });

    // The answer's tokens (their text, from the logprobs), why it ended and the prompt's length.
    type Answer = { tokens: string[]; finish: string; prompt: number; logprobs: number[] };
    const ask = (draft: Draft, i: number, content = ASKS[i]): Promise<Answer> => askOn(servers.get(draft)!.app, i, content);
    async function askOn(app: ReturnType<typeof createApp>, i: number, content = ASKS[i]): Promise<Answer> {
      const body = {
        model: M,
        messages: [{ role: "user", content }],
        max_tokens: MAX_TOKENS,
        temperature: 0,
        reasoning_effort: "none",
        logprobs: true,
        ...(i % 2 ? { response_format: { type: "json_schema", json_schema: { name: "answer", schema: SCHEMA } } } : {}),
      };
      const r = await app.handle(
        new Request("http://localhost/v1/chat/completions", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      );
      const text = await r.text();
      expect(r.status, text.slice(0, 300)).toBe(200);
      const res = JSON.parse(text) as {
        choices: { finish_reason: string; logprobs: { content: { token: string; logprob: number }[] } }[];
        usage: { prompt_tokens: number };
      };
      const choice = res.choices[0]!;
      const out = choice.logprobs.content;
      return { tokens: out.map((t) => t.token), finish: choice.finish_reason, prompt: res.usage.prompt_tokens, logprobs: out.map((t) => t.logprob) };
    }

    // The first n prompts, `streams` requests in flight at a time.
    // What a drafter must reproduce: the tokens and why the answer ended (a verify row's arithmetic is not a decode
    // row's, so log-probabilities may differ in their last bits).
    const tokens = ({ tokens, finish }: Answer) => ({ tokens, finish });
    async function all(draft: Draft, n: number, streams: number): Promise<{ tokens: string[]; finish: string }[]> {
      const out: { tokens: string[]; finish: string }[] = new Array(n);
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          out[i] = tokens(await ask(draft, i));
        }
      };
      await Promise.all(Array.from({ length: streams }, worker));
      return out;
    }

    test(`${DRAFTERS.join(", ")} give no drafter's tokens: ${prompts} prompts 4 at once, ${alone} alone, with and without a JSON schema`, async () => {
      const want = await all("none", prompts, 4);
      expect(want.every((o) => o.tokens.length > 0)).toBe(true);
      for (const draft of DRAFTERS) {
        expect({ draft, streams: 4, answers: await all(draft, prompts, 4) }).toEqual({ draft, streams: 4, answers: want });
        expect({ draft, streams: 1, answers: await all(draft, alone, 1) }).toEqual({ draft, streams: 1, answers: want.slice(0, alone) });
        const spec = servers.get(draft)!.loaded.engine.stats().speculation!;
        expect(spec.drafter).toBe(draft);
        expect(spec.cycles).toBeGreaterThan(prompts);
        expect(spec.accepted).toBeGreaterThan(0);
      }
    }, 120_000);

    test.skipIf(backend !== "vulkan" || kvType !== "f32")(`a prompt of over 256 tokens under a JSON schema: the CPU's tokens, and ${DRAFTERS.join(", ")} give no drafter's tokens`, async () => {
      const want = await ask("none", 1, LONG);
      expect(want.prompt).toBeGreaterThan(256);
      expect(want.tokens.length).toBeGreaterThan(0);
      // the CPU's answer (its prefill runs the delta rule token by token): its tokens, their log-probabilities to f32
      // rounding (3e-7 measured; a chunked form whose state update is 10% off moves them 7e-4)
      const cpu = await loadModel(resolveModel(M), { threads: 2, kvBudget: 32 << 20, backend: "cpu", draft: "none", kvType });
      try {
        const got = await askOn(createApp({ models: [cpu.chat] }), 1, LONG);
        expect(tokens(got)).toEqual(tokens(want));
        expect(Math.max(...got.logprobs.map((l, j) => Math.abs(l - want.logprobs[j]!)))).toBeLessThan(1e-5);
      } finally {
        await cpu.close();
      }
      for (const draft of DRAFTERS) expect({ draft, answer: tokens(await ask(draft, 1, LONG)) }).toEqual({ draft, answer: tokens(want) });
    }, 300_000);
  });
}
