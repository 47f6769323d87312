// Request converters on their own: the corners the SDK tests do not reach (history shapes Codex and Claude Code
// send, degraded tools, thinking switches, defaults).
import { describe, expect, test } from "bun:test";
import { convertMessagesRequest } from "../../../src/api/anthropic/request.ts";
import { MessagesRequest } from "../../../src/api/anthropic/schema.ts";
import { convertChatRequest } from "../../../src/api/openai-chat/request.ts";
import { ChatRequest } from "../../../src/api/openai-chat/schema.ts";
import { convertResponsesRequest } from "../../../src/api/openai-responses/request.ts";
import { ResponsesRequest } from "../../../src/api/openai-responses/schema.ts";
import { DEFAULT_SAMPLING } from "../../../src/api/options.ts";
import { ScriptedModel } from "../../helpers/scripted-model.ts";

const model = new ScriptedModel({ id: "m", vision: true, maxOutputTokens: 1000 });
const ctx = { model, sampling: DEFAULT_SAMPLING, signal: new AbortController().signal };

describe("chat", () => {
  const convert = (body: unknown) => convertChatRequest(ChatRequest.parse(body), ctx);

  test("defaults fill what the request leaves out; -1 top_k means off; thinking off by chat_template_kwargs", () => {
    const { conversation, options } = convert({ model: "m", messages: [{ role: "user", content: "x" }], top_k: -1, chat_template_kwargs: { enable_thinking: false } });
    expect(options.sampling).toEqual({ ...DEFAULT_SAMPLING, topK: 0 });
    expect(options.maxTokens).toBe(1000);
    expect(options.logprobs).toBeUndefined();
    expect(conversation.thinking).toEqual({ enabled: false });
    expect(conversation).toMatchObject({ tools: [], toolChoice: "auto", parallelToolCalls: true, responseFormat: { type: "text" } });
  });

  test("assistant history: null content, refusals, arguments that are not JSON, reasoning under either name", () => {
    const { conversation } = convert({
      model: "m",
      messages: [
        { role: "user", content: "x" },
        { role: "assistant", content: null, reasoning: "r1", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "not json" } }] },
        { role: "tool", tool_call_id: "c", content: "out" },
        { role: "assistant", content: [{ type: "refusal", refusal: "no" }], reasoning_content: "r2" },
      ],
    });
    expect(conversation.messages.slice(1)).toEqual([
      { role: "assistant", content: [], reasoning: "r1", toolCalls: [{ id: "c", name: "f", arguments: "not json" }] },
      { role: "tool", toolCallId: "c", name: "f", content: [{ type: "text", text: "out" }] },
      { role: "assistant", content: [{ type: "text", text: "no" }], reasoning: "r2" },
    ]);
  });
});

describe("responses", () => {
  const convert = (body: unknown, history = []) => convertResponsesRequest(ResponsesRequest.parse(body), { ...ctx, history });

  test("Codex history: reasoning by summary, parallel calls in one message, shell calls, custom tools, unknown items", () => {
    const { conversation, input } = convert({
      model: "m",
      input: [
        { type: "message", role: "user", content: "fix it" },
        { type: "reasoning", summary: [{ type: "summary_text", text: "look first" }], encrypted_content: "opaque" },
        { type: "function_call", call_id: "a", name: "read", arguments: '{"p":1}' },
        { type: "function_call", call_id: "b", name: "read", arguments: '{"p":2}' },
        { type: "function_call_output", call_id: "a", output: [{ type: "input_text", text: "one" }] },
        { type: "function_call_output", call_id: "b", output: "two" },
        { type: "item_reference", id: "x" },
        { type: "local_shell_call", call_id: "s", status: "completed", action: { type: "exec", command: ["ls"] } },
        { type: "local_shell_call_output", id: "s", output: "a.txt" },
        { type: "custom_tool_call", call_id: "p", name: "apply_patch", input: "*** Begin Patch" },
        { type: "custom_tool_call_output", call_id: "p", output: "Done" },
      ],
      tool_choice: { type: "allowed_tools", mode: "auto", tools: [] },
    });
    expect(input).toEqual(conversation.messages);
    expect(conversation.toolChoice).toBe("auto");
    expect(conversation.messages.slice(1)).toEqual([
      { role: "assistant", content: [], reasoning: "look first", toolCalls: [{ id: "a", name: "read", arguments: { p: 1 } }, { id: "b", name: "read", arguments: { p: 2 } }] },
      { role: "tool", toolCallId: "a", name: "read", content: [{ type: "text", text: "one" }] },
      { role: "tool", toolCallId: "b", name: "read", content: [{ type: "text", text: "two" }] },
      { role: "assistant", content: [], toolCalls: [{ id: "s", name: "local_shell", arguments: { type: "exec", command: ["ls"] } }] },
      { role: "tool", toolCallId: "s", name: "local_shell", content: [{ type: "text", text: "a.txt" }] },
      { role: "assistant", content: [], toolCalls: [{ id: "p", name: "apply_patch", arguments: { input: "*** Begin Patch" } }] },
      { role: "tool", toolCallId: "p", name: "apply_patch", content: [{ type: "text", text: "Done" }] },
    ]);
  });

  test("reasoning then an assistant message fold into one message; effort none turns thinking off", () => {
    const { conversation } = convert({
      model: "m",
      instructions: "sys",
      reasoning: { effort: "none" },
      input: [
        { role: "user", content: "q" },
        { type: "reasoning", content: [{ type: "reasoning_text", text: "think" }], summary: [] },
        { role: "assistant", content: "a" },
      ],
    });
    expect(conversation.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "sys" }] },
      { role: "user", content: [{ type: "text", text: "q" }] },
      { role: "assistant", content: [{ type: "text", text: "a" }], reasoning: "think" },
    ]);
    expect(conversation.thinking).toEqual({ enabled: false });
  });
});

describe("anthropic", () => {
  const convert = (body: Record<string, unknown>) => convertMessagesRequest(MessagesRequest.parse({ model: "m", max_tokens: 10, ...body }), ctx);

  test("system-role messages among the turns (Claude Code sends them) become system messages of text", () => {
    const { conversation } = convert({
      system: [{ type: "text", text: "main" }],
      messages: [
        { role: "user", content: "hi" },
        { role: "system", content: [{ type: "text", text: "agent types: a, b" }] },
        { role: "user", content: "go" },
      ],
    });
    expect(conversation.messages.map((m) => m.role)).toEqual(["system", "user", "system", "user"]);
    expect(conversation.messages[2]!.content).toEqual([{ type: "text", text: "agent types: a, b" }]);
    expect(() => convert({ messages: [{ role: "system", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] })).toThrow(/text only/);
  });

  test("tool results with images and errors, string assistant content, dropped blocks and server tools", () => {
    const { conversation } = convert({
      system: "be nice",
      messages: [
        { role: "user", content: "look" },
        { role: "assistant", content: [{ type: "redacted_thinking", data: "xx" }, { type: "tool_use", id: "t", name: "shot", input: {} }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "t", is_error: true, content: [{ type: "text", text: "partial" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] },
        { role: "assistant", content: "done" },
      ],
      tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 3 }, { name: "shot", input_schema: { type: "object" } }],
      tool_choice: { type: "none" },
      output_config: { effort: "low" },
    });
    expect(conversation.tools.map((t) => t.name)).toEqual(["shot"]);
    expect(conversation.toolChoice).toBe("none");
    // output_config.effort alone does not turn thinking on.
    expect(conversation.thinking).toEqual({ enabled: false });
    const [system, user, assistant, tool, last] = conversation.messages;
    expect(system).toEqual({ role: "system", content: [{ type: "text", text: "be nice" }] });
    expect(user).toEqual({ role: "user", content: [{ type: "text", text: "look" }] });
    expect(assistant).toEqual({ role: "assistant", content: [], toolCalls: [{ id: "t", name: "shot", arguments: {} }] });
    expect(tool).toMatchObject({ role: "tool", toolCallId: "t", name: "shot", content: [{ type: "text", text: "partial" }, { type: "image", source: { kind: "bytes", mediaType: "image/png" } }] });
    expect(last).toEqual({ role: "assistant", content: [{ type: "text", text: "done" }] });
  });

  test("an empty system prompt adds no message; thinking disabled stays off", () => {
    const { conversation, options } = convert({ system: [], messages: [{ role: "user", content: "x" }], thinking: { type: "disabled" } });
    expect(conversation.messages).toEqual([{ role: "user", content: [{ type: "text", text: "x" }] }]);
    expect(conversation.thinking).toEqual({ enabled: false });
    expect(options.maxTokens).toBe(10);
  });
});
