// POST /tokenize, POST /detokenize, POST /apply-template: text ↔ token ids with the served tokenizer, and the exact
// prompt a Chat Completions request would run (its text and token count). The same key, body limit and error
// shape (OpenAI's) as /v1/*.
import { Elysia } from "elysia";
import { invalidRequest } from "../api/errors.ts";
import { convertChatRequest } from "../api/openai-chat/request.ts";
import { ApplyTemplateRequest, DetokenizeRequest, TokenizeRequest } from "../api/tokens/schema.ts";
import type { ServedTokenizer } from "../chat/ir.ts";
import { jsonBody } from "./body.ts";
import type { ServerContext } from "./context.ts";

function pieces(tokenizer: ServedTokenizer, ids: Int32Array) {
  return Array.from(ids, (id) => ({ id, text: tokenizer.decode([id]), bytes: Array.from(tokenizer.tokenBytes(id)) }));
}

export const tokenRoutes = (ctx: ServerContext) =>
  new Elysia()
    .post(
      "/tokenize",
      ({ body, request }) => {
        const model = ctx.models.getOrOnly(body.model);
        ctx.requests.begin(request).model = model.id;
        const ids = body.add_special_tokens === false ? model.tokenizer.encode(body.text) : model.tokenizer.encodeWithAddedTokens(body.text);
        ctx.metrics.request("tokenize", 200);
        return {
          model: model.id,
          tokens: Array.from(ids),
          count: ids.length,
          max_model_len: model.contextLength,
          ...(body.with_pieces ? { pieces: pieces(model.tokenizer, ids) } : {}),
        };
      },
      { body: TokenizeRequest, parse: jsonBody(ctx) },
    )
    .post(
      "/detokenize",
      ({ body, request }) => {
        const model = ctx.models.getOrOnly(body.model);
        ctx.requests.begin(request).model = model.id;
        const bad = body.tokens.findIndex((id) => id >= model.tokenizer.vocabSize);
        if (bad >= 0) throw invalidRequest(`token id ${body.tokens[bad]} is outside the vocabulary (ids 0 to ${model.tokenizer.vocabSize - 1})`, `tokens.${bad}`);
        ctx.metrics.request("detokenize", 200);
        return { model: model.id, text: model.tokenizer.decode(body.tokens, { skipSpecial: body.skip_special_tokens === true }) };
      },
      { body: DetokenizeRequest, parse: jsonBody(ctx) },
    )
    .post(
      "/apply-template",
      ({ body, request }) => {
        const model = ctx.models.getOrOnly(body.model);
        ctx.requests.begin(request).model = model.id;
        const kwargs = body.enable_thinking == null ? body.chat_template_kwargs : { ...body.chat_template_kwargs, enable_thinking: body.enable_thinking };
        const { conversation } = convertChatRequest({ ...body, model: model.id, chat_template_kwargs: kwargs }, { model, sampling: ctx.sampling, signal: request.signal });
        const prompt = model.prompt(conversation);
        ctx.metrics.request("apply-template", 200);
        return { model: model.id, prompt: prompt.text, count: prompt.tokens };
      },
      { body: ApplyTemplateRequest, parse: jsonBody(ctx) },
    );
