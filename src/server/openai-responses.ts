// POST /v1/responses and GET /v1/responses/{id}.
import { Elysia } from "elysia";
import { ApiError } from "../api/errors.ts";
import { newId, unixSeconds } from "../api/ids.ts";
import { convertResponsesRequest } from "../api/openai-responses/request.ts";
import { finalStatus, ResponsesStreamEncoder, responseObject, type ResponseMeta } from "../api/openai-responses/response.ts";
import { ResponsesRequest } from "../api/openai-responses/schema.ts";
import { ResponseStore } from "../api/openai-responses/store.ts";
import { Turn } from "../api/turn.ts";
import { generationContext, requestAbort, type ServerContext } from "./context.ts";
import { jsonBody } from "./body.ts";
import { startGeneration } from "./generation.ts";
import { sseResponse } from "./sse.ts";

const notFound = (id: string, param?: string) => new ApiError(404, `response '${id}' not found (responses are kept in memory, for the most recent ones only)`, { param, code: "response_not_found" });

export const openaiResponsesRoutes = (ctx: ServerContext, store: ResponseStore) =>
  new Elysia()
    .post(
      "/v1/responses",
      async ({ body, request }) => {
        const model = ctx.models.get(body.model);
        const previous = body.previous_response_id ? store.get(body.previous_response_id) : undefined;
        if (body.previous_response_id && !previous) throw notFound(body.previous_response_id, "previous_response_id");
        const { signal, abort } = requestAbort(request, ctx.shutdown);
        const converted = convertResponsesRequest(body, { model, sampling: ctx.sampling, signal, history: previous?.history ?? [] });
        const meta: ResponseMeta = { id: newId("resp_"), createdAt: unixSeconds(), model: model.id, request: body, customTools: converted.customTools };
        const remember = (response: object, turn: Turn) => {
          if (body.store !== false) store.put(meta.id, { response, history: [...(previous?.history ?? []), ...converted.input, turn.assistantMessage()] });
        };
        const timing = { ...generationContext(ctx, request, "openai"), conversation: "input" };
        if (body.stream) {
          const generation = await startGeneration(model, converted.conversation, converted.options, { ...timing, waitMs: ctx.firstEventWaitMs });
          ctx.metrics.request("responses", 200);
          return sseResponse(new ResponsesStreamEncoder(meta, remember), generation, { pingIntervalMs: ctx.pingIntervalMs, shape: "openai", abort, onError: () => ctx.metrics.streamError("responses"), requests: ctx.requests, record: timing.record });
        }
        const turn = new Turn();
        for await (const event of await startGeneration(model, converted.conversation, converted.options, { ...timing, waitMs: 0 })) turn.add(event);
        const response = responseObject(meta, turn, finalStatus(turn));
        remember(response, turn);
        ctx.metrics.request("responses", 200);
        return Response.json(response);
      },
      { body: ResponsesRequest, parse: jsonBody(ctx) },
    )
    .get("/v1/responses/:id", ({ params }) => {
      const entry = store.get(params.id);
      if (!entry) throw notFound(params.id);
      ctx.metrics.request("responses", 200);
      return Response.json(entry.response);
    });
