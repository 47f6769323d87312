// Sampling at temperature > 0 on Vulkan, where the device draws the token (kernels/sample.comp), through the HTTP API
// with everything a sampled request meets there: a seed, top-k/top-p/min-p, a JSON schema's mask, the MTP drafter
// (its verify blocks accept on the host, the step's other rows sample on the device) and batching with streams whose
// penalties send their rows to the host sampler in the same step. Each surface (Chat streamed with a schema, Responses
// with a schema, Messages streamed): a seeded request alone, then beside three unseeded streams — the same text, and
// with a schema, JSON of that schema; another seed gives another text. splash-tiny on lavapipe (skipped where no
// Vulkan device exists).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel, type LoadedModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { probeBackend } from "../../src/native/model.ts";
import { createApp } from "../../src/server/app.ts";
import { readSse } from "../helpers/server.ts";

const M = "splash-tiny";
const TOKENS = 48;
// bounded, so the JSON ends within TOKENS whatever the draw
const SCHEMA = {
  type: "object",
  properties: { answer: { type: "string", maxLength: 12 }, n: { type: "integer", minimum: 0, maximum: 99 } },
  required: ["answer", "n"],
  additionalProperties: false,
};
const SAMPLING = { temperature: 0.9, top_p: 0.95, top_k: 40, min_p: 0.02 };
type Api = "chat" | "responses" | "messages";

let loaded: LoadedModel;
let app: ReturnType<typeof createApp>;
const vulkan = probeBackend("vulkan").runsOn !== null;

describe.skipIf(!vulkan)("seeded sampling on Vulkan through the API, with a schema, the drafter and batching", () => {
  beforeAll(async () => {
    loaded = await loadModel(resolveModel(M), { threads: 2, kvBudget: 32 << 20, backend: "vulkan", draft: "mtp" });
    app = createApp({ models: [loaded.chat] });
  }, 60_000);
  afterAll(async () => {
    await loaded.close();
  });

  function body(api: Api, text: string, seed: number | undefined, schema: boolean, stream: boolean, extra: Record<string, unknown> = {}) {
    const common = { model: M, stream, ...SAMPLING, ...(seed !== undefined && { seed }), ...extra };
    if (api === "chat")
      return { path: "/v1/chat/completions", body: { ...common, messages: [{ role: "user", content: text }], max_tokens: TOKENS, reasoning_effort: "none",
        ...(schema && { response_format: { type: "json_schema", json_schema: { name: "answer", schema: SCHEMA } } }) } };
    if (api === "responses")
      return { path: "/v1/responses", body: { ...common, input: text, max_output_tokens: TOKENS, reasoning: { effort: "none" },
        ...(schema && { text: { format: { type: "json_schema", name: "answer", schema: SCHEMA } } }) } };
    return { path: "/v1/messages", body: { ...common, messages: [{ role: "user", content: text }], max_tokens: TOKENS } };
  }

  // The answer's text, from the surface's events or its JSON body.
  async function answer(api: Api, text: string, seed: number | undefined, schema: boolean, stream: boolean, extra?: Record<string, unknown>): Promise<string> {
    const { path, body: b } = body(api, text, seed, schema, stream, extra);
    const res = await app.handle(new Request(`http://localhost${path}`, { method: "POST", body: JSON.stringify(b), headers: { "content-type": "application/json" } }));
    expect(res.status).toBe(200);
    if (!stream) {
      const j = (await res.json()) as Record<string, any>;
      if (api === "chat") return j.choices[0].message.content;
      if (api === "responses") return j.output.filter((o: { type: string }) => o.type === "message").flatMap((o: { content: { text: string }[] }) => o.content.map((c) => c.text)).join("");
      return j.content.filter((c: { type: string }) => c.type === "text").map((c: { text: string }) => c.text).join("");
    }
    let out = "";
    await readSse(res, (e) => {
      if (!e.data || e.data === "[DONE]") return false;
      const j = JSON.parse(e.data) as Record<string, any>;
      if (api === "chat") out += j.choices?.[0]?.delta?.content ?? "";
      else if (api === "responses") out += j.type === "response.output_text.delta" ? j.delta : "";
      else out += j.type === "content_block_delta" && j.delta?.type === "text_delta" ? j.delta.text : "";
      return false;
    });
    return out;
  }

  const ASK = "Give me an answer and a number.";
  const NEIGHBOURS: [string, Record<string, unknown>][] = [
    ["List five fruits.", { presence_penalty: 0.5 }], // penalties: this row samples on the host, beside device rows
    ["Explain recursion in one paragraph.", {}],
    ["Write a haiku about snow.", { frequency_penalty: 0.3 }],
  ];
  const CASES: { api: Api; schema: boolean; stream: boolean }[] = [
    { api: "chat", schema: true, stream: true },
    { api: "responses", schema: true, stream: false },
    { api: "messages", schema: false, stream: true },
  ];

  for (const { api, schema, stream } of CASES) {
    test(`${api}${stream ? ", streamed" : ""}${schema ? ", JSON schema" : ""}: the same text alone and beside three unseeded streams`, async () => {
      const alone = await answer(api, ASK, 5, schema, stream);
      expect(alone.length).toBeGreaterThan(0);
      const [batched, ...others] = await Promise.all([
        answer(api, ASK, 5, schema, stream),
        ...NEIGHBOURS.map(([q, extra]) => answer(api, q, undefined, false, true, extra)),
      ]);
      expect(batched).toBe(alone);
      for (const o of others) expect(o.length).toBeGreaterThan(0);
      if (schema) {
        const j = JSON.parse(alone) as Record<string, unknown>;
        expect(Object.keys(j).sort()).toEqual(["answer", "n"]);
        expect(typeof j.answer).toBe("string");
        expect((j.answer as string).length).toBeLessThanOrEqual(12);
        expect(Number.isInteger(j.n) && (j.n as number) >= 0 && (j.n as number) <= 99).toBe(true);
      }
    }, 120_000);
  }

  test("the draw follows the seed: four seeds, at least two texts; the drafter ran", async () => {
    const texts = new Set<string>();
    for (const seed of [1, 2, 3, 4]) texts.add(await answer("chat", ASK, seed, false, false));
    expect(texts.size).toBeGreaterThan(1);
    expect(loaded.engine.stats().speculation!.cycles).toBeGreaterThan(0);
  }, 120_000);
});
