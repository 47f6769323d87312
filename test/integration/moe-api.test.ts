// The mixture-of-experts path through the HTTP API: the MoE fixture (moe-fixture-model.ts: its routed experts, its
// gated shared expert and its MTP layer) answers greedy chat requests the same whether they run alone or four at once,
// streamed or not, and with --draft mtp exactly as with --draft none, token for token — on the CPU and on Vulkan
// (lavapipe in CI; skipped without a Vulkan device). The requests mix what meets the MoE step in one request: a JSON
// schema (a grammar's masks, and the drafts it refuses), tools in the prompt, streaming, and a step that batches
// sequences with and without those. One token's MoE layer and several tokens' take different GPU paths (no expert
// plan for one), so decode rows, verify blocks and prefill rows all pass through both.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { probeBackend } from "../../src/native/model.ts";
import { createApp } from "../../src/server/app.ts";
import { MOE_FIXTURE_MODEL_ID, loadMoeFixtureModel } from "../helpers/moe-fixture-model.ts";
import { readSse } from "../helpers/server.ts";

const ASKS = ["Say hi.", "Name a color.", "Count to five.", "Name a fruit.", "Write a number.", "Say yes.", "Name a day.", "Pick a letter."];
const SCHEMA = { type: "object", properties: { answer: { type: "string" }, n: { type: "integer" } }, required: ["answer", "n"], additionalProperties: false };
const TOOLS = [{ type: "function", function: { name: "lookup", description: "Look a word up.", parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] } } }];
type Draft = "none" | "mtp";

const vulkan = probeBackend("vulkan").runsOn !== null;
const BACKENDS = [
  { backend: "cpu" as const, run: true, prompts: 8 },
  { backend: "vulkan" as const, run: vulkan, prompts: 4 },
];

for (const { backend, run, prompts } of BACKENDS) {
  describe.skipIf(!run)(`the MoE fixture through the API on ${backend}`, () => {
    const servers = new Map<Draft, { loaded: LoadedModel; app: ReturnType<typeof createApp> }>();
    beforeAll(async () => {
      for (const draft of ["none", "mtp"] as const) {
        const loaded = await loadMoeFixtureModel({ backend, draft, draftLength: draft === "none" ? undefined : 4 });
        servers.set(draft, { loaded, app: createApp({ models: [loaded.chat] }) });
      }
    }, 60_000);
    afterAll(async () => {
      for (const { loaded } of servers.values()) await loaded.close();
    });

    // Request i: every third under a JSON schema, every third with tools in its prompt.
    const body = (i: number, stream: boolean) => ({
      model: MOE_FIXTURE_MODEL_ID,
      messages: [{ role: "user", content: ASKS[i] }],
      max_tokens: 8,
      temperature: 0,
      reasoning_effort: "none",
      stream,
      ...(i % 3 === 1 ? { response_format: { type: "json_schema", json_schema: { name: "answer", schema: SCHEMA } } } : {}),
      ...(i % 3 === 2 ? { tools: TOOLS } : {}),
    });
    const request = (draft: Draft, i: number, stream: boolean) =>
      servers.get(draft)!.app.handle(
        new Request("http://localhost/v1/chat/completions", { method: "POST", body: JSON.stringify(body(i, stream)), headers: { "content-type": "application/json" } }),
      );

    // What the answer says (text or tool calls, without their ids) and why it ended.
    type Answer = { text: string; tools: string; finish: string };
    async function ask(draft: Draft, i: number): Promise<Answer> {
      const r = await request(draft, i, false);
      const text = await r.text();
      expect(r.status, text.slice(0, 300)).toBe(200);
      const choice = (JSON.parse(text) as { choices: { finish_reason: string; message: { content: string | null; tool_calls?: { function: unknown }[] } }[] })
        .choices[0]!;
      return { text: choice.message.content ?? "", tools: JSON.stringify((choice.message.tool_calls ?? []).map((t) => t.function)), finish: choice.finish_reason };
    }
    async function askStreamed(draft: Draft, i: number): Promise<Answer> {
      const r = await request(draft, i, true);
      expect(r.status).toBe(200);
      let text = "", finish = "";
      const tools: { name?: string; arguments: string }[] = [];
      for (const e of await readSse(r)) {
        if (!e.data || e.data === "[DONE]") continue;
        const choice = (JSON.parse(e.data) as {
          choices: { finish_reason: string | null; delta: { content?: string | null; tool_calls?: { index: number; function?: { name?: string; arguments?: string } }[] } }[];
        }).choices[0];
        if (!choice) continue;
        text += choice.delta.content ?? "";
        for (const t of choice.delta.tool_calls ?? []) {
          tools[t.index] ??= { arguments: "" };
          if (t.function?.name) tools[t.index]!.name = t.function.name;
          tools[t.index]!.arguments += t.function?.arguments ?? "";
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
      return { text, tools: JSON.stringify(tools.map((t) => ({ name: t.name, arguments: t.arguments }))), finish };
    }

    // The first n requests, `streams` in flight at a time.
    async function all(draft: Draft, n: number, streams: number, streamed = false): Promise<Answer[]> {
      const out: Answer[] = new Array(n);
      let next = 0;
      const worker = async () => {
        while (next < n) {
          const i = next++;
          out[i] = await (streamed ? askStreamed : ask)(draft, i);
        }
      };
      await Promise.all(Array.from({ length: streams }, worker));
      return out;
    }

    test(`${prompts} requests (JSON schema, tools, plain): alone = four at once = streamed, and --draft mtp gives no drafter's tokens`, async () => {
      const want = await all("none", prompts, 1);
      expect(want.every((a) => a.text.length > 0 || a.tools !== "[]")).toBe(true);
      for (let i = 1; i < prompts; i += 3) expect(want[i]!.text.startsWith("{")).toBe(true); // the schema's grammar held it
      expect({ streams: 4, answers: await all("none", prompts, 4) }).toEqual({ streams: 4, answers: want });
      expect({ streamed: true, answers: await all("none", prompts, 4, true) }).toEqual({ streamed: true, answers: want });
      expect({ draft: "mtp", streams: 4, answers: await all("mtp", prompts, 4) }).toEqual({ draft: "mtp", streams: 4, answers: want });
      expect({ draft: "mtp", streams: 1, streamed: true, answers: await all("mtp", prompts, 1, true) }).toEqual({ draft: "mtp", streams: 1, streamed: true, answers: want });
      const spec = servers.get("mtp")!.loaded.engine.stats().speculation!;
      expect(spec.drafter).toBe("mtp");
      expect(spec.cycles).toBeGreaterThan(prompts);
    }, 240_000);
  });
}
