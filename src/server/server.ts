// Listening: the app on a host and port, with the warnings a user should see when binding.
import { createApp, type AppOptions } from "./app.ts";
import { isLoopback } from "./auth.ts";
import { log } from "../log.ts";

export type ServerOptions = AppOptions & { host: string; port: number };

export type RunningServer = { url: string; host: string; port: number; stop(): Promise<void> };

export function createServer(options: ServerOptions): RunningServer {
  if (!isLoopback(options.host) && options.apiKey === undefined) {
    log.warn(`listening on ${options.host} without an API key: anyone who can reach this port can use the model (pass --api-key)`);
  }
  const app = createApp(options);
  // idleTimeout 0: Bun's default 10 s would cut a non-streaming request whose answer takes longer to generate.
  app.listen({ hostname: options.host, port: options.port, idleTimeout: 0 });
  const server = app.server!;
  const host = server.hostname ?? options.host;
  const port = server.port ?? options.port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    host,
    port,
    stop: async () => {
      await app.stop(true);
    },
  };
}
