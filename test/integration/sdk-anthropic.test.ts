// Anthropic Messages over real HTTP with the official `@anthropic-ai/sdk`, including a request shaped like the ones
// Claude Code sends (beta path, many unused fields, cache_control everywhere, thinking signatures in history).
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { rejection, startServer } from "../helpers/server.ts";

const model = new ScriptedModel({ id: "qwen-local", vision: true });
const server = startServer({ models: [model] });
const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
afterAll(() => server.stop());

const readTool = { name: "Read", description: "Read a file", input_schema: { type: "object" as const, properties: { path: { type: "string" } }, required: ["path"] } };

beforeEach(() => {
  model.script = () => say({ reasoning: "I should read it.", content: "Reading the file.", toolCalls: [{ id: "toolu_1", name: "Read", arguments: { path: "/tmp/a.txt" } }] });
  model.cachedPromptTokens = 0;
  model.overloadedFor = undefined;
});

describe("anthropic messages", () => {
  test("streaming finalMessage: thinking, text and tool_use blocks, stop_reason and usage with cache reads", async () => {
    model.cachedPromptTokens = 20;
    const final = await client.messages.stream({ model: "qwen-local", max_tokens: 1024, messages: [{ role: "user", content: "read /tmp/a.txt" }], tools: [readTool], thinking: { type: "enabled", budget_tokens: 512 } }).finalMessage();
    expect(final.role).toBe("assistant");
    expect(final.id).toStartWith("msg_");
    expect(final.content as unknown).toEqual([
      { type: "thinking", thinking: "I should read it.", signature: "splash" },
      { type: "text", text: "Reading the file.", citations: undefined },
      { type: "tool_use", id: "toolu_1", name: "Read", input: { path: "/tmp/a.txt" } },
    ]);
    expect(final.stop_reason).toBe("tool_use");
    const prompt = model.countTokens(model.lastCall.conversation);
    expect(final.usage).toMatchObject({ input_tokens: prompt - 20, cache_read_input_tokens: 20, output_tokens: 13 });
    expect(model.lastCall.conversation.thinking).toEqual({ enabled: true });
  });

  test("non-streaming create matches the streamed message", async () => {
    const r = await client.messages.create({ model: "qwen-local", max_tokens: 1024, messages: [{ role: "user", content: "read" }], tools: [readTool] });
    expect(r.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use"]);
    expect(r.content[2] as unknown).toEqual({ type: "tool_use", id: "toolu_1", name: "Read", input: { path: "/tmp/a.txt" } });
    expect(r.stop_reason).toBe("tool_use");
    expect(r.usage.output_tokens).toBe(13);
    // No `thinking` field: Anthropic's default is no thinking.
    expect(model.lastCall.conversation.thinking).toEqual({ enabled: false });
  });

  test("a Claude Code-shaped request on /v1/messages?beta=true, with the tool result round-tripped", async () => {
    model.script = () => say({ content: "The file says hello." });
    const stream = client.beta.messages.stream({
      model: "qwen-local",
      max_tokens: 32000,
      system: [
        { type: "text", text: "x-anthropic-billing-header: cc_version=2.1.88.a3f; cc_entrypoint=cli; cch=00000;" },
        { type: "text", text: "You are Claude Code.", cache_control: { type: "ephemeral" } },
      ],
      messages: [
        { role: "user", content: [{ type: "text", text: "read /tmp/a.txt", cache_control: { type: "ephemeral" } }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "I should read it.", signature: "EqQBCkYIBxgCKkA..." },
            { type: "text", text: "Reading." },
            { type: "tool_use", id: "toolu_1", name: "Read", input: { path: "/tmp/a.txt" } },
          ],
        },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "hello" }] }, { type: "text", text: "what does it say?" }] },
      ],
      tools: [{ ...readTool, cache_control: { type: "ephemeral" }, strict: true, defer_loading: false, eager_input_streaming: true } as never],
      thinking: { type: "adaptive" } as never,
      metadata: { user_id: "user_abc_account_def_session_ghi" },
      context_management: { edits: [{ type: "clear_thinking_20251015", keep: "all" }] } as never,
      output_config: { effort: "max" } as never,
      betas: ["claude-code-20250219", "adaptive-thinking-2026-01-28"],
    });
    const final = await stream.finalMessage();
    expect(final.content).toEqual([{ type: "text", text: "The file says hello.", citations: undefined } as never]);
    expect(final.stop_reason).toBe("end_turn");
    const c = model.lastCall.conversation;
    expect(c.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "You are Claude Code." }] },
      { role: "user", content: [{ type: "text", text: "read /tmp/a.txt" }] },
      { role: "assistant", content: [{ type: "text", text: "Reading." }], reasoning: "I should read it.", toolCalls: [{ id: "toolu_1", name: "Read", arguments: { path: "/tmp/a.txt" } }] },
      { role: "tool", toolCallId: "toolu_1", name: "Read", content: [{ type: "text", text: "hello" }] },
      { role: "user", content: [{ type: "text", text: "what does it say?" }] },
    ]);
    expect(c.thinking).toEqual({ enabled: true, effort: "xhigh" });
    expect(c.tools).toEqual([{ name: "Read", description: "Read a file", parameters: readTool.input_schema }]);
    expect(model.lastCall.options.maxTokens).toBe(model.maxOutputTokens);
  });

  test("images, stop sequences, sampling and tool_choice", async () => {
    model.script = () => say({ content: "a cat. END more" });
    const r = await client.messages.create({
      model: "qwen-local",
      max_tokens: 50,
      stop_sequences: ["END"],
      // Sampling fields the SDK's types no longer list; Claude Code versions and other clients send them.
      ...({ temperature: 0.2, top_k: 5, top_p: 0.9 } as object),
      tools: [readTool],
      tool_choice: { type: "tool", name: "Read", disable_parallel_tool_use: true },
      messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }, { type: "image", source: { type: "url", url: "https://example.com/a.png" } }, { type: "text", text: "what is it?" }] }],
    });
    expect(r.content).toEqual([{ type: "text", text: "a cat. " }] as never);
    const { conversation, options } = model.lastCall;
    expect(options).toMatchObject({ maxTokens: 50, stop: ["END"], sampling: { temperature: 0.2, topK: 5, topP: 0.9 } });
    expect(conversation.toolChoice).toEqual({ name: "Read" });
    expect(conversation.parallelToolCalls).toBe(false);
    const parts = conversation.messages[0]!.content as { type: string; source?: { kind: string; mediaType?: string; data?: Uint8Array; url?: string } }[];
    expect(parts[0]!.source).toMatchObject({ kind: "bytes", mediaType: "image/png" });
    expect([...parts[0]!.source!.data!].slice(0, 4)).toEqual([0x89, 0x50, 0x4e, 0x47]);
    expect(parts[1]!.source).toEqual({ kind: "url", url: "https://example.com/a.png" });
  });

  test("count_tokens and the models list", async () => {
    const counted = await client.messages.countTokens({ model: "qwen-local", system: "Be brief.", messages: [{ role: "user", content: "hello" }], tools: [readTool] });
    const expected = model.countTokens({
      messages: [
        { role: "system", content: [{ type: "text", text: "Be brief." }] },
        { role: "user", content: [{ type: "text", text: "hello" }] },
      ],
      tools: [{ name: "Read", description: "Read a file", parameters: readTool.input_schema }],
      toolChoice: "auto",
      parallelToolCalls: true,
      thinking: { enabled: false },
      responseFormat: { type: "text" },
    });
    expect(counted.input_tokens).toBe(expected);
    const models = await client.models.list();
    expect(models.data.map((m) => [m.id, m.type, m.display_name])).toEqual([["qwen-local", "model", "qwen-local"]]);
  });

  test("errors in Anthropic's shape: unknown model, overload, prompt too long, failure mid-stream", async () => {
    expect(await rejection(client.messages.create({ model: "claude-opus-9", max_tokens: 10, messages: [{ role: "user", content: "x" }] }))).toMatchObject({ status: 404, error: { type: "error", error: { type: "not_found_error" } } });

    model.overloadedFor = 7;
    const overloaded = await rejection(client.messages.stream({ model: "qwen-local", max_tokens: 10, messages: [{ role: "user", content: "x" }] }).finalMessage());
    expect(overloaded).toMatchObject({ status: 503, error: { type: "error", error: { type: "overloaded_error" } } });
    expect((overloaded as InstanceType<typeof Anthropic.APIError>).headers?.get("retry-after")).toBe("7");
    model.overloadedFor = undefined;

    const long = await rejection(client.messages.create({ model: "qwen-local", max_tokens: 10, messages: [{ role: "user", content: "y".repeat(200_000) }] }));
    expect(long).toMatchObject({ status: 400, error: { error: { type: "invalid_request_error", message: expect.stringMatching(/^prompt is too long: \d+ tokens > 32768 maximum$/) } } });

    model.script = () => [...say({ content: "partial" }), { type: "fail", error: new Error("out of cheese") }];
    const midway = await rejection(client.messages.stream({ model: "qwen-local", max_tokens: 10, messages: [{ role: "user", content: "x" }] }).finalMessage());
    expect(midway).toMatchObject({ error: { type: "error", error: { type: "api_error", message: expect.stringContaining("out of cheese") } } });
  });
});
