// What every route module shares: the models, the counters, the server's settings, the request records.
import type { SamplingOptions } from "../chat/ir.ts";
import type { ErrorShape } from "../api/errors.ts";
import type { Metrics } from "./metrics.ts";
import type { ModelRegistry } from "./models.ts";
import type { RequestLog, RequestRecord } from "./request-log.ts";
import type { Shutdown } from "./shutdown.ts";

export type ServerContext = {
  models: ModelRegistry;
  metrics: Metrics;
  sampling: SamplingOptions;
  pingIntervalMs: number;
  firstEventWaitMs: number;
  maxBodyBytes: number;
  requests: RequestLog;
  shutdown: Shutdown;
};

// The API surface a path belongs to: the label requests are counted under and the error shape they get.
export function surfaceOf(path: string): { surface: string; shape: ErrorShape } {
  if (path.startsWith("/v1/messages/count_tokens")) return { surface: "count_tokens", shape: "anthropic" };
  if (path.startsWith("/v1/messages")) return { surface: "messages", shape: "anthropic" };
  if (path.startsWith("/v1/chat/completions")) return { surface: "chat", shape: "openai" };
  if (path.startsWith("/v1/responses")) return { surface: "responses", shape: "openai" };
  if (path.startsWith("/v1/models")) return { surface: "models", shape: "openai" };
  if (path === "/tokenize" || path === "/detokenize" || path === "/apply-template") return { surface: path.slice(1), shape: "openai" };
  return { surface: "other", shape: "openai" };
}

// Cancels a generation when the client disconnects (request.signal), the stream is cancelled (abort()), or the
// server's drain time is up.
export function requestAbort(request: Request, shutdown: Shutdown): { signal: AbortSignal; abort: () => void } {
  const controller = new AbortController();
  return { signal: AbortSignal.any([request.signal, controller.signal, shutdown.ended]), abort: () => controller.abort() };
}

// What starting a generation needs to know of the request it serves.
export type GenerationContext = { metrics: Metrics; shape: ErrorShape; record: RequestRecord; shutdown: Shutdown };

export function generationContext(ctx: ServerContext, request: Request, shape: ErrorShape): GenerationContext {
  return { metrics: ctx.metrics, shape, record: ctx.requests.begin(request), shutdown: ctx.shutdown };
}
