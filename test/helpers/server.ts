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
