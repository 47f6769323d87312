// Structured output in the request converters: the formats arrive in the Conversation, and a schema the grammar cannot
// enforce is a 400 whose `param` is the surface's own field — with tool indexes counted in the request, where server
// tools and tools Splash does not run are skipped in the Conversation.
import { describe, expect, test } from "bun:test";
import { convertMessagesRequest } from "../../../src/api/anthropic/request.ts";
import { MessagesRequest } from "../../../src/api/anthropic/schema.ts";
import { ApiError } from "../../../src/api/errors.ts";
import { convertChatRequest } from "../../../src/api/openai-chat/request.ts";
import { ChatRequest } from "../../../src/api/openai-chat/schema.ts";
import { convertResponsesRequest } from "../../../src/api/openai-responses/request.ts";
import { ResponsesRequest } from "../../../src/api/openai-responses/schema.ts";
import { ScriptedModel } from "../../helpers/scripted-model.ts";

const model = new ScriptedModel({ id: "m", vision: false, maxOutputTokens: 100 });
const ctx = { model, sampling: { temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1 }, signal: new AbortController().signal };
const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
const bad = { type: "object", properties: { a: { type: "integer", multipleOf: 2 } } };

const chat = (body: Record<string, unknown>) => convertChatRequest(ChatRequest.parse({ model: "m", messages: [{ role: "user", content: "hi" }], ...body }), ctx);
const responses = (body: Record<string, unknown>) => convertResponsesRequest(ResponsesRequest.parse({ model: "m", input: "hi", ...body }), { ...ctx, history: [] });
const messages = (body: Record<string, unknown>) => convertMessagesRequest(MessagesRequest.parse({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "hi" }], ...body }), ctx);

function refusal(f: () => unknown): ApiError {
  try {
    f();
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error("expected a 400");
}

describe("formats reach the conversation", () => {
  test("chat json_schema and json_object, Responses text.format, Anthropic output_config.format and output_format", () => {
    expect(chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema, strict: true } } }).conversation.responseFormat).toEqual({ type: "json_schema", name: "x", schema, strict: true });
    expect(chat({ response_format: { type: "json_object" } }).conversation.responseFormat).toEqual({ type: "json_object" });
    expect(responses({ text: { format: { type: "json_schema", name: "x", schema } } }).conversation.responseFormat).toEqual({ type: "json_schema", name: "x", schema });
    expect(messages({ output_config: { format: { type: "json_schema", schema } } }).conversation.responseFormat).toEqual({ type: "json_schema", schema });
    expect(messages({ output_format: { type: "json_schema", schema } }).conversation.responseFormat).toEqual({ type: "json_schema", schema });
  });
});

describe("refusals name the surface's field", () => {
  test("response formats", () => {
    const cases: [ApiError, string][] = [
      [refusal(() => chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema: bad } } })), "response_format.json_schema.schema"],
      [refusal(() => responses({ text: { format: { type: "json_schema", name: "x", schema: bad } } })), "text.format.schema"],
      [refusal(() => messages({ output_config: { format: { type: "json_schema", schema: bad } } })), "output_config.format.schema"],
      [refusal(() => messages({ output_format: { type: "json_schema", schema: bad } })), "output_format.schema"],
    ];
    for (const [e, param] of cases) {
      expect(e.status).toBe(400);
      expect(e.details).toMatchObject({ param, code: "unsupported_schema" });
      expect(e.message).toStartWith(`${param}: `);
      expect(e.message).toContain('unsupported keyword "multipleOf"');
      expect(e.message).toContain("/properties/a/multipleOf");
    }
  });

  test("forced tool calls: the offending tool at its index in the request", () => {
    const good = { type: "object", properties: { x: { type: "string" } } };
    const c = refusal(() => chat({ tools: [{ type: "function", function: { name: "ok", parameters: good } }, { type: "function", function: { name: "no", parameters: bad } }], tool_choice: "required" }));
    expect(c.details.param).toBe("tools.1.function.parameters");
    // Responses: a hosted tool first (dropped from the conversation) moves the index by one.
    const r = refusal(() => responses({ tools: [{ type: "web_search" }, { type: "function", name: "ok", parameters: good }, { type: "function", name: "no", parameters: bad }], tool_choice: "required" }));
    expect(r.details.param).toBe("tools.2.parameters");
    // Anthropic: likewise a server tool.
    const a = refusal(() => messages({ tools: [{ type: "web_search_20250305", name: "web_search" }, { name: "no", input_schema: bad }], tool_choice: { type: "tool", name: "no" } }));
    expect(a.details.param).toBe("tools.1.input_schema");
    // A raw (string) parameter whose pattern needs "<" cannot be written between the XML tags.
    const raw = refusal(() => chat({ tools: [{ type: "function", function: { name: "t", parameters: { type: "object", properties: { p: { type: "string", pattern: "^<a>$" } } } } }], tool_choice: "required" }));
    expect(raw.details.param).toBe("tools.0.function.parameters");
    expect(raw.message).toContain("pattern");
  });

  test("without a forced call or strict tools, tool schemas are not the grammar's business", () => {
    expect(chat({ tools: [{ type: "function", function: { name: "no", parameters: bad } }] }).conversation.tools.length).toBe(1);
  });
});
