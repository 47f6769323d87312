// What the SDK tests cannot see: timing and transport. Headers and pings during a long prefill, a disconnect that
// cancels the generation at once (and /metrics showing the sequence freed), early failures as HTTP statuses and
// late ones as error events, /metrics contents, auth, and the binding warning.
import { afterAll, beforeEach, describe, expect, spyOn, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { log } from "../../src/log.ts";
import { createServer } from "../../src/server/server.ts";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { post, readSse, scrapeMetrics, startServer, type SseEvent } from "../helpers/server.ts";

const model = new ScriptedModel({ id: "m" });
const server = startServer({ models: [model], pingIntervalMs: 40, firstEventWaitMs: 100 });
afterAll(() => server.stop());

beforeEach(() => {
  model.script = () => say({ content: "Hello from a slow model." });
  model.queueMs = 0;
  model.prefillMs = 0;
  model.tokenDelayMs = 0;
  model.overloadedFor = undefined;
});

const surfaces = {
  chat: { path: "/v1/chat/completions", body: { model: "m", messages: [{ role: "user", content: "hi" }], stream: true } },
  responses: { path: "/v1/responses", body: { model: "m", input: "hi", stream: true } },
  messages: { path: "/v1/messages?beta=true", body: { model: "m", max_tokens: 4096, messages: [{ role: "user", content: "hi" }], stream: true } },
} as const;
type Surface = keyof typeof surfaces;
const names = Object.keys(surfaces) as Surface[];

const isPing = (e: SseEvent) => e.comment === "keepalive" || e.event === "ping";
const isOutput = (e: SseEvent) => /"text_delta"|"delta":\{"content":"[^"]|response\.output_text\.delta/.test(e.data ?? "");
const isEnd = (e: SseEvent) => e.data === "[DONE]" || e.event === "message_stop" || e.event === "response.completed";

async function waitFor(condition: () => boolean, ms: number): Promise<number> {
  const t0 = performance.now();
  while (!condition()) {
    if (performance.now() - t0 > ms) throw new Error(`condition not met within ${ms} ms`);
    await Bun.sleep(2);
  }
  return performance.now() - t0;
}

describe.each(names)("%s stream", (surface) => {
  const { path, body } = surfaces[surface];

  test("a long prefill: headers and the first frame at once, then pings until the first token", async () => {
    model.prefillMs = 400;
    const t0 = performance.now();
    const res = await post(server.url + path, body);
    const headersAfter = performance.now() - t0;
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(headersAfter).toBeLessThan(250);
    const events = await readSse(res);
    const firstOutput = events.findIndex(isOutput);
    expect(firstOutput).toBeGreaterThan(0);
    expect(events.slice(0, firstOutput).filter(isPing).length).toBeGreaterThanOrEqual(4);
    expect(events[firstOutput]!.at - t0).toBeGreaterThanOrEqual(400);
    expect(isEnd(events.at(-1)!) || events.at(-2)?.event === "message_stop").toBe(true);
  });

  test("a client that disconnects mid-stream cancels the generation at once; /metrics shows it freed", async () => {
    model.tokenDelayMs = 25;
    model.script = () => say({ content: "x".repeat(2000) });
    const cancelledBefore = model.cancelled;
    const controller = new AbortController();
    const res = await post(server.url + path, body, {}, controller.signal);
    let during = new Map<string, number>();
    // Reading stops after three tokens; the reader is then cancelled and the request aborted: the client is gone.
    await readSse(res, async (_, all) => {
      if (all.filter(isOutput).length < 3) return false;
      during = await scrapeMetrics(server.url);
      return true;
    });
    controller.abort();
    expect(during.get('splash_running_sequences{model="m"}')).toBe(1);
    expect(during.get('splash_generations_active{model="m"}')).toBe(1);
    expect(during.get('splash_state_memory_bytes{model="m"}')).toBe(2 ** 20);
    // One token takes 25 ms; the whole answer would take 50 s. Cancellation must not wait for either.
    expect(await waitFor(() => model.running === 0, 1000)).toBeLessThan(200);
    expect(model.cancelled).toBe(cancelledBefore + 1);
    let metrics = await scrapeMetrics(server.url);
    for (let i = 0; i < 50 && metrics.get('splash_generations_active{model="m"}') !== 0; i++) {
      await Bun.sleep(5);
      metrics = await scrapeMetrics(server.url);
    }
    expect(metrics.get('splash_generations_active{model="m"}')).toBe(0);
    expect(metrics.get('splash_running_sequences{model="m"}')).toBe(0);
    expect(metrics.get('splash_state_memory_bytes{model="m"}')).toBe(0);
  });

  test("an overloaded engine is a 503 with Retry-After, before any stream starts", async () => {
    model.overloadedFor = 4;
    const res = await post(server.url + path, body);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("4");
    const json = (await res.json()) as { error: { type?: string; code?: string } };
    expect(surface === "messages" ? json.error.type : json.error.code).toBe(surface === "messages" ? "overloaded_error" : "server_is_overloaded");
  });

  test("a failure after the stream opened (here: overload after a queue wait) becomes the surface's error event", async () => {
    model.queueMs = 250;
    model.overloadedFor = 2;
    const res = await post(server.url + path, body);
    expect(res.status).toBe(200);
    const events = await readSse(res);
    const last = events.at(-1)!;
    if (surface === "messages") {
      expect(last.event).toBe("error");
      expect(JSON.parse(last.data!)).toEqual({ type: "error", error: { type: "overloaded_error", message: "the server is at capacity; retry after 2 s" } });
    } else if (surface === "chat") {
      expect(JSON.parse(last.data!)).toMatchObject({ error: { type: "server_error", code: "server_is_overloaded" } });
    } else {
      expect(last.event).toBe("response.failed");
      expect(JSON.parse(last.data!)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_is_overloaded" } } });
    }
  });
});

test("a non-streaming request whose client goes away is cancelled too", async () => {
  model.tokenDelayMs = 25;
  model.script = () => say({ content: "y".repeat(2000) });
  const before = model.cancelled;
  const controller = new AbortController();
  const pending = post(server.url + "/v1/chat/completions", { model: "m", messages: [{ role: "user", content: "hi" }] }, {}, controller.signal).catch(() => undefined);
  await waitFor(() => model.running === 1, 1000);
  await Bun.sleep(60);
  controller.abort();
  await pending;
  expect(await waitFor(() => model.running === 0, 1000)).toBeLessThan(200);
  expect(model.cancelled).toBe(before + 1);
});

test("/metrics: requests by surface and status, tokens, latency histograms, engine gauges", async () => {
  const m = new ScriptedModel({ id: "metered" });
  m.script = () => say({ reasoning: "hmm", content: "Twelve characters" });
  m.cachedPromptTokens = 3;
  const s = startServer({ models: [m] });
  try {
    const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "x", maxRetries: 0 });
    const a = await client.chat.completions.create({ model: "metered", messages: [{ role: "user", content: "a" }] });
    const b = await client.chat.completions.stream({ model: "metered", messages: [{ role: "user", content: "bb" }], stream_options: { include_usage: true } }).finalChatCompletion();
    await post(`${s.url}/v1/messages`, { model: "nope", max_tokens: 1, messages: [{ role: "user", content: "x" }] });
    await post(`${s.url}/v1/responses`, { model: "metered" });
    const text = await (await fetch(`${s.url}/metrics`)).text();
    expect(text).toContain("# TYPE splash_time_to_first_token_seconds histogram");
    const metrics = await scrapeMetrics(s.url);
    expect(metrics.get('splash_requests_total{surface="chat",status="200"}')).toBe(2);
    expect(metrics.get('splash_requests_total{surface="messages",status="404"}')).toBe(1);
    expect(metrics.get('splash_requests_total{surface="responses",status="400"}')).toBe(1);
    expect(metrics.get('splash_prompt_tokens_total{model="metered"}')).toBe(a.usage!.prompt_tokens + b.usage!.prompt_tokens);
    expect(metrics.get('splash_cached_prompt_tokens_total{model="metered"}')).toBe(6);
    expect(metrics.get('splash_completion_tokens_total{model="metered"}')).toBe(12);
    expect(metrics.get('splash_reasoning_tokens_total{model="metered"}')).toBe(2);
    expect(metrics.get('splash_time_to_first_token_seconds_count{model="metered"}')).toBe(2);
    expect(metrics.get('splash_time_to_first_token_seconds_bucket{model="metered",le="+Inf"}')).toBe(2);
    expect(metrics.get('splash_time_per_output_token_seconds_count{model="metered"}')).toBe(2);
    expect(metrics.get('splash_queue_depth{model="metered"}')).toBe(0);
    expect(metrics.get('splash_state_memory_budget_bytes{model="metered"}')).toBe(64 * 2 ** 20);
    expect(metrics.get('splash_prefix_cache_hit_tokens_total{model="metered"}')).toBe(6);
  } finally {
    await s.stop();
  }
});

describe("auth and plain endpoints", () => {
  const keyed = new ScriptedModel({ id: "k" });
  const s = startServer({ models: [keyed], apiKey: "sekret" });
  afterAll(() => s.stop());

  test("with an API key: Bearer and x-api-key are accepted, anything else is a 401 in the surface's shape", async () => {
    const body = { model: "k", max_tokens: 5, messages: [{ role: "user", content: "x" }] };
    const none = await post(`${s.url}/v1/chat/completions`, { model: "k", messages: body.messages });
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ error: { type: "authentication_error", code: "missing_api_key" } });
    const wrong = await post(`${s.url}/v1/messages`, body, { "x-api-key": "guess" });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ type: "error", error: { type: "authentication_error", message: "invalid API key" } });
    expect((await post(`${s.url}/v1/messages`, body, { "x-api-key": "sekret" })).status).toBe(200);
    expect((await post(`${s.url}/v1/messages`, body, { authorization: "Bearer sekret" })).status).toBe(200);
    expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);

    const openai = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: "sekret", maxRetries: 0 });
    expect((await openai.responses.create({ model: "k", input: "x" })).status).toBe("completed");
    // Claude Code with ANTHROPIC_AUTH_TOKEN sends a Bearer token.
    const anthropic = new Anthropic({ baseURL: s.url, authToken: "sekret", apiKey: null, maxRetries: 0 });
    expect((await anthropic.messages.create(body as Anthropic.MessageCreateParamsNonStreaming)).type).toBe("message");
  });

  test("HEAD /, /health and /metrics answer without a key", async () => {
    const head = await fetch(`${s.url}/`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(await (await fetch(`${s.url}/health`)).json()).toEqual({ status: "ok", models: ["k"] });
    expect((await fetch(`${s.url}/metrics`)).status).toBe(200);
  });
});

test("binding beyond loopback without a key warns; with a key or on loopback it does not", async () => {
  const warn = spyOn(log, "warn").mockImplementation((() => {}) as unknown as typeof log.warn);
  try {
    for (const [host, apiKey, warns] of [
      ["0.0.0.0", undefined, true],
      ["0.0.0.0", "k", false],
      ["127.0.0.1", undefined, false],
    ] as const) {
      warn.mockClear();
      const s = createServer({ host, port: 0, apiKey, models: [new ScriptedModel()] });
      await s.stop();
      expect(warn.mock.calls.length).toBe(warns ? 1 : 0);
      if (warns) expect(String(warn.mock.calls[0]![0])).toContain("without an API key");
    }
  } finally {
    warn.mockRestore();
  }
});
