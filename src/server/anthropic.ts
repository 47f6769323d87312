// POST /v1/messages (Claude Code posts to /v1/messages?beta=true: the query is ignored) and
// POST /v1/messages/count_tokens.
import { Elysia } from "elysia";
import { newId } from "../api/ids.ts";
import { anthropicConversation, convertMessagesRequest } from "../api/anthropic/request.ts";
import { AnthropicStreamEncoder, anthropicMessage } from "../api/anthropic/response.ts";
import { CountTokensRequest, MessagesRequest } from "../api/anthropic/schema.ts";
import { Turn } from "../api/turn.ts";
import { generationContext, requestAbort, type ServerContext } from "./context.ts";
import { jsonBody } from "./body.ts";
import { startGeneration } from "./generation.ts";
import { sseResponse } from "./sse.ts";

export const anthropicRoutes = (ctx: ServerContext) =>
  new Elysia()
    .post(
      "/v1/messages",
      async ({ body, request }) => {
        const model = ctx.models.get(body.model);
        const { signal, abort } = requestAbort(request, ctx.shutdown);
        const { conversation, options } = convertMessagesRequest(body, { model, sampling: ctx.sampling, signal });
        const meta = { id: newId("msg_"), model: model.id };
        const timing = generationContext(ctx, request, "anthropic");
        if (body.stream) {
          const generation = await startGeneration(model, conversation, options, { ...timing, waitMs: ctx.firstEventWaitMs });
          ctx.metrics.request("messages", 200);
          return sseResponse(new AnthropicStreamEncoder(meta), generation, { pingIntervalMs: ctx.pingIntervalMs, shape: "anthropic", abort, onError: () => ctx.metrics.streamError("messages"), requests: ctx.requests, record: timing.record });
        }
        const turn = new Turn();
        for await (const event of await startGeneration(model, conversation, options, { ...timing, waitMs: 0 })) turn.add(event);
        ctx.metrics.request("messages", 200);
        return Response.json(anthropicMessage(turn, meta));
      },
      { body: MessagesRequest, parse: jsonBody(ctx) },
    )
    .post(
      "/v1/messages/count_tokens",
      ({ body, request }) => {
        const model = ctx.models.get(body.model);
        ctx.requests.begin(request).model = model.id;
        const input_tokens = model.countTokens(anthropicConversation(body, model));
        ctx.metrics.request("count_tokens", 200);
        return { input_tokens };
      },
      { body: CountTokensRequest, parse: jsonBody(ctx) },
    );
