// Listening: the app on a host and port, with the warnings a user should see when binding.
import { createApp, type AppOptions } from "./app.ts";
import { isLoopback } from "./auth.ts";
import { log } from "../log.ts";

export type ServerOptions = AppOptions & { host: string; port: number };

// `url` is where a client on this machine connects (the loopback address when bound to all interfaces).
export type RunningServer = { url: string; host: string; port: number; stop(): Promise<void> };

export function createServer(options: ServerOptions): RunningServer {
  if (!isLoopback(options.host) && options.apiKey === undefined) {
    log.warn(`listening on ${options.host} without an API key: anyone who can reach this port can use the model (pass --api-key)`);
  }
  const app = createApp(options);
  app.listen({ hostname: options.host, port: options.port });
  const server = app.server!;
  const host = server.hostname ?? options.host;
  const port = server.port ?? options.port;
  const local = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  const urlHost = local.includes(":") ? `[${local}]` : local;
  return {
    url: `http://${urlHost}:${port}`,
    host,
    port,
    stop: async () => {
      await app.stop(true);
    },
  };
}
