// The model computes on its own thread (src/native/call-thread.ts) while the JavaScript thread serves HTTP: /health
// answers during a long prefill step instead of after it; a request cancelled while its step computes ends at the
// step boundary, keeping the prefix-cache semantics (its computed blocks stay cached) and harming no other request,
// with grammar and speculative decoding in play. splash-tiny served in this process, through the HTTP API.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadModel, type LoadedModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { post, readSse, scrapeMetrics } from "../helpers/server.ts";

let loaded: LoadedModel;
let server: RunningServer;

beforeAll(async () => {
  loaded = await loadModel(resolveModel("splash-tiny"));
  server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat] });
  // the first call starts the model's thread
  await (await post(`${server.url}/v1/chat/completions`, { model: "splash-tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2 })).json();
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await loaded?.close();
});

// About `words` tokens of text no other test sends (the prefix cache would serve it).
function longText(words: number, seed: number): string {
  const vocabulary = ["river", "stone", "maple", "copper", "lantern", "orbit", "velvet", "harbor", "quartz", "meadow", "signal", "thunder"];
  let s = seed;
  return Array.from({ length: words }, () => vocabulary[(s = (s * 1103515245 + 12345) % 2 ** 31) % vocabulary.length]).join(" ");
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!;

describe("the engine off the HTTP thread", () => {
  test("/health answers while a long prompt prefills, not after each step", async () => {
    const t0 = performance.now();
    const res = await post(`${server.url}/v1/chat/completions`, {
      model: "splash-tiny",
      messages: [{ role: "user", content: longText(3000, 1) }],
      max_tokens: 1,
      stream: true,
      stream_options: { include_usage: true },
    });
    let done = false;
    const events = readSse(res).then((e) => ((done = true), e));
    const latencies: number[] = [];
    while (!done) {
      const t = performance.now();
      expect((await fetch(`${server.url}/health`)).status).toBe(200);
      latencies.push(performance.now() - t);
      await Bun.sleep(5);
    }
    const ms = performance.now() - t0;
    const usage = (await events).flatMap((e) => (e.data && e.data !== "[DONE]" ? [JSON.parse(e.data) as { usage?: { prompt_tokens: number } }] : [])).find((c) => c.usage)?.usage;
    // the prompt runs in steps of at most 512 tokens; each took about ms / steps
    const steps = Math.ceil(usage!.prompt_tokens / 512);
    expect(steps).toBeGreaterThanOrEqual(4);
    expect(latencies.length).toBeGreaterThanOrEqual(2 * steps);
    // before, a poll waited for the step under way: its latency spread over [0, a step]
    expect(quantile(latencies, 0.75)).toBeLessThan(ms / steps / 4);
  }, 120_000);

  test("cancelled while its step computes: the request ends at the step boundary, its computed blocks stay cached, the stream beside it completes", async () => {
    const schema = { type: "object", properties: { answer: { type: "string", maxLength: 40 } }, required: ["answer"] };
    // about 6600 tokens: past the engine's first state snapshot (at 4096 tokens; a hybrid model resumes only where
    // its recurrent state was kept)
    const messages = [{ role: "user", content: longText(2500, 2) }];
    const body = (stream: boolean) => ({
      model: "splash-tiny",
      messages,
      max_tokens: 60,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
      response_format: { type: "json_schema", json_schema: { name: "a", schema } },
    });
    const ctl = new AbortController();
    const res = await post(`${server.url}/v1/chat/completions`, body(true), {}, ctl.signal);
    expect(res.status).toBe(200);
    const reading = readSse(res).catch(() => []); // read, as a client does: an unread response may be collected and closed
    const engine = loaded.engine;
    const computed0 = engine.stats().promptTokensComputed;
    const computed = () => engine.stats().promptTokensComputed - computed0;
    const deadline = performance.now() + 90_000;
    while (computed() < 4096 + 512 && performance.now() < deadline) await Bun.sleep(2);
    // a stream beside it (speculative decoding on splash-tiny), decoding while the prompt goes on
    let besideDone = false;
    let besideTokens = 0;
    const beside = post(`${server.url}/v1/chat/completions`, { model: "splash-tiny", messages: [{ role: "user", content: "Count to fifty." }], max_tokens: 400, temperature: 1, seed: 3, stream: true })
      .then((r) =>
        readSse(r, (e) => {
          if (/"content":"[^"]/.test(e.data ?? "")) besideTokens++;
          return false;
        }),
      )
      .finally(() => (besideDone = true));
    while (besideTokens < 2 && !besideDone && performance.now() < deadline) await Bun.sleep(2);
    // then the long request's client goes away in the middle of a step
    ctl.abort();
    await reading;
    // it leaves at the end of the step under way; the stream beside it, if still running, stays
    let running = -1;
    for (let i = 0; i < 300 && running !== (besideDone ? 0 : 1); i++) {
      await Bun.sleep(20);
      running = (await scrapeMetrics(server.url)).get('splash_running_sequences{model="splash-tiny"}') ?? -1;
    }
    expect(running).toBe(besideDone ? 0 : 1);
    const besideEvents = await beside;
    expect(besideEvents.at(-1)!.data).toBe("[DONE]");
    expect(besideEvents.filter((e) => /"content":"[^"]/.test(e.data ?? "")).length).toBeGreaterThan(10);
    // the same prompt again: what the cancelled request computed is served from the prefix cache, and the answer
    // is the schema's
    const again = (await (await post(`${server.url}/v1/chat/completions`, body(false))).json()) as {
      choices: { message: { content: string } }[];
      usage: { prompt_tokens_details?: { cached_tokens: number } };
    };
    expect(again.usage.prompt_tokens_details?.cached_tokens ?? 0).toBeGreaterThanOrEqual(4096);
    expect(typeof (JSON.parse(again.choices[0]!.message.content) as { answer: unknown }).answer).toBe("string");
  }, 120_000);
});
