// Malformed requests by the hundred, on the embedded model (its real tokenizer, chat template and engine), across the
// four surfaces that take a conversation: /v1/chat/completions, /v1/responses, /v1/messages and
// /v1/messages/count_tokens. Each row is one request shape and the status it must get (400, or 404 for a model that is
// not served); every answer is in its surface's error shape, names the field at fault where there is one, and none is
// a 500. Rows are generated from a few tables: body-level shapes, every sampling and output field with values out of
// its range or of the wrong type, conversation shapes (empty, skipped-only, wrong types), tools and output formats,
// and prompts too long for the context. test/unit/server/malformed.test.ts checks exact messages for a hand-picked set.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { LoadedModel } from "../../src/models/load.ts";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createApp } from "../../src/server/app.ts";

const MODEL = "splash-tiny";
const VOCAB = 6107; // splash-tiny's tokenizer

type Surface = "chat" | "responses" | "messages" | "count_tokens";
const PATHS: Record<Surface, string> = {
  chat: "/v1/chat/completions",
  responses: "/v1/responses",
  messages: "/v1/messages",
  count_tokens: "/v1/messages/count_tokens",
};
const SURFACES = Object.keys(PATHS) as Surface[];
const anthropic = (s: Surface) => s === "messages" || s === "count_tokens";

// A valid body of each surface; rows replace or delete its fields.
const BASE: Record<Surface, Record<string, unknown>> = {
  chat: { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "hi" }] },
  responses: { model: MODEL, max_output_tokens: 4, input: "hi" },
  messages: { model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "hi" }] },
  count_tokens: { model: MODEL, messages: [{ role: "user", content: "hi" }] },
};

type Row = {
  name: string;
  surface: Surface;
  body: unknown; // a string is sent as it is (broken JSON); anything else as JSON
  status: 400 | 404;
  field?: string; // the field the message (and OpenAI's `param`) must name
};

const rows: Row[] = [];
const add = (surface: Surface, name: string, body: unknown, status: 400 | 404, field?: string) => rows.push({ name: `${surface}: ${name}`, surface, body, status, field });
const withField = (surface: Surface, field: string, value: unknown) => ({ ...BASE[surface], [field]: value });
const without = (surface: Surface, field: string) => Object.fromEntries(Object.entries(BASE[surface]).filter(([k]) => k !== field));

// ---- the body itself -------------------------------------------------------------------------------------------
for (const s of SURFACES) {
  for (const text of ["{bad", "", "{", "[", '{"model": }', "nul", '{"model": "splash-tiny",}', "\u0000", '{"a":1}{"b":2}']) add(s, `broken JSON ${JSON.stringify(text)}`, text, 400);
  for (const body of [[], [1, 2], "\"hi\"", 5, null, true]) add(s, `body ${JSON.stringify(body)}`, typeof body === "string" ? body : JSON.stringify(body), 400, "body");
  add(s, "empty object", {}, 400, "model");
  add(s, "no model", without(s, "model"), 400, "model");
  for (const model of [5, null, [], {}, true]) add(s, `model ${JSON.stringify(model)}`, withField(s, "model", model), 400, "model");
  for (const model of ["gpt-9", "", "splash-tiny ", "SPLASH-TINY"]) add(s, `unknown model ${JSON.stringify(model)}`, withField(s, "model", model), 404, "model");
}

// ---- sampling and output fields ----------------------------------------------------------------------------------
// [field, surfaces that have it, bad values]; 1e309 is sent as JSON text (it parses to Infinity).
const INF = "__INF__";
const fields: [string, Surface[], unknown[]][] = [
  ["temperature", ["chat", "responses", "messages"], [-1, -0.001, 2.5, 1e308, INF, "hot", [], {}, true]],
  ["top_p", ["chat", "responses", "messages"], [-0.1, 1.5, 1e308, INF, "x", [], true]],
  ["top_k", ["chat", "responses", "messages"], [1e12, 2 ** 31, -2, -1e12, 1.5, "5", [], VOCAB + 1, 100000]],
  ["min_p", ["chat", "responses", "messages"], [-1, 1.01, INF, "x"]],
  ["presence_penalty", ["chat", "responses"], [2.01, -3, 1e308, INF, "x", []]],
  ["frequency_penalty", ["chat", "responses"], [2.01, -3, 1e308, INF, "x"]],
  ["repetition_penalty", ["chat", "responses"], [0, -1, 1e-308, 0.001, 1e308, 101, INF, "x"]],
  ["seed", ["chat", "responses", "messages"], [1.5, "x", 1e300, -1e300, [], {}]],
  ["max_tokens", ["chat", "messages"], [0, -1, 1.5, "x", 1e300, [], INF]],
  ["max_completion_tokens", ["chat"], [0, -5, 2.5, "many"]],
  ["max_output_tokens", ["responses"], [0, -5, 2.5, "many", 1e300]],
  ["top_logprobs", ["chat", "responses"], [21, -1, 1.5, "x", 1e12]],
  ["logprobs", ["chat"], ["yes", 1, []]],
  ["n", ["chat"], [2, 0, -1, "1"]],
  ["stream", ["chat", "responses", "messages"], ["yes", 1, []]],
  ["stop", ["chat"], [5, [1], [null], Array.from({ length: 65 }, (_, i) => `s${i}`), {}]],
  ["stop_sequences", ["messages"], ["x", [1], Array.from({ length: 65 }, (_, i) => `s${i}`), {}]],
  ["reasoning_effort", ["chat"], ["extreme", 5]],
  ["parallel_tool_calls", ["chat", "responses"], ["yes", 1]],
  ["stream_options", ["chat"], ["x", { include_usage: "yes" }]],
  ["instructions", ["responses"], [5, [], {}]],
  ["background", ["responses"], [true, "x"]],
  ["store", ["responses"], ["yes"]],
  ["metadata", ["responses"], ["x", 5]],
  ["reasoning", ["responses"], ["x", { effort: "extreme" }]],
  ["thinking", ["messages", "count_tokens"], ["x", { type: "sometimes" }, { type: "enabled", budget_tokens: 1.5 }]],
  ["system", ["messages", "count_tokens"], [5, [{ type: "text" }], [{ type: "text", text: 5 }]]],
  ["chat_template_kwargs", ["chat"], ["x", { enable_thinking: "no" }]],
  ["logit_bias", ["chat"], ["x", [5], { abc: 1 }, { "1.5": 1 }, { "-1": 1 }, { [VOCAB]: 1 }, { 99999999999: 1 }, { 5: 101 }, { 5: -101 }, { 5: "x" }, { 5: null }]],
];
const INF_FIELD_TEXT = (surface: Surface, field: string) => JSON.stringify(withField(surface, field, 12345.678)).replace("12345.678", "1e309");
for (const [field, surfaces, values] of fields) {
  for (const s of surfaces) {
    for (const v of values) {
      const body = v === INF ? INF_FIELD_TEXT(s, field) : withField(s, field, v);
      add(s, `${field} ${v === INF ? "1e309" : JSON.stringify(v)?.slice(0, 40)}`, body, 400, field);
    }
  }
}
add("chat", "top_logprobs without logprobs", withField("chat", "top_logprobs", 3), 400, "top_logprobs");
add("messages", "no max_tokens", without("messages", "max_tokens"), 400, "max_tokens");

// ---- conversations ---------------------------------------------------------------------------------------------
const messagesBad: [string, unknown, string][] = [
  ["messages missing", undefined, "messages"],
  ["messages a string", "hi", "messages"],
  ["messages a number", 5, "messages"],
  ["messages an object", { role: "user", content: "hi" }, "messages"],
  ["messages empty", [], "messages"],
  ["message null", [null], "messages.0"],
  ["message a string", ["hi"], "messages.0"],
  ["message without role", [{ content: "hi" }], "messages.0.role"],
  ["message with an unknown role", [{ role: "robot", content: "hi" }], "messages.0.role"],
  ["message role a number", [{ role: 1, content: "hi" }], "messages.0.role"],
  ["content a number", [{ role: "user", content: 5 }], "messages.0.content"],
  ["content an object", [{ role: "user", content: { text: "hi" } }], "messages.0.content"],
  ["content part null", [{ role: "user", content: [null] }], "messages.0.content.0"],
  ["content part of an unknown type", [{ role: "user", content: [{ type: "video" }] }], "messages.0.content.0"],
  ["text part without text", [{ role: "user", content: [{ type: "text" }] }], "messages.0.content.0.text"],
  ["text part with a number", [{ role: "user", content: [{ type: "text", text: 5 }] }], "messages.0.content.0.text"],
  ["second message broken", [{ role: "user", content: "hi" }, { role: "user" }], "messages.1.content"],
];
for (const s of ["chat", "messages", "count_tokens"] as Surface[]) {
  for (const [name, value, field] of messagesBad) {
    if (s !== "chat" && name === "content part of an unknown type") continue; // Anthropic drops unknown blocks
    add(s, name, value === undefined ? without(s, "messages") : withField(s, "messages", value), 400, field);
  }
}
// chat only
const chatBad: [string, unknown, string][] = [
  ["image without url", [{ role: "user", content: [{ type: "image_url", image_url: {} }] }], "messages.0.content.0.image_url.url"],
  ["image for a text-only model", [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://x/y.png" } }] }], "messages.0.content.0"],
  ["audio part", [{ role: "user", content: [{ type: "input_audio" }] }], "messages.0.content.0.type"],
  ["file part", [{ role: "user", content: [{ type: "file" }] }], "messages.0.content.0.type"],
  ["tool message without tool_call_id", [{ role: "user", content: "hi" }, { role: "tool", content: "x" }], "messages.1.tool_call_id"],
  ["tool call without function", [{ role: "user", content: "hi" }, { role: "assistant", tool_calls: [{ id: "c" }] }], "messages.1.tool_calls.0.function"],
  ["tool call arguments an object", [{ role: "user", content: "hi" }, { role: "assistant", tool_calls: [{ id: "c", function: { name: "f", arguments: {} } }] }], "messages.1.tool_calls.0.function.arguments"],
  ["assistant refusal without text", [{ role: "assistant", content: [{ type: "refusal" }] }], "messages.0.content.0.refusal"],
  ["system message with an image", [{ role: "system", content: [{ type: "image_url", image_url: { url: "https://x" } }] }], "messages.0.content.0.type"],
];
for (const [name, value, field] of chatBad) add("chat", name, withField("chat", "messages", value), 400, field);
// Anthropic only (messages and count_tokens)
const anthropicBad: [string, unknown, string][] = [
  ["empty content", [{ role: "user", content: [] }], "messages.0.content"],
  ["only a web_search_tool_result", [{ role: "user", content: [{ type: "web_search_tool_result", tool_use_id: "x", content: [] }] }], "messages"],
  ["only server tool blocks", [{ role: "user", content: [{ type: "server_tool_use", id: "s", name: "web_search", input: {} }, { type: "redacted_thinking", data: "x" }] }], "messages"],
  ["empty system turn", [{ role: "system", content: [] }, { role: "user", content: "hi" }], "messages.0.content"],
  ["image without source", [{ role: "user", content: [{ type: "image" }] }], "messages.0.content.0.source"],
  ["base64 image without data", [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png" } }] }], "messages.0.content.0.source.data"],
  ["image for a text-only model", [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }], "messages.0.content.0"],
  ["tool_result without tool_use_id", [{ role: "user", content: [{ type: "tool_result", content: "x" }] }], "messages.0.content.0.tool_use_id"],
  ["tool_use in a user turn", [{ role: "user", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }], "messages.0.content.0.type"],
  ["thinking in a user turn", [{ role: "user", content: [{ type: "thinking", thinking: "x" }] }], "messages.0.content.0.type"],
  ["document block", [{ role: "user", content: [{ type: "document", source: {} }] }], "messages.0.content.0.type"],
  ["tool_use without id", [{ role: "user", content: "hi" }, { role: "assistant", content: [{ type: "tool_use", name: "f", input: {} }] }], "messages.1.content.0.id"],
  ["image block in a system turn", [{ role: "system", content: [{ type: "image", source: { type: "url", url: "https://x" } }] }, { role: "user", content: "hi" }], "messages.0.content.0"],
];
for (const s of ["messages", "count_tokens"] as Surface[]) for (const [name, value, field] of anthropicBad) add(s, name, withField(s, "messages", value), 400, field);
// Responses
const inputBad: [string, unknown, string][] = [
  ["input missing", undefined, "input"],
  ["input a number", 5, "input"],
  ["input an object", { role: "user", content: "hi" }, "input"],
  ["input empty", [], "input"],
  ["input only a web_search_call", [{ type: "web_search_call", id: "ws", status: "completed" }], "input"],
  ["input only skipped kinds", [{ type: "file_search_call", id: "f" }, { type: "item_reference", id: "r" }, { type: "mcp_list_tools" }], "input"],
  ["item null", [null], "input.0"],
  ["item a string", ["hi"], "input.0"],
  ["message with an unknown role", [{ type: "message", role: "robot", content: "x" }], "input.0.role"],
  ["message content a number", [{ role: "user", content: 5 }], "input.0.content"],
  ["content part of an unknown type", [{ role: "user", content: [{ type: "video" }] }], "input.0.content.0"],
  ["input_text without text", [{ role: "user", content: [{ type: "input_text" }] }], "input.0.content.0.text"],
  ["input_file", [{ role: "user", content: [{ type: "input_file" }] }], "input.0.content.0.type"],
  ["image by file id", [{ role: "user", content: [{ type: "input_image", file_id: "f" }] }], "input.0.content.0"],
  ["function_call without call_id", [{ type: "function_call", name: "f", arguments: "{}" }], "input.0.call_id"],
  ["function_call arguments an object", [{ type: "function_call", call_id: "c", name: "f", arguments: {} }], "input.0.arguments"],
  ["function_call_output without output", [{ type: "function_call_output", call_id: "c" }], "input.0.output"],
  ["custom_tool_call without input", [{ type: "custom_tool_call", call_id: "c", name: "f" }], "input.0.input"],
  ["local_shell_call without action", [{ type: "local_shell_call", call_id: "c" }], "input.0.action"],
  ["reasoning summary a string", [{ type: "reasoning", summary: "x" }], "input.0.summary"],
];
for (const [name, value, field] of inputBad) add("responses", name, value === undefined ? without("responses", "input") : withField("responses", "input", value), 400, field);

// ---- tools and output formats ------------------------------------------------------------------------------------
const chatTool = { type: "function", function: { name: "f", parameters: { type: "object" } } };
const antTool = { name: "f", input_schema: { type: "object" } };
const respTool = { type: "function", name: "f", parameters: { type: "object" } };
const toolRows: [Surface, string, Record<string, unknown>, string][] = [
  ["chat", "tools a string", { tools: "x" }, "tools"],
  ["chat", "tool without function", { tools: [{ type: "function" }] }, "tools.0.function"],
  ["chat", "tool with an empty name", { tools: [{ type: "function", function: { name: "" } }] }, "tools.0.function.name"],
  ["chat", "tool parameters a string", { tools: [{ type: "function", function: { name: "f", parameters: "x" } }] }, "tools.0.function.parameters"],
  ["chat", "tool of an unknown type", { tools: [{ type: "retrieval", function: { name: "f" } }] }, "tools.0.type"],
  ["chat", "tool_choice an unknown word", { tools: [chatTool], tool_choice: "sometimes" }, "tool_choice"],
  ["chat", "tool_choice names a missing tool", { tools: [chatTool], tool_choice: { type: "function", function: { name: "g" } } }, "tool_choice.function.name"],
  ["chat", "tool_choice required without tools", { tool_choice: "required" }, "tool_choice"],
  ["chat", "response_format of an unknown type", { response_format: { type: "xml" } }, "response_format.type"],
  ["chat", "json_schema without a name", { response_format: { type: "json_schema", json_schema: { schema: {} } } }, "response_format.json_schema.name"],
  ["chat", "schema keyword a grammar cannot enforce", { response_format: { type: "json_schema", json_schema: { name: "x", schema: { not: {} } } } }, "response_format.json_schema.schema"],
  ["chat", "schema with an unknown type", { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "strin" } } } }, "response_format.json_schema.schema"],
  ["responses", "tools a string", { tools: "x" }, "tools"],
  ["responses", "function tool without a name", { tools: [{ type: "function", parameters: {} }] }, "tools.0.name"],
  ["responses", "custom tool with an empty name", { tools: [{ type: "custom", name: "" }] }, "tools.0.name"],
  ["responses", "forced function without a name", { tools: [respTool], tool_choice: { type: "function" } }, "tool_choice.name"],
  ["responses", "forced function not in tools", { tools: [respTool], tool_choice: { type: "function", name: "g" } }, "tool_choice.name"],
  ["responses", "tool_choice required without tools", { tool_choice: "required" }, "tool_choice"],
  ["responses", "text.format of an unknown type", { text: { format: { type: "xml" } } }, "text.format.type"],
  ["responses", "json_schema without schema", { text: { format: { type: "json_schema", name: "x" } } }, "text.format.schema"],
  ["responses", "schema keyword a grammar cannot enforce", { text: { format: { type: "json_schema", name: "x", schema: { type: "array", uniqueItems: true } } } }, "text.format.schema"],
];
for (const s of ["messages", "count_tokens"] as Surface[]) {
  toolRows.push(
    [s, "tools a string", { tools: "x" }, "tools"],
    [s, "tool without input_schema", { tools: [{ name: "f" }] }, "tools.0.input_schema"],
    [s, "tool with an empty name", { tools: [{ name: "", input_schema: {} }] }, "tools.0.name"],
    [s, "tool input_schema a string", { tools: [{ name: "f", input_schema: "x" }] }, "tools.0.input_schema"],
    [s, "forced tool without a name", { tools: [antTool], tool_choice: { type: "tool" } }, "tool_choice.name"],
    [s, "forced tool not in tools", { tools: [antTool], tool_choice: { type: "tool", name: "g" } }, "tool_choice.name"],
    [s, "any without tools", { tool_choice: { type: "any" } }, "tool_choice"],
    [s, "tool_choice of an unknown type", { tools: [antTool], tool_choice: { type: "sometimes" } }, "tool_choice.type"],
    [s, "output format of an unknown type", { output_config: { format: { type: "xml" } } }, "output_config.format.type"],
    [s, "beta output_format without schema", { output_format: { type: "json_schema" } }, "output_format.schema"],
  );
}
toolRows.push(["messages", "output schema a grammar cannot enforce", { output_config: { format: { type: "json_schema", schema: { type: "array", uniqueItems: true } } } }, "output_config.format.schema"]);
for (const [s, name, extra, field] of toolRows) add(s, name, { ...BASE[s], ...extra }, 400, field);
add("responses", "unknown previous_response_id", withField("responses", "previous_response_id", "resp_missing"), 404, "previous_response_id");

// ---- prompts too long for the context (splash-tiny with an f32 KV cache at this budget: 26048 tokens) ----------
// 2 MB is refused by its size before it is tokenized, on every surface; 40K tokens within the size bound are refused
// once tokenized, when generating (count_tokens counts them).
const huge = "word ".repeat(400_000);
const long = "word ".repeat(20_000);
for (const [name, text] of [["a 2 MB prompt", huge], ["a prompt over the context", long]] as const) {
  add("chat", name, withField("chat", "messages", [{ role: "user", content: text }]), 400);
  add("responses", name, withField("responses", "input", text), 400);
  add("messages", name, withField("messages", "messages", [{ role: "user", content: text }]), 400);
}
add("count_tokens", "a 2 MB prompt", withField("count_tokens", "messages", [{ role: "user", content: huge }]), 400);

let loaded: LoadedModel;
let app: ReturnType<typeof createApp>;
beforeAll(async () => {
  loaded = await loadModel(resolveModel(MODEL), { threads: 2, kvBudget: 64 << 20, kvType: "f32", draft: "none" });
  app = createApp({ models: [loaded.chat] });
});
afterAll(() => loaded.close());

async function send(row: Row): Promise<Response> {
  const body = typeof row.body === "string" ? row.body : JSON.stringify(row.body);
  return app.handle(new Request(`http://localhost${PATHS[row.surface]}`, { method: "POST", body, headers: { "content-type": "application/json" } }));
}

const results = new Map<string, boolean>();

describe("malformed requests on the four conversation surfaces", () => {
  test("there are at least 300 of them, on every surface", () => {
    expect(rows.length).toBeGreaterThanOrEqual(300);
    for (const s of SURFACES) expect(rows.filter((r) => r.surface === s).length).toBeGreaterThanOrEqual(50);
    expect(new Set(rows.map((r) => r.name)).size).toBe(rows.length);
  });

  test.each(rows.map((r) => [r.name, r] as const))("%s", async (_, row) => {
    results.set(row.name, false);
    const r = await send(row);
    const text = await r.text();
    expect({ status: r.status, text: text.slice(0, 300) }).toEqual({ status: row.status, text: expect.any(String) });
    expect(r.headers.get("content-type")).toContain("application/json");
    const body = JSON.parse(text) as Record<string, unknown>;
    let message: string;
    if (anthropic(row.surface)) {
      expect(Object.keys(body).sort()).toEqual(["error", "type"]);
      expect(body.type).toBe("error");
      const error = body.error as Record<string, unknown>;
      expect(Object.keys(error).sort()).toEqual(["message", "type"]);
      expect(error.type).toBe(row.status === 404 ? "not_found_error" : "invalid_request_error");
      message = error.message as string;
    } else {
      const error = body.error as Record<string, unknown>;
      expect(Object.keys(error).sort()).toEqual(["code", "message", "param", "type"]);
      expect(error.type).toBe("invalid_request_error");
      message = error.message as string;
      if (row.field) expect(error.param as string).toStartWith(row.field);
    }
    expect(message.length).toBeGreaterThan(0);
    if (row.field && anthropic(row.surface)) expect(message).toContain(row.field); // OpenAI's shape names it in `param`
    results.set(row.name, true);
  });

  test("the count and how many passed", () => {
    const passed = [...results.values()].filter(Boolean).length;
    console.log(`malformed requests: ${rows.length} shapes (${SURFACES.map((s) => `${s} ${rows.filter((r) => r.surface === s).length}`).join(", ")}), ${passed} right status and shape`);
    expect(passed).toBe(rows.length);
  });

  test("every surface still serves afterwards", async () => {
    for (const s of SURFACES) {
      const r = await app.handle(new Request(`http://localhost${PATHS[s]}`, { method: "POST", body: JSON.stringify(BASE[s]), headers: { "content-type": "application/json" } }));
      expect(r.status).toBe(200);
    }
  });
});
