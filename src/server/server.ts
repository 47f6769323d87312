// Listening: the app on a host and port, with the warnings a user should see when binding, the request log, and
// the drain on shutdown.
import { createApp, type AppOptions } from "./app.ts";
import { isLoopback } from "./access.ts";
import { RequestLog, type LogFormat } from "./request-log.ts";
import { END_GRACE_MS, Shutdown } from "./shutdown.ts";
import { log } from "../log.ts";

export type ServerOptions = AppOptions & {
  host: string;
  port: number;
  logFormat?: LogFormat; // one line per request on stderr (default: none)
};

// `url` is where a client on this machine connects (the loopback address when bound to all interfaces).
export type RunningServer = {
  url: string;
  host: string;
  port: number;
  running(): number; // requests being answered
  // Stops accepting, lets running requests finish for up to `timeoutMs` (or until `hurry` aborts), then ends the
  // rest with the surface's error and closes. Resolves with how many requests had to be ended.
  drain(timeoutMs: number, hurry?: AbortSignal): Promise<{ ended: number }>;
  stop(): Promise<void>; // at once: open connections are closed
};

// Why a server could not listen, in words a user can act on.
export class ListenError extends Error {
  override name = "ListenError";
  constructor(
    message: string,
    readonly hint: string,
  ) {
    super(message);
  }
}

function listenError(e: unknown, host: string, port: number): ListenError {
  const code = (e as NodeJS.ErrnoException).code;
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  if (code === "EADDRINUSE") return new ListenError(`cannot listen on ${where}: the port is in use`, "pick another --port, or stop what is using it");
  if (code === "EACCES" || code === "EPERM") {
    return new ListenError(`cannot listen on ${where}: permission denied`, port < 1024 ? "ports below 1024 need administrator rights: pick --port 1024 or above" : "this user may not listen there: pick another --port or --host");
  }
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND") return new ListenError(`cannot listen on ${where}: ${host} is not an address of this machine`, "pick --host 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)");
  return new ListenError(`cannot listen on ${where}: ${e instanceof Error ? e.message : String(e)}`, "pick another --port or --host");
}

export function createServer(options: ServerOptions): RunningServer {
  if (!isLoopback(options.host) && options.apiKey === undefined) {
    log.warn(`listening on ${options.host} without an API key: anyone who can reach this port can use the model (pass --api-key)`);
  }
  const requests = new RequestLog(options.logFormat);
  const shutdown = new Shutdown();
  const app = createApp({ ...options, access: { host: options.host, ...options.access } }, requests, shutdown);
  let server;
  try {
    server = Bun.serve({
      hostname: options.host,
      port: options.port,
      // Never share the port: a second server on it would silently take part of the traffic.
      reusePort: false,
      // The app refuses bodies over its own limit with a 413 the client can read; the listener's own would be empty.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      development: false,
      // Long enough for a client between requests of an agent turn; a request being answered is never cut.
      idleTimeout: 30,
      async fetch(request, srv) {
        const record = requests.begin(request, srv.requestIP(request)?.address);
        const response = await app.handle(request);
        // A stream's line is written when it ends (src/server/sse.ts).
        if (!record.streaming) requests.end(record, response.status);
        return response;
      },
    });
  } catch (e) {
    throw listenError(e, options.host, options.port);
  }
  const host = server.hostname ?? options.host;
  const port = server.port ?? options.port;
  const local = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  const urlHost = local.includes(":") ? `[${local}]` : local;
  return {
    url: `http://${urlHost}:${port}`,
    host,
    port,
    running: () => server.pendingRequests,
    async drain(timeoutMs, hurry) {
      shutdown.drain();
      const stopped = server.stop(false);
      if (await settlesWithin(stopped, timeoutMs, hurry)) return { ended: 0 };
      const ended = server.pendingRequests;
      shutdown.endNow();
      await settlesWithin(stopped, END_GRACE_MS);
      await server.stop(true);
      return { ended };
    },
    stop: async () => {
      shutdown.endNow();
      await server.stop(true);
    },
  };
}

// Whether the promise settles within `ms` (and before `hurry` aborts).
function settlesWithin(promise: Promise<unknown>, ms: number, hurry?: AbortSignal): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onHurry: (() => void) | undefined;
  const late = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
    onHurry = () => resolve(false);
    if (hurry?.aborted) resolve(false);
    hurry?.addEventListener("abort", onHurry);
  });
  return Promise.race([promise.then(() => true), late]).finally(() => {
    clearTimeout(timer);
    hurry?.removeEventListener("abort", onHurry!);
  });
}

// Fails fast, before a model is loaded for minutes, when the address cannot be listened on. The real listener
// binds later; what takes the port in between is reported then.
export async function checkListen(host: string, port: number): Promise<void> {
  if (port === 0) return;
  let probe;
  try {
    probe = Bun.serve({ hostname: host, port, reusePort: false, fetch: () => new Response(null, { status: 503 }) });
  } catch (e) {
    throw listenError(e, host, port);
  }
  await probe.stop(true);
}
