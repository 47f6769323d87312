// The request log: one line per request on stderr when its answer is complete (a stream: when it ends, however it
// ends), with what was asked and what came back; JSON or text; none with --quiet. In-process with a scripted model
// (exact figures), then `splash serve` itself.
import { afterAll, beforeEach, describe, expect, spyOn, test } from "bun:test";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { post, readSse, startServer } from "../helpers/server.ts";
import { splashServe } from "../helpers/splash-serve.ts";

type Line = Record<string, unknown>;

describe("request log lines (json)", () => {
  const model = new ScriptedModel({ id: "m" });
  const server = startServer({ models: [model], apiKey: "k", logFormat: "json" });
  const lines: string[] = [];
  // The request log's lines; the logger's own (an internal error's stack) go to stderr through console.error too.
  const spy = spyOn(console, "error").mockImplementation((line: unknown) => void (String(line).startsWith("{") && lines.push(String(line))));
  afterAll(async () => {
    await server.stop();
    spy.mockRestore();
  });
  beforeEach(() => {
    lines.length = 0;
    model.script = () => say({ reasoning: "hmm", content: "Twelve chars" }); // 1 + 3 tokens
    model.prefillMs = 30;
    model.tokenDelayMs = 0;
    model.cachedPromptTokens = 3;
  });

  const auth = { authorization: "Bearer k", "user-agent": "claude-cli/2.1.197 (external, cli)" };
  // The line of the one request sent since beforeEach, once written.
  async function line(): Promise<Line> {
    for (let i = 0; i < 200 && lines.length === 0; i++) await Bun.sleep(5);
    expect(lines).toHaveLength(1);
    return JSON.parse(lines[0]!) as Line;
  }

  test("a non-streaming request: status, model, tokens, TTFT, total time, finish reason, client and agent", async () => {
    const res = await post(`${server.url}/v1/chat/completions`, { model: "m", messages: [{ role: "user", content: "hi" }] }, auth);
    const usage = ((await res.json()) as { usage: { prompt_tokens: number } }).usage;
    const l = await line();
    expect(l).toMatchObject({
      method: "POST",
      path: "/v1/chat/completions",
      status: 200,
      model: "m",
      prompt_tokens: usage.prompt_tokens,
      cached_tokens: 3,
      completion_tokens: 4,
      finish_reason: "stop",
      client: "127.0.0.1",
      agent: "claude-cli/2.1.197 (external, cli)",
    });
    expect(l.ttft_ms as number).toBeGreaterThanOrEqual(25);
    expect(l.total_ms as number).toBeGreaterThanOrEqual(l.ttft_ms as number);
    expect(Date.parse(l.time as string)).toBeGreaterThan(Date.now() - 60_000);
    expect(l.error).toBeUndefined();
  });

  test("a stream: written when it ends, with its usage; a stream the client leaves: finish 'cancelled'", async () => {
    model.tokenDelayMs = 20;
    const res = await post(`${server.url}/v1/messages?beta=true`, { model: "m", max_tokens: 100, stream: true, messages: [{ role: "user", content: "hi" }] }, auth);
    expect(lines).toHaveLength(0); // headers are out, the answer is not
    await readSse(res);
    expect(await line()).toMatchObject({ path: "/v1/messages", status: 200, model: "m", completion_tokens: 4, finish_reason: "stop" });

    lines.length = 0;
    model.script = () => say({ content: "y".repeat(400) });
    const left = await post(`${server.url}/v1/responses`, { model: "m", input: "hi", stream: true }, auth);
    await readSse(left, (e) => /output_text\.delta/.test(e.data ?? ""));
    expect(await line()).toMatchObject({ path: "/v1/responses", status: 200, model: "m", finish_reason: "cancelled" });
  });

  test("errors: the status and the message the client got", async () => {
    await post(`${server.url}/v1/messages`, { model: "nope", max_tokens: 1, messages: [{ role: "user", content: "x" }] }, auth);
    expect(await line()).toMatchObject({ path: "/v1/messages", status: 404, error: "model 'nope' not found; this server serves: m" });
    lines.length = 0;
    await post(`${server.url}/v1/chat/completions`, { model: "m", messages: [] });
    expect(await line()).toMatchObject({ status: 401, error: "missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`" });
    lines.length = 0;
    model.script = () => [{ type: "content", text: "par" }, { type: "fail", error: new Error("the engine broke") }];
    model.prefillMs = 0;
    const res = await post(`${server.url}/v1/chat/completions`, { model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }, auth);
    await readSse(res);
    expect(await line()).toMatchObject({ status: 200, model: "m", error: "internal error: the engine broke" });
  });

  test("every request gets its line, the plain endpoints too", async () => {
    await fetch(`${server.url}/health`);
    expect(await line()).toMatchObject({ method: "GET", path: "/health", status: 200 });
  });
});

describe("splash serve", () => {
  test("text lines by default; --log-format json; --quiet: none, and no informational lines", async () => {
    const body = { model: "splash-tiny", max_tokens: 8, temperature: 0, messages: [{ role: "user", content: "Hi" }] };
    const run = async (args: string[]) => {
      const server = await splashServe(["--draft", "none", ...args]);
      const res = await post(`${server.url}/v1/messages`, body, { "user-agent": "test-agent/1.0" });
      expect(res.status).toBe(200);
      await server.stop();
      return server.log();
    };
    const text = await run([]);
    expect(text).toMatch(/^\d{4}-\d\d-\d\dT[\d:.]+Z POST \/v1\/messages 200 model=splash-tiny prompt=\d+ cached=0 completion=\d+ ttft=\d+ms total=\d+ms finish=\w+ client=127\.0\.0\.1 agent=test-agent\/1\.0$/m);
    const json = await run(["--log-format", "json"]);
    const line = json.split("\n").find((l) => l.startsWith("{"));
    expect(JSON.parse(line!)).toMatchObject({ method: "POST", path: "/v1/messages", status: 200, model: "splash-tiny", cached_tokens: 0, client: "127.0.0.1", agent: "test-agent/1.0" });
    const quiet = await run(["--quiet"]);
    expect(quiet).not.toContain("/v1/messages");
    expect(quiet).not.toContain("serving splash-tiny");
  }, 60_000);
});
