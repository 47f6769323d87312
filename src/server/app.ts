// The Elysia app: every route, auth, and the one place errors are turned into responses.
import { Elysia } from "elysia";
import type { ChatModel, SamplingOptions } from "../chat/ir.ts";
import { ApiError, describeIssue, errorResponse, toApiError } from "../api/errors.ts";
import { DEFAULT_SAMPLING } from "../api/options.ts";
import { ResponseStore } from "../api/openai-responses/store.ts";
import { log } from "../log.ts";
import { anthropicRoutes } from "./anthropic.ts";
import { checkApiKey } from "./auth.ts";
import { surfaceOf, type ServerContext } from "./context.ts";
import { Metrics } from "./metrics.ts";
import { ModelRegistry } from "./models.ts";
import { openaiChatRoutes } from "./openai-chat.ts";
import { openaiResponsesRoutes } from "./openai-responses.ts";
import { pageRoutes } from "./page-routes.ts";

export type AppOptions = {
  models: readonly ChatModel[];
  apiKey?: string; // required on /v1/* when set
  sampling?: Partial<SamplingOptions>; // server-wide defaults for what a request leaves out
  pingIntervalMs?: number; // SSE keep-alive while nothing else is sent (default 5 s)
  firstEventWaitMs?: number; // how long a stream waits for an early failure before answering 200 (default 100 ms)
  storedResponses?: number; // Responses kept for previous_response_id and GET /v1/responses/{id} (default 100)
};

export function createApp(options: AppOptions) {
  // Stamped before the body is read and validated, so time to first token includes them.
  const arrivals = new WeakMap<Request, number>();
  const ctx: ServerContext = {
    models: new ModelRegistry(options.models),
    metrics: new Metrics(),
    sampling: { ...DEFAULT_SAMPLING, ...options.sampling },
    pingIntervalMs: options.pingIntervalMs ?? 5000,
    firstEventWaitMs: options.firstEventWaitMs ?? 100,
    arrivedAt: (request) => arrivals.get(request) ?? performance.now(),
  };
  const { metrics, models } = ctx;
  return new Elysia()
    .onRequest(({ request }) => {
      arrivals.set(request, performance.now());
      if (new URL(request.url).pathname.startsWith("/v1/")) checkApiKey(request.headers, options.apiKey);
    })
    .onError(({ code, error, request, path }) => {
      const { surface, shape } = surfaceOf(path);
      const apiError = elysiaError(code, error, request, shape);
      if (apiError.status === 500) log.error(error);
      metrics.request(surface, apiError.status);
      return errorResponse(apiError, shape);
    })
    .head("/", () => new Response(null))
    .get("/health", () => ({ status: "ok", models: models.all.map((m) => m.id) }))
    .get("/metrics", () => new Response(metrics.render(models.all), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } }))
    .get("/v1/models", () => {
      metrics.request("models", 200);
      return models.list();
    })
    .get("/v1/models/:id", ({ params }) => {
      const entry = models.entry(models.get(decodeURIComponent(params.id)));
      metrics.request("models", 200);
      return entry;
    })
    .use(openaiChatRoutes(ctx))
    .use(openaiResponsesRoutes(ctx, new ResponseStore(options.storedResponses ?? 100)))
    .use(anthropicRoutes(ctx))
    .use(pageRoutes(ctx, options.apiKey !== undefined));
}

// Elysia's own failures (bad JSON, schema violations, no such route) and anything a handler threw, as an ApiError.
function elysiaError(code: string | number, error: unknown, request: Request, shape: "openai" | "anthropic"): ApiError {
  if (error instanceof ApiError) return error;
  if (request.signal.aborted) return new ApiError(499, "the client closed the request");
  switch (code) {
    case "PARSE": {
      const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
      return new ApiError(400, `the request body is not valid JSON${cause}`, { code: "invalid_json" });
    }
    case "VALIDATION": {
      const issue = (error as { valueError?: Parameters<typeof describeIssue>[0] }).valueError;
      if (!issue) return new ApiError(400, "the request does not match the API schema");
      const { param, message } = describeIssue(issue);
      return new ApiError(400, `${param}: ${message}`, { param });
    }
    case "NOT_FOUND":
      return new ApiError(404, `no such endpoint: ${request.method} ${new URL(request.url).pathname}`, { code: "unknown_endpoint" });
    default:
      return toApiError(error, shape);
  }
}
