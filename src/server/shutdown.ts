// A server's shutdown in two steps. Draining: new requests are refused and running ones go on. Ending: when the
// drain time is up, every running generation is stopped and answers with the surface's error (a stream's error
// event, or an error response), so no client is left with an answer cut off mid-chunk.
import { ApiError } from "../api/errors.ts";

// How long running requests get to finish (`splash serve --drain-timeout`).
export const DEFAULT_DRAIN_MS = 10_000;
// After that, how long the ended requests get to send their error before connections are closed.
export const END_GRACE_MS = 2000;

export class Shutdown {
  private drainStarted = false;
  private readonly end = new AbortController();

  get draining(): boolean {
    return this.drainStarted;
  }

  // Aborted when running generations must stop.
  get ended(): AbortSignal {
    return this.end.signal;
  }

  drain(): void {
    this.drainStarted = true;
  }

  endNow(): void {
    this.drainStarted = true;
    this.end.abort();
  }
}

// The error a request gets when the server stops before (or while) answering it: a 503, which clients retry.
export function shuttingDown(): ApiError {
  return new ApiError(503, "the server is shutting down; retry the request when it is back", { code: "server_shutting_down" });
}
