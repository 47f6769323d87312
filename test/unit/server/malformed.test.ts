// Malformed requests, one row each: every one gets the right status, its surface's error shape, and a message that
// names what was wrong; after all of them the server still serves. Runs through app.handle, without a socket.
import { describe, expect, test } from "bun:test";
import { createApp } from "../../../src/server/app.ts";
import { ScriptedModel } from "../../helpers/scripted-model.ts";

const app = createApp({ models: [new ScriptedModel({ id: "m", vision: false }), new ScriptedModel({ id: "v", vision: true })] });

type Row = {
  path: string;
  body?: unknown; // objects are sent as JSON, strings as they are
  method?: string;
  status: number;
  message: RegExp;
  param?: string | null;
  code?: string;
};

const user = [{ role: "user", content: "hi" }];
const chat = (extra: Record<string, unknown>) => ({ model: "m", messages: user, ...extra });
const resp = (extra: Record<string, unknown>) => ({ model: "m", input: "hi", ...extra });
const msgs = (extra: Record<string, unknown>) => ({ model: "m", max_tokens: 16, messages: user, ...extra });
const tool = { type: "function", function: { name: "f", parameters: { type: "object" } } };
const antTool = { name: "f", input_schema: { type: "object" } };

const C = "/v1/chat/completions";
const R = "/v1/responses";
const A = "/v1/messages";

const rows: [string, Row][] = [
  // Chat Completions
  ["chat: broken JSON", { path: C, body: "{bad", status: 400, message: /not valid JSON/, code: "invalid_json" }],
  ["chat: empty body", { path: C, body: "", status: 400, message: /not valid JSON/ }],
  ["chat: body is an array", { path: C, body: [1, 2], status: 400, message: /^body: expected object, received array/, param: "body" }],
  ["chat: body is a string", { path: C, body: '"hi"', status: 400, message: /^body: expected object/ }],
  ["chat: no model", { path: C, body: { messages: user }, status: 400, message: /^model: required field is missing/, param: "model" }],
  ["chat: model is a number", { path: C, body: { model: 5, messages: user }, status: 400, message: /^model: expected string, received number/, param: "model" }],
  ["chat: no messages", { path: C, body: { model: "m" }, status: 400, message: /^messages: required/, param: "messages" }],
  ["chat: empty messages", { path: C, body: chat({ messages: [] }), status: 400, message: /^messages: Too small/, param: "messages" }],
  ["chat: messages is a string", { path: C, body: chat({ messages: "hi" }), status: 400, message: /^messages: expected array/ }],
  ["chat: unknown role", { path: C, body: chat({ messages: [{ role: "robot", content: "x" }] }), status: 400, message: /^messages\.0\.role: unknown role/, param: "messages.0.role" }],
  ["chat: content is a number", { path: C, body: chat({ messages: [{ role: "user", content: 5 }] }), status: 400, message: /^messages\.0\.content: expected string or array, received number/ }],
  ["chat: unknown part type", { path: C, body: chat({ messages: [{ role: "user", content: [{ type: "video" }] }] }), status: 400, message: /^messages\.0\.content\.0\.type: unknown type/ }],
  ["chat: image part without url", { path: C, body: chat({ messages: [{ role: "user", content: [{ type: "image_url", image_url: {} }] }] }), status: 400, message: /^messages\.0\.content\.0\.image_url\.url: required/ }],
  ["chat: image for a text-only model", { path: C, body: chat({ messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }] }), status: 400, message: /does not accept images/, code: "unsupported_content" }],
  ["chat: audio part", { path: C, body: chat({ messages: [{ role: "user", content: [{ type: "input_audio" }] }] }), status: 400, message: /input_audio content is not supported/ }],
  ["chat: tool message without tool_call_id", { path: C, body: chat({ messages: [...user, { role: "tool", content: "x" }] }), status: 400, message: /^messages\.1\.tool_call_id: required/ }],
  ["chat: tool call without function", { path: C, body: chat({ messages: [...user, { role: "assistant", tool_calls: [{ id: "c" }] }] }), status: 400, message: /^messages\.1\.tool_calls\.0\.function: required/ }],
  ["chat: temperature too high", { path: C, body: chat({ temperature: 5 }), status: 400, message: /^temperature: Too big/, param: "temperature" }],
  ["chat: temperature not a number", { path: C, body: chat({ temperature: "hot" }), status: 400, message: /^temperature: expected number/ }],
  ["chat: top_p above 1", { path: C, body: chat({ top_p: 1.5 }), status: 400, message: /^top_p: Too big/ }],
  ["chat: max_tokens 0", { path: C, body: chat({ max_tokens: 0 }), status: 400, message: /^max_tokens: Too small/ }],
  ["chat: max_tokens fractional", { path: C, body: chat({ max_tokens: 1.5 }), status: 400, message: /^max_tokens: expected int/ }],
  ["chat: n = 2", { path: C, body: chat({ n: 2 }), status: 400, message: /^n: only n = 1 is supported/ }],
  ["chat: stop is a number", { path: C, body: chat({ stop: 5 }), status: 400, message: /^stop: expected string or array/ }],
  ["chat: tool without function", { path: C, body: chat({ tools: [{ type: "function" }] }), status: 400, message: /^tools\.0\.function: required/ }],
  ["chat: tool with empty name", { path: C, body: chat({ tools: [{ type: "function", function: { name: "" } }] }), status: 400, message: /^tools\.0\.function\.name: Too small/ }],
  ["chat: tool_choice unknown word", { path: C, body: chat({ tools: [tool], tool_choice: "sometimes" }), status: 400, message: /^tool_choice: / }],
  ["chat: tool_choice names a missing tool", { path: C, body: chat({ tools: [tool], tool_choice: { type: "function", function: { name: "g" } } }), status: 400, message: /^tool_choice\.function\.name: names 'g'/ }],
  ["chat: tool_choice required without tools", { path: C, body: chat({ tool_choice: "required" }), status: 400, message: /^tool_choice: 'required' needs at least one tool/ }],
  ["chat: schema keyword a grammar cannot enforce", { path: C, body: chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { not: {} } } } } } }), status: 400, message: /^response_format\.json_schema\.schema: .*unsupported keyword "not".*\/properties\/a\/not/, code: "unsupported_schema", param: "response_format.json_schema.schema" }],
  ["chat: unknown response_format", { path: C, body: chat({ response_format: { type: "xml" } }), status: 400, message: /^response_format\.type: unknown type/ }],
  ["chat: unknown reasoning_effort", { path: C, body: chat({ reasoning_effort: "extreme" }), status: 400, message: /^reasoning_effort: / }],
  ["chat: top_logprobs without logprobs", { path: C, body: chat({ top_logprobs: 3 }), status: 400, message: /^top_logprobs: top_logprobs needs logprobs/ }],
  ["chat: top_logprobs too many", { path: C, body: chat({ logprobs: true, top_logprobs: 50 }), status: 400, message: /^top_logprobs: Too big/ }],
  ["chat: unknown model", { path: C, body: chat({ model: "gpt-9" }), status: 404, message: /model 'gpt-9' not found; this server serves: m, v/, code: "model_not_found", param: "model" }],
  ["chat: stream is a string", { path: C, body: chat({ stream: "yes" }), status: 400, message: /^stream: expected boolean/ }],
  ["chat: presence_penalty out of range", { path: C, body: chat({ presence_penalty: 3 }), status: 400, message: /^presence_penalty: Too big/ }],
  ["chat: fractional seed", { path: C, body: chat({ seed: 1.5 }), status: 400, message: /^seed: expected int/ }],
  ["chat: data URL that is not base64", { path: C, body: chat({ model: "v", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:image/png,abc" } }] }] }), status: 400, message: /^messages\.0\.content\.0\.image_url\.url: expected a base64 data URL/ }],
  ["chat: image from an ftp URL", { path: C, body: chat({ model: "v", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "ftp://x/y.png" } }] }] }), status: 400, message: /expected an http\(s\) URL or a base64 data URL/ }],
  ["chat: image in a system message", { path: C, body: chat({ messages: [{ role: "system", content: [{ type: "image_url", image_url: { url: "https://x" } }] }] }), status: 400, message: /^messages\.0\.content\.0\.type: / }],
  // Responses
  ["responses: broken JSON", { path: R, body: "{", status: 400, message: /not valid JSON/ }],
  ["responses: no input", { path: R, body: { model: "m" }, status: 400, message: /^input: required/, param: "input" }],
  ["responses: input is a number", { path: R, body: resp({ input: 5 }), status: 400, message: /^input: expected string or array, received number/ }],
  ["responses: function_call without call_id", { path: R, body: resp({ input: [{ type: "function_call", name: "f", arguments: "{}" }] }), status: 400, message: /^input\.0\.call_id: required/ }],
  ["responses: message with unknown role", { path: R, body: resp({ input: [{ type: "message", role: "robot", content: "x" }] }), status: 400, message: /^input\.0\.role: / }],
  ["responses: image by file id", { path: R, body: resp({ input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] }), status: 400, message: /does not accept images/ }],
  ["responses: input_file", { path: R, body: resp({ input: [{ role: "user", content: [{ type: "input_file" }] }] }), status: 400, message: /^input\.0\.content\.0\.type: input_file content is not supported/ }],
  ["responses: unknown previous_response_id", { path: R, body: resp({ previous_response_id: "resp_x" }), status: 404, message: /response 'resp_x' not found/, param: "previous_response_id" }],
  ["responses: json_schema without schema", { path: R, body: resp({ text: { format: { type: "json_schema", name: "x" } } }), status: 400, message: /^text\.format\.schema: required/ }],
  ["responses: schema with an unknown type", { path: R, body: resp({ text: { format: { type: "json_schema", name: "x", schema: { type: "strin" } } } }), status: 400, message: /^text\.format\.schema: .*unknown type "strin"/, code: "unsupported_schema", param: "text.format.schema" }],
  ["responses: background", { path: R, body: resp({ background: true }), status: 400, message: /^background: background responses are not supported/ }],
  ["responses: function tool without name", { path: R, body: resp({ tools: [{ type: "function", parameters: {} }] }), status: 400, message: /^tools\.0\.name: required/ }],
  ["responses: forced function without name", { path: R, body: resp({ tool_choice: { type: "function" } }), status: 400, message: /^tool_choice\.name: required/ }],
  ["responses: unknown model", { path: R, body: resp({ model: "o9" }), status: 404, message: /model 'o9' not found/ }],
  ["responses: max_output_tokens negative", { path: R, body: resp({ max_output_tokens: -5 }), status: 400, message: /^max_output_tokens: Too small/ }],
  ["responses: retrieve unknown id", { path: `${R}/resp_missing`, method: "GET", status: 404, message: /response 'resp_missing' not found/ }],
  // Anthropic Messages
  ["messages: broken JSON", { path: A, body: "{bad", status: 400, message: /not valid JSON/ }],
  ["messages: no max_tokens", { path: A, body: { model: "m", messages: user }, status: 400, message: /^max_tokens: required/ }],
  ["messages: negative max_tokens", { path: A, body: msgs({ max_tokens: -1 }), status: 400, message: /^max_tokens: Too small/ }],
  ["messages: no messages", { path: A, body: { model: "m", max_tokens: 5 }, status: 400, message: /^messages: required/ }],
  ["messages: unknown role inside messages", { path: A, body: msgs({ messages: [{ role: "tool", content: "x" }] }), status: 400, message: /^messages\.0\.role: / }],
  ["messages: text block without text", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "text" }] }] }), status: 400, message: /^messages\.0\.content\.0\.text: required/ }],
  ["messages: base64 image without data", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png" } }] }] }), status: 400, message: /^messages\.0\.content\.0\.source\.data: required/ }],
  ["messages: image for a text-only model", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] }), status: 400, message: /does not accept images/ }],
  ["messages: image that is not base64", { path: A, body: msgs({ model: "v", messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "!!!" } }] }] }), status: 400, message: /^messages\.0\.content\.0\.source\.data: image data is not valid base64/ }],
  ["messages: image by file id", { path: A, body: msgs({ model: "v", messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f" } }] }] }), status: 400, message: /only base64 and url image sources/ }],
  ["messages: tool_result without tool_use_id", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "tool_result", content: "x" }] }] }), status: 400, message: /^messages\.0\.content\.0\.tool_use_id: required/ }],
  ["messages: tool_use in a user message", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }] }), status: 400, message: /tool_use blocks belong in assistant messages/ }],
  ["messages: document block", { path: A, body: msgs({ messages: [{ role: "user", content: [{ type: "document", source: {} }] }] }), status: 400, message: /document blocks are not supported/ }],
  ["messages: tool without input_schema", { path: A, body: msgs({ tools: [{ name: "f" }] }), status: 400, message: /^tools\.0\.input_schema: required/ }],
  ["messages: forced tool without name", { path: A, body: msgs({ tools: [antTool], tool_choice: { type: "tool" } }), status: 400, message: /^tool_choice\.name: required/ }],
  ["messages: forced tool not in tools", { path: A, body: msgs({ tools: [antTool], tool_choice: { type: "tool", name: "g" } }), status: 400, message: /^tool_choice\.name: names 'g'/ }],
  ["messages: unknown thinking type", { path: A, body: msgs({ thinking: { type: "sometimes" } }), status: 400, message: /^thinking\.type: unknown type/ }],
  ["messages: temperature above 1", { path: A, body: msgs({ temperature: 1.5 }), status: 400, message: /^temperature: Too big/ }],
  ["messages: unknown model", { path: A, body: msgs({ model: "claude-x" }), status: 404, message: /model 'claude-x' not found/ }],
  ["messages: output schema keyword a grammar cannot enforce", { path: A, body: msgs({ output_config: { format: { type: "json_schema", schema: { type: "array", uniqueItems: true } } } }), status: 400, message: /^output_config\.format\.schema: .*"uniqueItems"/ }],
  ["messages: stop_sequences is a string", { path: A, body: msgs({ stop_sequences: "x" }), status: 400, message: /^stop_sequences: expected array/ }],
  ["messages: system is a number", { path: A, body: msgs({ system: 5 }), status: 400, message: /^system: expected string or array/ }],
  ["count_tokens: no messages", { path: `${A}/count_tokens`, body: { model: "m" }, status: 400, message: /^messages: required/ }],
  ["count_tokens: unknown model", { path: `${A}/count_tokens`, body: { model: "x", messages: user }, status: 404, message: /model 'x' not found/ }],
  // Routing
  ["an unknown endpoint", { path: "/v1/embeddings", body: {}, status: 404, message: /no such endpoint: POST \/v1\/embeddings/ }],
  ["GET on a POST endpoint", { path: A, method: "GET", status: 404, message: /no such endpoint: GET \/v1\/messages/ }],
];

async function send(row: Row): Promise<Response> {
  const method = row.method ?? "POST";
  const body = row.body === undefined ? undefined : typeof row.body === "string" ? row.body : JSON.stringify(row.body);
  return app.handle(new Request(`http://localhost${row.path}`, { method, body, headers: body === undefined ? {} : { "content-type": "application/json" } }));
}

describe("malformed requests", () => {
  test("there are at least 50 of them", () => expect(rows.length).toBeGreaterThanOrEqual(50));

  test.each(rows)("%s", async (_, row) => {
    const r = await send(row);
    expect(r.status).toBe(row.status);
    expect(r.headers.get("content-type")).toContain("application/json");
    const body = (await r.json()) as Record<string, unknown>;
    if (row.path.startsWith("/v1/messages")) {
      expect(body).toEqual({ type: "error", error: { type: row.status === 404 ? "not_found_error" : "invalid_request_error", message: expect.stringMatching(row.message) } });
    } else {
      const error = body.error as Record<string, unknown>;
      expect(Object.keys(error).sort()).toEqual(["code", "message", "param", "type"]);
      expect(error.type).toBe("invalid_request_error");
      expect(error.message).toMatch(row.message);
      if (row.param !== undefined) expect(error.param).toBe(row.param);
      if (row.code !== undefined) expect(error.code).toBe(row.code);
    }
  });

  test("the server still serves every surface afterwards", async () => {
    for (const [path, body] of [
      [C, chat({})],
      [R, resp({})],
      [A, msgs({})],
    ] as const) {
      const r = await app.handle(new Request(`http://localhost${path}`, { method: "POST", body: JSON.stringify(body) }));
      expect(r.status).toBe(200);
    }
  });

  test("a body without content-type, or with a wrong one, is still read as JSON", async () => {
    const body = JSON.stringify(msgs({}));
    expect((await app.handle(new Request(`http://localhost${A}`, { method: "POST", body }))).status).toBe(200);
    expect((await app.handle(new Request(`http://localhost${A}?beta=true`, { method: "POST", body, headers: { "content-type": "text/plain" } }))).status).toBe(200);
  });
});
