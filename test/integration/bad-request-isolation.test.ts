// One bad request never harms the requests running beside it. On the embedded model with its default drafter, three
// greedy streams (one per API) run while bad requests arrive: sampling values out of range on every surface are 400s
// naming the field (before, top_k 1e12 wrapped negative in the engine's int32 field, and repetition_penalty 1e308 or
// 1e-308 became inf or 0 in its float, and the native check failed the whole batch step: every stream ended with
// internal_error), and the three streams finish with exactly the text they give alone. Underneath, the engine is
// handed sampling settings the native step refuses, bypassing the schemas: only that request fails.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import type { GenerateRequest, Sampling } from "../../src/engine/types.ts";
import { post, readSse } from "../helpers/server.ts";

const M = "splash-tiny";
const ask = "Write a Python function that returns the sum of a list of numbers.";
const TOKENS = 40;

let loaded: LoadedModel;
let server: RunningServer;
beforeAll(async () => {
  loaded = await loadModel(resolveModel(M), { threads: 2, kvBudget: 64 << 20 });
  server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat], pingIntervalMs: 1000 });
});
afterAll(async () => {
  await server.stop();
  await loaded.close();
});

// The three streams: greedy, no thinking, a fixed length; `text` pulls the answer out of the surface's events.
const streams = {
  chat: {
    path: "/v1/chat/completions",
    body: { model: M, messages: [{ role: "user", content: ask }], max_tokens: TOKENS, temperature: 0, reasoning_effort: "none", stream: true },
    text: (data: string) => ((JSON.parse(data) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? ""),
  },
  responses: {
    path: "/v1/responses",
    body: { model: M, input: ask, max_output_tokens: TOKENS, temperature: 0, reasoning: { effort: "none" }, stream: true },
    text: (data: string) => {
      const e = JSON.parse(data) as { type: string; delta?: string };
      return e.type === "response.output_text.delta" ? e.delta! : "";
    },
  },
  messages: {
    path: "/v1/messages",
    body: { model: M, messages: [{ role: "user", content: ask }], max_tokens: TOKENS, temperature: 0, stream: true },
    text: (data: string) => {
      const e = JSON.parse(data) as { type: string; delta?: { type: string; text?: string } };
      return e.type === "content_block_delta" && e.delta?.type === "text_delta" ? e.delta.text! : "";
    },
  },
} as const;
type Api = keyof typeof streams;
const APIS = Object.keys(streams) as Api[];

// A stream's answer, and whether it ended cleanly (no error event); `started` resolves at its first event with text.
async function run(api: Api, started?: () => void): Promise<{ text: string; errors: string[] }> {
  const s = streams[api];
  const res = await post(server.url + s.path, s.body);
  expect(res.status).toBe(200);
  let text = "";
  const errors: string[] = [];
  await readSse(res, (e) => {
    if (!e.data || e.data === "[DONE]") return false;
    const j = JSON.parse(e.data) as { type?: string; error?: unknown };
    if (j.type === "error" || j.type === "response.failed" || (j.type === undefined && j.error != null)) errors.push(e.data);
    const piece = s.text(e.data);
    if (piece && !text) started?.();
    text += piece;
    return false;
  });
  return { text, errors };
}

// Out-of-range values each surface takes a field for, as the issue found them and their neighbours.
const BAD: [Api, string, unknown][] = [
  ["chat", "top_k", 1e12],
  ["chat", "repetition_penalty", 1e308],
  ["chat", "repetition_penalty", 1e-308],
  ["chat", "top_p", 1.5],
  ["chat", "presence_penalty", 1e308],
  ["responses", "top_k", 1e12],
  ["responses", "repetition_penalty", 1e-308],
  ["responses", "temperature", 1e308],
  ["messages", "top_k", 1e12],
  ["messages", "top_k", -7],
  ["messages", "min_p", 2],
];

describe("a bad request beside three running streams", () => {
  let alone: Record<Api, string>;

  test("each stream alone", async () => {
    alone = {} as Record<Api, string>;
    for (const api of APIS) {
      const r = await run(api);
      expect(r.errors).toEqual([]);
      expect(r.text.length).toBeGreaterThan(0);
      alone[api] = r.text;
    }
  }, 60_000);

  test("bad sampling values on every surface are 400s naming the field; the three streams finish as they do alone", async () => {
    let running = 0;
    const allStarted = Promise.withResolvers<void>();
    const done = APIS.map((api) => run(api, () => ++running === APIS.length && allStarted.resolve()));
    await allStarted.promise;
    const refusals = await Promise.all(
      BAD.map(async ([api, field, value]) => {
        const s = streams[api];
        const res = await post(server.url + s.path, { ...s.body, [field]: value });
        const body = (await res.json()) as { error: { message: string; param?: string } };
        return { api, field, status: res.status, names: body.error.message.includes(field) || body.error.param === field };
      }),
    );
    for (const r of refusals) expect(r).toEqual({ api: r.api, field: r.field, status: 400, names: true });
    const results = await Promise.all(done);
    APIS.forEach((api, i) => expect({ api, ...results[i]! }).toEqual({ api, text: alone[api], errors: [] }));
  }, 60_000);
});

describe("the engine refuses a sequence whose sampling the native step cannot take, and only it", () => {
  const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 1 };
  const prompt = (k: number) => Int32Array.from({ length: 12 + k }, (_, i) => 100 + ((i * 31 + k * 7) % 3000));
  const request = (k: number, sampling: Sampling): GenerateRequest => ({ prompt: prompt(k), maxTokens: 24, sampling, stopTokens: [], signal: new AbortController().signal });

  async function tokens(req: GenerateRequest): Promise<number[]> {
    const out: number[] = [];
    for await (const e of loaded.engine.generate(req)) if (e.type === "tokens") out.push(...e.tokens.map((t) => t.id));
    return out;
  }

  test.each([
    ["top_k wrapped negative", { topK: 1e12 | 0 }, "sampling.top_k"],
    ["repetition_penalty 0", { repetitionPenalty: Math.fround(1e-308) }, "sampling.repetition_penalty"],
    ["repetition_penalty inf", { repetitionPenalty: Math.fround(1e308) }, "sampling.repetition_penalty"],
    ["a negative temperature", { temperature: -1 }, "sampling.temperature"],
  ] as const)("%s", async (_, bad, field) => {
    const ref = await Promise.all([0, 1, 2].map((k) => tokens(request(k, { ...greedy, seed: k }))));
    const good = [0, 1, 2].map((k) => tokens(request(k, { ...greedy, seed: k })));
    const refused = tokens(request(3, { ...greedy, ...bad })).then(
      () => "completed",
      (e: Error) => e.message,
    );
    expect(await refused).toContain(field);
    expect(await Promise.all(good)).toEqual(ref);
  }, 60_000);
});
