// Shutting down without cutting answers off: draining lets running requests finish (new connections are refused);
// past the drain time every stream ends with its surface's error event and every non-streaming request gets a 503 in
// its shape. In-process with a scripted model on every surface, then `splash serve` itself on SIGTERM and SIGINT,
// and `splash stop` on a launcher's server.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createApp } from "../../src/server/app.ts";
import { RequestLog } from "../../src/server/request-log.ts";
import { Shutdown } from "../../src/server/shutdown.ts";
import type { ServerState } from "../../src/launch/state.ts";
import { pidAlive } from "../../src/launch/process.ts";
import { splash } from "../helpers/cli.ts";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { post, readSse, startServer, type SseEvent } from "../helpers/server.ts";
import { splashServe } from "../helpers/splash-serve.ts";

const user = [{ role: "user", content: "hi" }];
const surfaces = {
  chat: { path: "/v1/chat/completions", body: { model: "m", messages: user }, shape: "openai" },
  responses: { path: "/v1/responses", body: { model: "m", input: "hi" }, shape: "openai" },
  messages: { path: "/v1/messages", body: { model: "m", max_tokens: 4096, messages: user }, shape: "anthropic" },
} as const;
type Surface = keyof typeof surfaces;
const names = Object.keys(surfaces) as Surface[];

async function waitFor(condition: () => boolean, ms: number): Promise<void> {
  const end = performance.now() + ms;
  while (!condition()) {
    if (performance.now() > end) throw new Error(`condition not met within ${ms} ms`);
    await Bun.sleep(5);
  }
}

type Outcome = { surface: Surface; stream: boolean; status: number; json?: unknown; events?: SseEvent[] };

// One request per surface, streamed and not, all running at once.
function sendAll(url: string): Promise<Outcome>[] {
  return names.flatMap((surface) =>
    [false, true].map(async (stream): Promise<Outcome> => {
      const res = await post(url + surfaces[surface].path, { ...surfaces[surface].body, stream });
      if (stream && res.status === 200) return { surface, stream, status: res.status, events: await readSse(res) };
      return { surface, stream, status: res.status, json: await res.json() };
    }),
  );
}

const ANSWER = "Forty characters of a scripted answer..";

// The text of a finished answer, from its JSON or its events.
function answerText(o: Outcome): string {
  if (o.events) {
    return o.events
      .map((e) => (e.data && e.data !== "[DONE]" ? (JSON.parse(e.data) as Record<string, unknown>) : {}))
      .map((d) => {
        const delta = d.delta as { text?: string } | string | undefined;
        if (o.surface === "messages") return typeof delta === "object" ? (delta.text ?? "") : "";
        if (o.surface === "responses") return d.type === "response.output_text.delta" ? String(d.delta) : "";
        return ((d.choices as { delta?: { content?: string } }[] | undefined)?.[0]?.delta?.content ?? "") as string;
      })
      .join("");
  }
  const j = o.json as Record<string, unknown>;
  if (o.surface === "messages") return (j.content as { text: string }[])[0]!.text;
  if (o.surface === "responses") return (j.output as { content: { text: string }[] }[]).map((item) => item.content[0]!.text).join("");
  return (j.choices as { message: { content: string } }[])[0]!.message.content;
}

describe("drain (in-process, every surface)", () => {
  const model = new ScriptedModel({ id: "m" });

  test("running requests finish their answers; new connections are refused meanwhile", async () => {
    const server = startServer({ models: [model] });
    model.tokenDelayMs = 25;
    model.script = () => say({ content: ANSWER }); // 10 pieces: 250 ms
    const pending = sendAll(server.url);
    await waitFor(() => model.running === 6, 2000);
    const drained = server.drain(10_000);
    await expect(fetch(`${server.url}/health`)).rejects.toThrow();
    const outcomes = await Promise.all(pending);
    for (const o of outcomes) {
      expect({ ...o, json: undefined, events: undefined, status: o.status }).toMatchObject({ status: 200 });
      expect(answerText(o)).toBe(ANSWER);
    }
    expect(await drained).toEqual({ ended: 0 });
  });

  test("past the drain time: streams end with the surface's error event, the others get a 503 in their shape", async () => {
    const server = startServer({ models: [model] });
    model.tokenDelayMs = 25;
    model.script = () => say({ content: "x".repeat(4000) }); // 1000 pieces: 25 s
    const pending = sendAll(server.url);
    await waitFor(() => model.running === 6, 2000);
    const t0 = performance.now();
    expect(await server.drain(300)).toEqual({ ended: 6 });
    expect(performance.now() - t0).toBeLessThan(2000);
    expect(model.running).toBe(0);
    for (const o of await Promise.all(pending)) {
      if (!o.stream) {
        expect(o.status).toBe(503);
        if (o.surface === "messages") {
          expect(o.json).toEqual({ type: "error", error: { type: "overloaded_error", message: "the server is shutting down; retry the request when it is back" } });
        } else {
          expect(o.json).toEqual({ error: { type: "server_error", code: "server_shutting_down", param: null, message: "the server is shutting down; retry the request when it is back" } });
        }
        continue;
      }
      expect(o.status).toBe(200);
      expect(answerText(o).length).toBeGreaterThan(0); // it had started
      const last = o.events!.at(-1)!;
      const data = JSON.parse(last.data!) as Record<string, unknown>;
      if (o.surface === "messages") expect({ event: last.event, data }).toEqual({ event: "error", data: { type: "error", error: { type: "overloaded_error", message: "the server is shutting down; retry the request when it is back" } } });
      else if (o.surface === "chat") expect(data).toMatchObject({ error: { type: "server_error", code: "server_shutting_down" } });
      else expect({ event: last.event, data }).toMatchObject({ event: "response.failed", data: { response: { status: "failed", error: { code: "server_shutting_down" } } } });
    }
  });

  test("a request that still arrives on an open connection while draining gets a 503 and Connection: close", async () => {
    const shutdown = new Shutdown();
    const app = createApp({ models: [model] }, new RequestLog(undefined), shutdown);
    shutdown.drain();
    for (const surface of names) {
      const res = await app.handle(new Request(`http://localhost${surfaces[surface].path}`, { method: "POST", body: JSON.stringify(surfaces[surface].body) }));
      expect(res.status).toBe(503);
      expect(res.headers.get("connection")).toBe("close");
      const json = (await res.json()) as { error: { type: string } };
      expect(json.error.type).toBe(surface === "messages" ? "overloaded_error" : "server_error");
    }
  });
});

// splash serve with the embedded model: a JSON array of exactly `n` integers is a generation whose length is known
// (≈3 tokens per item), however the tiny model would otherwise end.
const numbers = (n: number) => ({
  model: "splash-tiny",
  messages: [{ role: "user", content: "Numbers." }],
  max_tokens: 20_000,
  temperature: 0,
  stream: true,
  response_format: { type: "json_schema", json_schema: { name: "numbers", schema: { type: "array", items: { type: "integer" }, minItems: n, maxItems: n } } },
});
const chunks = (events: SseEvent[]) => events.filter((e) => e.data && e.data !== "[DONE]").map((e) => JSON.parse(e.data!) as { choices?: { delta: { content?: string }; finish_reason: string | null }[]; error?: { code: string } });
const content = (events: SseEvent[]) => chunks(events).map((c) => c.choices?.[0]?.delta.content ?? "").join("");
const startedContent = (e: SseEvent) => /"content":"[^"]/.test(e.data ?? "");

describe("splash serve on SIGTERM and SIGINT", () => {
  test("SIGTERM: the running stream finishes its answer, then the server exits 0", async () => {
    const server = await splashServe(["--draft", "none"]);
    const res = await post(`${server.url}/v1/chat/completions`, numbers(40));
    expect(res.status).toBe(200);
    let signalled = false;
    const events = await readSse(res, (e) => {
      if (!signalled && startedContent(e)) {
        signalled = true;
        server.proc.kill("SIGTERM");
      }
      return false;
    });
    expect(signalled).toBe(true);
    expect(events.at(-1)!.data).toBe("[DONE]");
    expect(chunks(events).at(-1)?.choices?.[0]?.finish_reason).toBe("stop");
    expect(JSON.parse(content(events))).toHaveLength(40);
    expect(await server.proc.exited).toBe(0);
    expect(server.log()).toContain("stopping (SIGTERM): 1 running request gets up to 10 s to finish");
  }, 60_000);

  test("SIGINT with --drain-timeout 0.2: a stream still running then ends with the error event; exit 0", async () => {
    const server = await splashServe(["--draft", "none", "--drain-timeout", "0.2"]);
    const res = await post(`${server.url}/v1/chat/completions`, numbers(256)); // ≈770 tokens: seconds
    expect(res.status).toBe(200);
    const events = await readSse(res, (e) => {
      if (startedContent(e)) server.proc.kill("SIGINT");
      return false;
    });
    expect(chunks(events).at(-1)).toMatchObject({ error: { code: "server_shutting_down", type: "server_error" } });
    expect(content(events).length).toBeGreaterThan(0);
    expect(await server.proc.exited).toBe(0);
    expect(server.log()).toContain("ended 1 request that had not finished");
  }, 60_000);
});

describe("splash stop", () => {
  const state = mkdtempSync(join(tmpdir(), "splash-stop-"));
  let pid = 0;
  afterAll(() => {
    if (pid && pidAlive(pid)) process.kill(pid, "SIGKILL");
  });

  test("drains the launcher's server: a running answer completes, and the server is stopped, not killed", async () => {
    const server = await splashServe(["--draft", "none", "--api-key", "sk-stop"]);
    pid = server.proc.pid;
    const port = Number(new URL(server.url).port);
    const recorded: ServerState = { key: "splash-tiny", model: "splash-tiny", pid, port, apiKey: "sk-stop", version: "test", startedAt: new Date().toISOString(), log: "/dev/null" };
    mkdirSync(join(state, "servers"), { recursive: true });
    writeFileSync(join(state, "servers", "splash-tiny.json"), JSON.stringify(recorded));
    const res = await post(`${server.url}/v1/chat/completions`, numbers(40), { authorization: "Bearer sk-stop" });
    expect(res.status).toBe(200);
    let stop: Promise<{ code: number; stderr: string }> | undefined;
    const events = await readSse(res, (e) => {
      if (!stop && startedContent(e)) stop = splash(["stop"], { env: { SPLASH_STATE_DIR: state } });
      return false;
    });
    expect(JSON.parse(content(events))).toHaveLength(40);
    const r = await stop!;
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`stopped the splash-tiny server (pid ${pid})`);
    expect(await server.proc.exited).toBe(0);
  }, 60_000);
});
