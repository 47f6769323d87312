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
// there): the drafters' attention reads int8 pages and verify rows quantize their K/V as decode rows do.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel, type LoadedModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { probeBackend } from "../../src/native/model.ts";
import { createApp } from "../../src/server/app.ts";

const M = "splash-tiny";
const MAX_TOKENS = 8;
const ASKS = ["Say hi.", "Name a color.", "Count to five.", "Name a fruit.", "Write a number.", "Say yes.", "Name a day.", "Pick a letter.",
  "Name an animal.", "Say goodbye.", "Name a planet.", "Write a word.", "Name a month.", "Say thanks.", "Name a shape.", "Pick a vowel."];
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

    // The answer's tokens (their text, from the logprobs) and why it ended.
    async function ask(draft: Draft, i: number): Promise<{ tokens: string[]; finish: string }> {
      const body = {
        model: M,
        messages: [{ role: "user", content: ASKS[i] }],
        max_tokens: MAX_TOKENS,
        temperature: 0,
        reasoning_effort: "none",
        logprobs: true,
        ...(i % 2 ? { response_format: { type: "json_schema", json_schema: { name: "answer", schema: SCHEMA } } } : {}),
      };
      const r = await servers.get(draft)!.app.handle(
        new Request("http://localhost/v1/chat/completions", { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } }),
      );
      const text = await r.text();
      expect(r.status, text.slice(0, 300)).toBe(200);
      const choice = (JSON.parse(text) as { choices: { finish_reason: string; logprobs: { content: { token: string }[] } }[] }).choices[0]!;
      return { tokens: choice.logprobs.content.map((t) => t.token), finish: choice.finish_reason };
    }

    // The first n prompts, `streams` requests in flight at a time.
    async function all(draft: Draft, n: number, streams: number): Promise<{ tokens: string[]; finish: string }[]> {
      const out: { tokens: string[]; finish: string }[] = new Array(n);
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          out[i] = await ask(draft, i);
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
  });
}
