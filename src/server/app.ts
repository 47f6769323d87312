// The Elysia app: every route, the checks every request passes first, and the one place errors are turned into
// responses.
import { Elysia } from "elysia";
import type { ChatModel, SamplingOptions } from "../chat/ir.ts";
import { ApiError, describeIssue, errorResponse, toApiError, type ErrorShape } from "../api/errors.ts";
import { DEFAULT_SAMPLING } from "../api/options.ts";
import { ResponseStore } from "../api/openai-responses/store.ts";
import { log } from "../log.ts";
import { AccessPolicy, type AccessOptions } from "./access.ts";
import { anthropicRoutes } from "./anthropic.ts";
import { checkApiKey } from "./auth.ts";
import { checkBodySize, DEFAULT_MAX_BODY_BYTES } from "./body.ts";
import { surfaceOf, type ServerContext } from "./context.ts";
import { Metrics } from "./metrics.ts";
import { ModelRegistry } from "./models.ts";
import { openaiChatRoutes } from "./openai-chat.ts";
import { openaiResponsesRoutes } from "./openai-responses.ts";
import { pageRoutes } from "./page-routes.ts";
import { RequestLog } from "./request-log.ts";
import { Shutdown, shuttingDown } from "./shutdown.ts";
import { tokenRoutes } from "./tokens.ts";

export type AppOptions = {
  models: readonly ChatModel[];
  apiKey?: string; // required on the API routes when set
  sampling?: Partial<SamplingOptions>; // server-wide defaults for what a request leaves out
  pingIntervalMs?: number; // SSE keep-alive while nothing else is sent (default 5 s)
  firstEventWaitMs?: number; // how long a stream waits for an early failure before answering 200 (default 100 ms)
  storedResponses?: number; // Responses kept for previous_response_id and GET /v1/responses/{id} (default 100)
  maxBodyBytes?: number; // largest request body (default 64 MiB)
  access?: AccessOptions; // the Host names and browser origins served (default: loopback names, no other origin)
};

// The API: what needs the key when one is set. /health, /metrics and / stay open for probes.
const isApiPath = (path: string) => path.startsWith("/v1/") || path === "/tokenize" || path === "/detokenize" || path === "/apply-template";

// `requests` and `shutdown` are the listener's (src/server/server.ts), which writes the log lines of plain
// responses and drains on shutdown; an app used on its own gets its own, silent ones.
export function createApp(options: AppOptions, requests = new RequestLog(undefined), shutdown = new Shutdown()) {
  const ctx: ServerContext = {
    models: new ModelRegistry(options.models),
    metrics: new Metrics(),
    sampling: { ...DEFAULT_SAMPLING, ...options.sampling },
    pingIntervalMs: options.pingIntervalMs ?? 5000,
    firstEventWaitMs: options.firstEventWaitMs ?? 100,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    requests,
    shutdown,
  };
  const access = new AccessPolicy(options.access);
  const { metrics, models } = ctx;
  return new Elysia()
    .onRequest(({ request, set }) => {
      // Stamped before the body is read and validated, so time to first token includes them.
      requests.begin(request);
      access.check(request);
      const preflight = access.preflight(request);
      if (preflight) return preflight;
      Object.assign(set.headers, access.corsHeaders(request));
      if (shutdown.draining) {
        set.headers.connection = "close";
        throw shuttingDown();
      }
      checkBodySize(request.headers, ctx.maxBodyBytes);
      if (isApiPath(new URL(request.url).pathname)) checkApiKey(request.headers, options.apiKey);
    })
    .onError(({ code, error, request, path }) => {
      const { surface, shape } = surfaceOf(path);
      const apiError = elysiaError(code, error, request, shape);
      if (apiError.status === 500) log.error(error);
      metrics.request(surface, apiError.status);
      requests.begin(request).error = apiError.message;
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
    .use(tokenRoutes(ctx))
    .use(pageRoutes(ctx, options.apiKey !== undefined));
}

// Elysia's own failures (a body that could not be read, schema violations, no such route) and anything a handler
// threw, as an ApiError.
function elysiaError(code: string | number, error: unknown, request: Request, shape: ErrorShape): ApiError {
  if (error instanceof ApiError) return error;
  if (request.signal.aborted) return new ApiError(499, "the client closed the request");
  switch (code) {
    case "PARSE": {
      // The body parser (src/server/body.ts) throws ApiErrors; Elysia wraps whatever a parser throws.
      const cause = error instanceof Error ? error.cause : undefined;
      if (cause instanceof ApiError) return cause;
      return new ApiError(400, `the request body could not be read: ${cause instanceof Error ? cause.message : String(cause)}`);
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
