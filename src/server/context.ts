// What every route module shares: the models, the counters, the server's settings.
import type { SamplingOptions } from "../chat/ir.ts";
import type { ErrorShape } from "../api/errors.ts";
import type { Metrics } from "./metrics.ts";
import type { ModelRegistry } from "./models.ts";

export type ServerContext = {
  models: ModelRegistry;
  metrics: Metrics;
  sampling: SamplingOptions;
  pingIntervalMs: number;
  firstEventWaitMs: number;
  arrivedAt: (request: Request) => number; // when the request reached the server (performance.now())
};

// The API surface a path belongs to: the label requests are counted under and the error shape they get.
export function surfaceOf(path: string): { surface: string; shape: ErrorShape } {
  if (path.startsWith("/v1/messages/count_tokens")) return { surface: "count_tokens", shape: "anthropic" };
  if (path.startsWith("/v1/messages")) return { surface: "messages", shape: "anthropic" };
  if (path.startsWith("/v1/chat/completions")) return { surface: "chat", shape: "openai" };
  if (path.startsWith("/v1/responses")) return { surface: "responses", shape: "openai" };
  if (path.startsWith("/v1/models")) return { surface: "models", shape: "openai" };
  return { surface: "other", shape: "openai" };
}

// Cancels a generation when the client disconnects (request.signal) or the stream is cancelled (abort()).
export function requestAbort(request: Request): { signal: AbortSignal; abort: () => void } {
  const controller = new AbortController();
  return { signal: AbortSignal.any([request.signal, controller.signal]), abort: () => controller.abort() };
}
