// A real Splash server on a free loopback port, for tests that talk HTTP (SDK clients, disconnects).
import { createServer, type RunningServer, type ServerOptions } from "../../src/server/server.ts";
import { ScriptedModel } from "./scripted-model.ts";

export type TestServer = RunningServer & { model: ScriptedModel };

export function startServer(options: Partial<ServerOptions> = {}): TestServer {
  const model = new ScriptedModel({ id: "splash-test", vision: true });
  const server = createServer({ host: "127.0.0.1", port: 0, models: [model], pingIntervalMs: 50, ...options });
  return { ...server, model: (options.models?.[0] as ScriptedModel | undefined) ?? model };
}

// GET /metrics as { "name{labels}": value }.
export async function scrapeMetrics(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

// The error a promise (or an SDK's thenable APIPromise) rejects with; fails the test if it resolves.
export async function rejection(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new Error("expected the request to fail, but it succeeded");
}

export type SseEvent = { event?: string; data?: string; comment?: string; at: number };

// Reads server-sent events from a response as they arrive (with arrival times), until the stream ends or `stop`
// returns true for an event; then cancels the body, as a client that goes away would.
export async function readSse(response: Response, stop: (e: SseEvent, all: SseEvent[]) => boolean | Promise<boolean> = () => false): Promise<SseEvent[]> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: SseEvent[] = [];
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return events;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const e: SseEvent = { at: performance.now() };
      for (const line of frame.split("\n")) {
        if (line.startsWith(":")) e.comment = line.slice(1).trim();
        else if (line.startsWith("event: ")) e.event = line.slice(7);
        else if (line.startsWith("data: ")) e.data = line.slice(6);
      }
      events.push(e);
      if (await stop(e, events)) {
        await reader.cancel();
        return events;
      }
    }
  }
}

export const post = (url: string, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
  fetch(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json", ...headers }, signal });
