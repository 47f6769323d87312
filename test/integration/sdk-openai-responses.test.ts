// OpenAI Responses over real HTTP with the official `openai` SDK: the full event sequence passes the SDK's strict
// accumulator, output items are complete, Codex-style input items convert, and previous_response_id works.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { rejection, startServer } from "../helpers/server.ts";

const model = new ScriptedModel({ id: "coder", vision: true, maxOutputTokens: 100 });
const server = startServer({ models: [model], storedResponses: 2 });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
afterAll(() => server.stop());

const shellTool = { type: "function" as const, name: "shell", description: "Run a command", parameters: { type: "object", properties: { command: { type: "array", items: { type: "string" } } } }, strict: false };

beforeEach(() => {
  model.script = () => say({ reasoning: "Need to list files.", content: "Listing them.", toolCalls: [{ id: "call_ls", name: "shell", arguments: { command: ["ls", "-la"] } }] });
});

describe("responses", () => {
  test("streaming: finalResponse has reasoning, message and function_call items with usage", async () => {
    const final = await client.responses.stream({ model: "coder", input: "list files", tools: [shellTool], reasoning: { effort: "high" } }).finalResponse();
    expect(final.status).toBe("completed");
    expect(final.id).toStartWith("resp_");
    expect(final.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);
    const [reasoning, message, call] = final.output as [OpenAI.Responses.ResponseReasoningItem, OpenAI.Responses.ResponseOutputMessage, OpenAI.Responses.ResponseFunctionToolCall];
    expect(reasoning.content).toEqual([{ type: "reasoning_text", text: "Need to list files." }]);
    expect(message.content[0]).toMatchObject({ type: "output_text", text: "Listing them." });
    expect(final.output_text).toBe("Listing them.");
    expect(call).toMatchObject({ call_id: "call_ls", name: "shell", arguments: '{"command":["ls","-la"]}', status: "completed" });
    expect(final.usage).toMatchObject({ output_tokens: 13, output_tokens_details: { reasoning_tokens: 5 }, input_tokens_details: { cached_tokens: 0 } });
    expect(model.lastCall.conversation.thinking).toEqual({ enabled: true, effort: "high" });
  });

  test("the raw event sequence: order, sequence numbers, item ids", async () => {
    const events: ResponseStreamEvent[] = [];
    for await (const e of await client.responses.create({ model: "coder", input: "list files", tools: [shellTool], stream: true })) events.push(e);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array(5).fill("response.reasoning_text.delta"),
      "response.reasoning_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      ...Array(4).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      ...Array(4).fill("response.function_call_arguments.delta"),
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const done = events.filter((e): e is OpenAI.Responses.ResponseOutputItemDoneEvent => e.type === "response.output_item.done");
    const ids = done.map((e) => e.item.id);
    expect(new Set(ids).size).toBe(3);
    const completed = events.at(-1) as OpenAI.Responses.ResponseCompletedEvent;
    expect(completed.response.output.map((o) => o.id)).toEqual(ids);
  });

  test("with reasoning.summary requested, thinking streams as a reasoning summary (what Codex displays)", async () => {
    const events: ResponseStreamEvent[] = [];
    const stream = client.responses.stream({ model: "coder", input: "list files", tools: [shellTool], reasoning: { effort: "medium", summary: "auto" } });
    stream.on("event", (e) => events.push(e));
    const final = await stream.finalResponse();
    expect(final.output[0]).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "Need to list files." }] });
    expect(events.filter((e) => e.type.startsWith("response.reasoning")).map((e) => e.type)).toEqual([
      "response.reasoning_summary_part.added",
      ...Array(5).fill("response.reasoning_summary_text.delta"),
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
    ]);
    // Sent back in the next request, the summary is the reasoning of that turn.
    await client.responses.create({ model: "coder", input: [{ role: "user", content: "x" }, final.output[0] as OpenAI.Responses.ResponseReasoningItem, { role: "assistant", content: "ok" }] });
    expect(model.lastCall.conversation.messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "ok" }], reasoning: "Need to list files." });
  });

  test("non-streaming create, and Codex-style input items become the conversation", async () => {
    model.script = () => say({ content: "Done." });
    const r = await client.responses.create({
      model: "coder",
      instructions: "You are a coding agent.",
      input: [
        { type: "message", role: "developer", content: [{ type: "input_text", text: "Sandbox: read-only." }] },
        { role: "user", content: "list files" },
        { type: "reasoning", id: "rs_1", summary: [], content: [{ type: "reasoning_text", text: "Use ls." }], encrypted_content: null },
        { type: "function_call", call_id: "call_1", name: "shell", arguments: '{"command":["ls"]}' },
        { type: "function_call_output", call_id: "call_1", output: "a.txt\nb.txt" },
        { type: "web_search_call", id: "ws_1", status: "completed" } as never,
        { type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text: "Two files.", annotations: [] }] },
        { role: "user", content: [{ type: "input_text", text: "thanks" }] },
      ],
      tools: [shellTool, { type: "web_search" } as never],
      store: false,
    });
    expect(r.output_text).toBe("Done.");
    expect((r as unknown as { store: boolean }).store).toBe(false);
    const c = model.lastCall.conversation;
    expect(c.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "You are a coding agent." }] },
      { role: "system", content: [{ type: "text", text: "Sandbox: read-only." }] },
      { role: "user", content: [{ type: "text", text: "list files" }] },
      { role: "assistant", content: [], reasoning: "Use ls.", toolCalls: [{ id: "call_1", name: "shell", arguments: { command: ["ls"] } }] },
      { role: "tool", toolCallId: "call_1", name: "shell", content: [{ type: "text", text: "a.txt\nb.txt" }] },
      { role: "assistant", content: [{ type: "text", text: "Two files." }] },
      { role: "user", content: [{ type: "text", text: "thanks" }] },
    ]);
    expect(c.tools.map((t) => t.name)).toEqual(["shell"]);
    expect(await rejection(client.responses.retrieve(r.id))).toMatchObject({ status: 404 });
  });

  test("previous_response_id continues a stored conversation; retrieve returns it; unknown ids are 404", async () => {
    const first = await client.responses.stream({ model: "coder", instructions: "Be terse.", input: "list files", tools: [shellTool] }).finalResponse();
    const stored = await client.responses.retrieve(first.id);
    expect(stored.id).toBe(first.id);
    expect(stored.output.map((o) => o.type)).toEqual(["reasoning", "message", "function_call"]);

    model.script = () => say({ content: "There are two files." });
    const second = await client.responses.create({ model: "coder", previous_response_id: first.id, input: [{ type: "function_call_output", call_id: "call_ls", output: "a b" }], tools: [shellTool] });
    expect(second.previous_response_id).toBe(first.id);
    expect(model.lastCall.conversation.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "list files" }] },
      { role: "assistant", content: [{ type: "text", text: "Listing them." }], reasoning: "Need to list files.", toolCalls: [{ id: "call_ls", name: "shell", arguments: { command: ["ls", "-la"] } }] },
      { role: "tool", toolCallId: "call_ls", name: "shell", content: [{ type: "text", text: "a b" }] },
    ]);

    const missing = await rejection(client.responses.create({ model: "coder", previous_response_id: "resp_nope", input: "x" }));
    expect(missing).toMatchObject({ status: 404, param: "previous_response_id", code: "response_not_found" });
    // The store keeps two: a third response pushes the first out.
    await client.responses.create({ model: "coder", input: "x" });
    expect(await rejection(client.responses.retrieve(first.id))).toMatchObject({ status: 404 });
  });

  test("custom tools are offered as functions and answered as custom_tool_call items", async () => {
    model.script = () => say({ toolCalls: [{ id: "call_p", name: "apply_patch", arguments: { input: "*** Begin Patch\n*** End Patch" } }] });
    const final = await client.responses.stream({ model: "coder", input: "patch it", tools: [{ type: "custom", name: "apply_patch", description: "Apply a patch" }] }).finalResponse();
    expect(final.output).toHaveLength(1);
    expect(final.output[0]).toMatchObject({ type: "custom_tool_call", call_id: "call_p", name: "apply_patch", input: "*** Begin Patch\n*** End Patch" });
    expect(model.lastCall.conversation.tools).toEqual([{ name: "apply_patch", description: "Apply a patch", parameters: { type: "object", properties: { input: { type: "string" } }, required: ["input"] } }]);
  });

  test("images, sampling and limits; max_output_tokens ends as incomplete", async () => {
    model.script = () => say({ content: "y".repeat(1000) });
    const final = await client.responses.stream({
      model: "coder",
      input: [{ role: "user", content: [{ type: "input_text", text: "describe" }, { type: "input_image", image_url: "data:image/jpeg;base64,/9j/AAEC", detail: "auto" }] }],
      max_output_tokens: 5,
      temperature: 0.1,
      top_p: 0.5,
    }).finalResponse();
    expect(final.status).toBe("incomplete");
    expect(final.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(final.output_text).toBe("y".repeat(20));
    const { conversation, options } = model.lastCall;
    expect(options).toMatchObject({ maxTokens: 5, sampling: { temperature: 0.1, topP: 0.5 } });
    const image = (conversation.messages[0]!.content as { type: string; source?: { kind: string; mediaType?: string; data?: Uint8Array } }[])[1]!;
    expect(image.source).toMatchObject({ kind: "bytes", mediaType: "image/jpeg" });
    expect([...image.source!.data!]).toEqual([0xff, 0xd8, 0xff, 0x00, 0x01, 0x02]);
  });

  test("text.format json_schema reaches the model; a schema a grammar cannot enforce is a 400 naming text.format.schema", async () => {
    await client.responses.create({ model: "coder", input: "x", text: { format: { type: "json_schema", name: "x", schema: { type: "object" } } } });
    expect(model.lastCall.conversation.responseFormat).toEqual({ type: "json_schema", name: "x", schema: { type: "object" } });
    const r = client.responses.create({ model: "coder", input: "x", text: { format: { type: "json_schema", name: "x", schema: { type: "object", patternProperties: {} } } } });
    expect(await rejection(r)).toMatchObject({ status: 400, param: "text.format.schema", code: "unsupported_schema" });
  });

  test("a failure mid-stream ends with response.failed", async () => {
    model.script = () => [...say({ content: "partial" }), { type: "fail", error: new Error("kernel panic") }];
    const events: ResponseStreamEvent[] = [];
    for await (const e of await client.responses.create({ model: "coder", input: "x", stream: true })) events.push(e);
    const failed = events.at(-1) as OpenAI.Responses.ResponseFailedEvent;
    expect(failed.type).toBe("response.failed");
    expect(failed.response.status).toBe("failed");
    expect(failed.response.error?.message).toContain("kernel panic");
  });
});
