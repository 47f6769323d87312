// A seed the caller chooses gives the same sampled text whatever else the server is running, with the default
// drafter attached: a seeded sequence's draft lengths follow its own acceptance only, while the unseeded streams
// beside it speculate by the engine's costs (src/engine/speculation.ts). Each API surface, streamed and not: the
// seeded request alone, then again beside three unseeded sampling streams.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { post, readSse } from "../helpers/server.ts";

const M = "splash-tiny";
const TOKENS = 48;

let loaded: LoadedModel;
let server: RunningServer;
beforeAll(async () => {
  loaded = await loadModel(resolveModel(M), { threads: 2, kvBudget: 64 << 20 });
  server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat] });
});
afterAll(async () => {
  await server.stop();
  await loaded.close();
});

type Api = "chat" | "responses" | "messages";
const user = (text: string) => [{ role: "user", content: text }];

function request(api: Api, text: string, stream: boolean, seed?: number): { path: string; body: Record<string, unknown> } {
  const common = { model: M, temperature: 1, stream, ...(seed !== undefined && { seed }) };
  if (api === "chat") return { path: "/v1/chat/completions", body: { ...common, messages: user(text), max_tokens: TOKENS, reasoning_effort: "none" } };
  if (api === "responses") return { path: "/v1/responses", body: { ...common, input: text, max_output_tokens: TOKENS, reasoning: { effort: "none" } } };
  return { path: "/v1/messages", body: { ...common, messages: user(text), max_tokens: TOKENS } };
}

// The answer's text, from the surface's events or its JSON body.
async function answer(api: Api, text: string, stream: boolean, seed?: number): Promise<string> {
  const { path, body } = request(api, text, stream, seed);
  const res = await post(server.url + path, body);
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

const ASK = "Write a short poem about the sea.";
const NEIGHBOURS = ["List five fruits.", "Explain recursion in one paragraph.", "Write a haiku about snow."];

describe("a seeded sampled request, with the default drafter", () => {
  for (const api of ["chat", "responses", "messages"] as const) {
    for (const stream of [true, false]) {
      test(`${api}${stream ? ", streamed" : ""}: the same text alone and beside three unseeded streams`, async () => {
        const alone = await answer(api, ASK, stream, 11);
        expect(alone.length).toBeGreaterThan(0);
        const [batched, ...others] = await Promise.all([answer(api, ASK, stream, 11), ...NEIGHBOURS.map((q) => answer(api, q, true))]);
        expect(batched).toBe(alone);
        for (const o of others) expect(o.length).toBeGreaterThan(0);
      }, 60_000);
    }
  }

  test("the drafter ran for both kinds of sequence", () => {
    expect(loaded.draft).not.toBe("none");
    expect(loaded.engine.stats().speculation!.cycles).toBeGreaterThan(0);
  });
});
