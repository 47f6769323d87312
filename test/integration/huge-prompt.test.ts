// A prompt far too long for the context is refused from its size, before it is tokenized, on every surface: the
// server stays responsive meanwhile (/health answers, a stream beside it goes on). Before, a 50 MB prompt was
// rendered and tokenized whole (17.5M tokens) before the context check, and /health waited 14-25 s.
import { afterAll, beforeAll, expect, spyOn, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createServer, type RunningServer } from "../../src/server/server.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { post, readSse } from "../helpers/server.ts";

const M = "splash-tiny";
const huge = "word ".repeat(1_200_000); // 6 MB; the context at this KV budget is 26048 tokens of at most 48 bytes each

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

const surfaces = [
  ["/v1/chat/completions", { model: M, max_tokens: 8, messages: [{ role: "user", content: huge }] }, /maximum context length is \d+ tokens, but the prompt is at least \d+ tokens/],
  ["/v1/responses", { model: M, max_output_tokens: 8, input: huge, stream: true }, /maximum context length is \d+ tokens, but the prompt is at least \d+ tokens/],
  ["/v1/messages", { model: M, max_tokens: 8, messages: [{ role: "user", content: huge }] }, /^prompt is too long: \d+ tokens > \d+ maximum$/],
  ["/v1/messages/count_tokens", { model: M, messages: [{ role: "user", content: huge }] }, /^prompt is too long: \d+ tokens > \d+ maximum$/],
] as const;

test("a 6 MB prompt on every surface: refused untokenized while /health and a running stream are served", async () => {
  const encoded: number[] = []; // the length of every text the tokenizer is given
  const original = Tokenizer.prototype.encodeTemplate;
  const spy = spyOn(Tokenizer.prototype, "encodeTemplate").mockImplementation(function (this: Tokenizer, text: string, limit?: number) {
    encoded.push(text.length);
    return original.call(this, text, limit);
  });
  try {
    // a stream that runs through all of it
    const beside = post(`${server.url}/v1/chat/completions`, { model: M, max_tokens: 200, temperature: 0, reasoning_effort: "none", messages: [{ role: "user", content: "Write a Python function that reverses a string." }], stream: true }).then((r) => readSse(r));
    let polling = true;
    const latencies: number[] = [];
    const health = (async () => {
      while (polling) {
        const t0 = performance.now();
        expect((await fetch(`${server.url}/health`)).status).toBe(200);
        latencies.push(performance.now() - t0);
        await Bun.sleep(10);
      }
    })();
    for (const [path, body, message] of surfaces) {
      const res = await post(server.url + path, body);
      const json = (await res.json()) as { error: { message: string; code?: string } };
      expect({ path, status: res.status, message: json.error.message }).toEqual({ path, status: 400, message: expect.stringMatching(message) });
      if (!path.startsWith("/v1/messages")) expect(json.error.code).toBe("context_length_exceeded");
    }
    polling = false;
    await health;
    const events = await beside;
    expect(events.some((e) => e.data === "[DONE]")).toBe(true);
    expect(events.some((e) => e.data?.includes('"error"'))).toBe(false);
    expect(Math.max(...encoded)).toBeLessThan(10_000); // only the stream's own prompt was tokenized
    expect(latencies.length).toBeGreaterThan(0);
    expect(Math.max(...latencies)).toBeLessThan(2000);
  } finally {
    spy.mockRestore();
  }
}, 60_000);
