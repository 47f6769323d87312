// The built-in page as HTTP sees it: GET / is one self-contained HTML document whose Content-Security-Policy
// admits its own script only; GET /status reports each model's runtime and engine figures, the server's counters
// (the ones /metrics renders) and the last generations of every API surface with their outcomes (finished, cut
// at max tokens, failed, cancelled by a client that went away).
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import type { ServerStatus } from "../../src/server/status.ts";
import { SCRIPTED_RUNTIME, ScriptedModel, say } from "../helpers/scripted-model.ts";
import { post, readSse, scrapeMetrics, startServer } from "../helpers/server.ts";

const model = new ScriptedModel({ id: "m" });
const server = startServer({ models: [model] });
afterAll(() => server.stop());

beforeEach(() => {
  model.script = () => say({ reasoning: "Hmm.", content: "Hello there, friend." });
  model.tokenDelayMs = 0;
  model.overloadedFor = undefined;
  model.cachedPromptTokens = 0;
});

const status = async (url = server.url) => (await (await fetch(`${url}/status`)).json()) as ServerStatus;

describe("GET /", () => {
  test("serves the page: one HTML document, its script allowed by hash and nothing from elsewhere", async () => {
    const res = await fetch(`${server.url}/`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const html = await res.text();
    expect(html.startsWith("<!doctype html>")).toBe(true);
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.map((m) => m[1])).toEqual([' type="module"']); // inline, no src
    expect(html).not.toMatch(/<link[^>]+rel="stylesheet"/);
    expect(html).toContain('id="messages"');
    const hash = new Bun.CryptoHasher("sha256").update(scripts[0]![2]!).digest("base64");
    const csp = res.headers.get("content-security-policy")!;
    expect(csp).toContain(`script-src 'sha256-${hash}'`);
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("connect-src 'self'");
  });

  test("HEAD / still answers for liveness, and /health is unchanged", async () => {
    expect((await fetch(`${server.url}/`, { method: "HEAD" })).status).toBe(200);
    expect(await (await fetch(`${server.url}/health`)).json()).toEqual({ status: "ok", models: ["m"] });
  });
});

describe("GET /status", () => {
  test("the model's runtime and memory plan, the engine's figures, and whether a key is needed", async () => {
    const s = await status();
    expect(s.keyRequired).toBe(false);
    expect(s.uptimeSeconds).toBeGreaterThanOrEqual(0);
    expect(s.models.map((m) => m.id)).toEqual(["m"]);
    const m = s.models[0]!;
    expect(m).toMatchObject({ contextLength: 32768, maxOutputTokens: 4096, vision: false, runtime: SCRIPTED_RUNTIME, generations: 0 });
    expect(m.engine).toEqual(model.stats());
    expect(m.throughput).toMatchObject({ intervalSeconds: 2, capacity: 150 });

    const keyed = startServer({ models: [new ScriptedModel({ id: "k" })], apiKey: "sekret" });
    try {
      expect((await status(keyed.url)).keyRequired).toBe(true); // readable without the key, as /metrics is
    } finally {
      await keyed.stop();
    }
  });

  test("each generation lands in the last requests, newest first, with its surface, tokens and outcome", async () => {
    const before = (await status()).recent.length;
    model.cachedPromptTokens = 2;
    // finished, streamed (chat) and not (messages)
    await readSse(await post(`${server.url}/v1/chat/completions`, { model: "m", messages: [{ role: "user", content: "hi" }], stream: true }));
    await (await post(`${server.url}/v1/messages`, { model: "m", max_tokens: 3, messages: [{ role: "user", content: "hi" }] })).json();
    // refused by the engine
    model.overloadedFor = 5;
    expect((await post(`${server.url}/v1/responses`, { model: "m", input: "hi" })).status).toBe(503);
    model.overloadedFor = undefined;
    // the client goes away mid-stream
    model.tokenDelayMs = 20;
    const controller = new AbortController();
    const res = await post(`${server.url}/v1/chat/completions`, { model: "m", messages: [{ role: "user", content: "hi" }], stream: true }, {}, controller.signal);
    await readSse(res, (e) => /"content":"[^"]/.test(e.data ?? ""));
    controller.abort();

    const s = await until(async () => {
      const st = await status();
      return st.recent.length === before + 4 && st;
    });
    const [gone, refused, capped, finished] = s.recent;
    expect(finished).toMatchObject({ surface: "chat", model: "m", outcome: "stop", cachedPromptTokens: 2, completionTokens: 6 }); // 1 reasoning piece, 5 of content
    expect(finished!.promptTokens).toBeGreaterThan(2);
    expect(finished!.ttftMs).toBeGreaterThanOrEqual(0);
    expect(finished!.durationMs).toBeGreaterThanOrEqual(finished!.ttftMs!);
    expect(capped).toMatchObject({ surface: "messages", outcome: "length", completionTokens: 3 });
    expect(refused).toMatchObject({ surface: "responses", outcome: "error", completionTokens: 0, ttftMs: null });
    expect(refused!.error).toContain("capacity");
    expect(gone).toMatchObject({ surface: "chat", outcome: "cancelled" });
    expect(gone!.completionTokens).toBeLessThan(6);
    expect(s.recent.every((g, i) => i === 0 || g.at <= s.recent[i - 1]!.at)).toBe(true);

    // The counters are the ones /metrics renders.
    const m = s.models[0]!;
    const metrics = await scrapeMetrics(server.url);
    expect(m.tokens.promptTokens).toBe(metrics.get('splash_prompt_tokens_total{model="m"}')!);
    expect(m.tokens.cachedPromptTokens).toBe(metrics.get('splash_cached_prompt_tokens_total{model="m"}')!);
    expect(m.tokens.completionTokens).toBe(metrics.get('splash_completion_tokens_total{model="m"}')!);
    expect(metrics.get('splash_generated_tokens_total{model="m"}')).toBe(m.engine.generatedTokens);
    expect(metrics.get('splash_prompt_tokens_computed_total{model="m"}')).toBe(m.engine.promptTokensComputed);
    expect(m.engine.generatedTokens).toBeGreaterThan(0);
    for (const { surface, status: code, count } of s.requests) expect(metrics.get(`splash_requests_total{surface="${surface}",status="${code}"}`)).toBe(count);
    expect(s.requests).toContainEqual({ surface: "responses", status: 503, count: 1 });
    expect(m.generations).toBe(0);
  });

  test("tokens per second: the engine's counts sampled every 2 s while the server runs", async () => {
    model.tokenDelayMs = 5;
    model.script = () => say({ content: "x".repeat(400) }); // 100 pieces
    await readSse(await post(`${server.url}/v1/chat/completions`, { model: "m", messages: [{ role: "user", content: "hi" }], stream: true }));
    const total = model.stats().generatedTokens;
    // Rates × 2 s add up to every token made since the server started (the first sample saw none), once a sample
    // has been taken after the last one (within the timer's jitter).
    const s = await until(async () => {
      const st = await status();
      const { generated } = st.models[0]!.throughput;
      return Math.abs(generated.reduce((a, b) => a + b, 0) * 2 - total) < 0.02 * total && st;
    }, 5000);
    const { generated, prompt } = s.models[0]!.throughput;
    expect(generated.length).toBe(prompt.length);
    expect(Math.max(...generated)).toBeGreaterThan(0);
    expect(prompt.reduce((a, b) => a + b, 0) * 2).toBeCloseTo(model.stats().promptTokensComputed, -1);
  }, 15_000);
});

async function until<T>(probe: () => Promise<T | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error("timed out");
    await Bun.sleep(20);
  }
}
