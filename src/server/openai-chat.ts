// POST /v1/chat/completions.
import { Elysia } from "elysia";
import { newId, unixSeconds } from "../api/ids.ts";
import { convertChatRequest } from "../api/openai-chat/request.ts";
import { ChatStreamEncoder, chatCompletion } from "../api/openai-chat/response.ts";
import { ChatRequest } from "../api/openai-chat/schema.ts";
import { Turn } from "../api/turn.ts";
import { generationContext, requestAbort, type ServerContext } from "./context.ts";
import { jsonBody } from "./body.ts";
import { startGeneration } from "./generation.ts";
import { sseResponse } from "./sse.ts";

export const openaiChatRoutes = (ctx: ServerContext) =>
  new Elysia().post(
    "/v1/chat/completions",
    async ({ body, request }) => {
      const model = ctx.models.get(body.model);
      const { signal, abort } = requestAbort(request, ctx.shutdown);
      const { conversation, options } = convertChatRequest(body, { model, sampling: ctx.sampling, signal });
      const meta = { id: newId("chatcmpl-"), created: unixSeconds(), model: model.id };
      const timing = generationContext(ctx, request, "openai");
      if (body.stream) {
        const generation = await startGeneration(model, conversation, options, { ...timing, waitMs: ctx.firstEventWaitMs });
        ctx.metrics.request("chat", 200);
        const encoder = new ChatStreamEncoder(meta, body.stream_options?.include_usage === true);
        return sseResponse(encoder, generation, { pingIntervalMs: ctx.pingIntervalMs, shape: "openai", abort, onError: () => ctx.metrics.streamError("chat"), requests: ctx.requests, record: timing.record });
      }
      const turn = new Turn();
      for await (const event of await startGeneration(model, conversation, options, { ...timing, waitMs: 0 })) turn.add(event);
      ctx.metrics.request("chat", 200);
      return Response.json(chatCompletion(turn, meta, body.logprobs === true));
    },
    { body: ChatRequest, parse: jsonBody(ctx) },
  );
