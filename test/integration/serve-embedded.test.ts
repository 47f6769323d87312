// The whole stack, as a user starts it: `splash serve` with the embedded model, talked to by the official SDKs.
// The embedded model is tiny, so answers are judged by shape (non-empty text, consistent usage, deterministic under
// greedy sampling), not by quality.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { scrapeMetrics } from "../helpers/server.ts";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";

let server: ServeProcess;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  server = await splashServe();
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused" });
  anthropic = new Anthropic({ baseURL: server.url, apiKey: "unused" });
}, 90_000);

afterAll(async () => {
  await server?.stop();
});

const question = "Write a Python function that returns the n-th Fibonacci number";
// Long enough to fill whole prefix-cache blocks (64 tokens each); only whole blocks are shared.
const system = "You are a careful Python programmer. ".repeat(24);

describe("splash serve (embedded model)", () => {
  test("serves the embedded model under its id", async () => {
    expect(server.model).toBe("splash-tiny");
    const models = await openai.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["splash-tiny"]);
  });

  test("chat completion: greedy answers are deterministic and usage adds up", async () => {
    const ask = () =>
      openai.chat.completions.create({
        model: "splash-tiny",
        messages: [
          { role: "system", content: system },
          { role: "user", content: question },
        ],
        max_tokens: 40,
        temperature: 0,
      });
    const [a, b] = [await ask(), await ask()];
    const text = a.choices[0]!.message.content ?? "";
    expect(text.length).toBeGreaterThan(0);
    expect(b.choices[0]!.message.content).toBe(text);
    expect(a.usage!.completion_tokens).toBeGreaterThan(0);
    expect(a.usage!.completion_tokens).toBeLessThanOrEqual(40);
    expect(a.usage!.total_tokens).toBe(a.usage!.prompt_tokens + a.usage!.completion_tokens);
    // The second identical prompt is served from the prefix cache.
    expect(b.usage!.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThan(0);
  }, 60_000);

  test("streamed chat equals the non-streamed answer", async () => {
    const body = { model: "splash-tiny", messages: [{ role: "user" as const, content: question }], max_tokens: 40, temperature: 0 };
    const whole = await openai.chat.completions.create(body);
    const stream = openai.chat.completions.stream({ ...body, stream_options: { include_usage: true } });
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(whole.choices[0]!.message.content);
  }, 60_000);

  test("Anthropic messages stream with usage", async () => {
    const msg = await anthropic.messages.stream({ model: "splash-tiny", max_tokens: 30, temperature: 0, messages: [{ role: "user", content: question }] }).finalMessage();
    expect(msg.content.length).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBeLessThanOrEqual(30);
  }, 60_000);

  test("Responses API stream", async () => {
    const r = await openai.responses.stream({ model: "splash-tiny", input: question, max_output_tokens: 30, temperature: 0 }).finalResponse();
    expect(r.status === "completed" || r.status === "incomplete").toBe(true);
    expect(r.usage!.output_tokens).toBeGreaterThan(0);
  }, 60_000);

  test("a client that disconnects mid-stream frees its sequence", async () => {
    const ctl = new AbortController();
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "splash-tiny", messages: [{ role: "user", content: question }], max_tokens: 4000, temperature: 1, stream: true }),
      signal: ctl.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    ctl.abort();
    let running = 1;
    for (let i = 0; i < 50 && running > 0; i++) {
      await Bun.sleep(100);
      const m = await scrapeMetrics(server.url);
      running = m.get('splash_running_sequences{model="splash-tiny"}') ?? -1;
    }
    expect(running).toBe(0);
  }, 60_000);
});
