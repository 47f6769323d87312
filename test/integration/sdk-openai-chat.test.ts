// OpenAI Chat Completions over real HTTP with the official `openai` SDK, against a scripted model: the SDK's strict
// stream accumulator must accept every stream, and the final objects must carry what the model produced.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { ScriptedModel, say } from "../helpers/scripted-model.ts";
import { rejection, startServer } from "../helpers/server.ts";

const vision = new ScriptedModel({ id: "vision-model", vision: true });
const textOnly = new ScriptedModel({ id: "text-model", vision: false, maxOutputTokens: 64 });
const server = startServer({ models: [vision, textOnly] });
const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
afterAll(() => server.stop());

const weatherTool = { type: "function" as const, function: { name: "get_weather", description: "Weather for a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };
const answer = { reasoning: "The user greets me.", content: "Hello there, how can I help?" };

beforeEach(() => {
  vision.script = () => say(answer);
  vision.overloadedFor = undefined;
  textOnly.script = () => say(answer);
});

describe("chat completions", () => {
  test("non-streaming: content, reasoning, usage", async () => {
    const r = await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "hi" }] });
    expect(r.object).toBe("chat.completion");
    expect(r.id).toStartWith("chatcmpl-");
    expect(r.model).toBe("vision-model");
    const message = r.choices[0]!.message as typeof r.choices[0]["message"] & { reasoning_content?: string };
    expect(message.content).toBe(answer.content);
    expect(message.reasoning_content).toBe(answer.reasoning);
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const prompt = vision.countTokens(vision.lastCall.conversation);
    expect(r.usage).toMatchObject({ prompt_tokens: prompt, completion_tokens: 12, total_tokens: prompt + 12, completion_tokens_details: { reasoning_tokens: 5 } });
  });

  test("streaming: finalChatCompletion has the content; chunks carry reasoning and usage", async () => {
    const final = await client.chat.completions.stream({ model: "vision-model", messages: [{ role: "user", content: "hi" }], stream_options: { include_usage: true } }).finalChatCompletion();
    expect(final.choices[0]!.message.content).toBe(answer.content);
    expect(final.choices[0]!.finish_reason).toBe("stop");
    expect(final.usage?.completion_tokens).toBe(12);

    const chunks = [];
    for await (const chunk of await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } })) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    const reasoning = chunks.map((c) => (c.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? "").join("");
    expect(reasoning).toBe(answer.reasoning);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage?.completion_tokens_details?.reasoning_tokens).toBe(5);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  test("tool calls stream with index/id/type/name, and tool results round-trip into the conversation", async () => {
    vision.script = () => say({ content: "Let me look.", toolCalls: [{ id: "call_a", name: "get_weather", arguments: { city: "Paris" } }, { id: "call_b", name: "get_weather", arguments: { city: "Oslo" } }] });
    const stream = client.chat.completions.stream({ model: "vision-model", messages: [{ role: "user", content: "weather?" }], tools: [weatherTool], tool_choice: "auto", parallel_tool_calls: true });
    const final = await stream.finalChatCompletion();
    const choice = final.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe("Let me look.");
    expect(choice.message.tool_calls).toEqual([
      { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      { id: "call_b", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
    ] as never);
    const call = vision.lastCall.conversation;
    expect(call.tools).toEqual([{ name: "get_weather", description: "Weather for a city", parameters: weatherTool.function.parameters }]);
    expect(call.toolChoice).toBe("auto");

    vision.script = () => say({ content: "Sunny in Paris." });
    const second = await client.chat.completions.create({
      model: "vision-model",
      tools: [weatherTool],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      messages: [{ role: "user", content: "weather?" }, { ...choice.message, role: "assistant" }, { role: "tool", tool_call_id: "call_a", content: "sunny" }, { role: "tool", tool_call_id: "call_b", content: [{ type: "text", text: "rain" }] }],
    });
    expect(second.choices[0]!.message.content).toBe("Sunny in Paris.");
    const messages = vision.lastCall.conversation.messages;
    expect(messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "Let me look." }], toolCalls: [{ id: "call_a", name: "get_weather", arguments: { city: "Paris" } }, { id: "call_b", name: "get_weather", arguments: { city: "Oslo" } }] });
    expect(messages[2]).toEqual({ role: "tool", toolCallId: "call_a", name: "get_weather", content: [{ type: "text", text: "sunny" }] });
    expect(messages[3]).toEqual({ role: "tool", toolCallId: "call_b", name: "get_weather", content: [{ type: "text", text: "rain" }] });
    expect(vision.lastCall.conversation.toolChoice).toEqual({ name: "get_weather" });
  });

  test("images: data URLs become bytes, http URLs stay URLs; a text-only model refuses them", async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    await client.chat.completions.create({
      model: "vision-model",
      messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: `data:image/png;base64,${png.toString("base64")}` } }, { type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }] }],
    });
    const user = vision.lastCall.conversation.messages[0]!;
    expect(user.role).toBe("user");
    const parts = user.content as { type: string; text?: string; source?: { kind: string; data?: Uint8Array; mediaType?: string; url?: string } }[];
    expect(parts[0]).toEqual({ type: "text", text: "what is this?" });
    expect(parts[1]!.source!.kind).toBe("bytes");
    expect([...parts[1]!.source!.data!]).toEqual([...png]);
    expect(parts[1]!.source!.mediaType).toBe("image/png");
    expect(parts[2]!.source).toEqual({ kind: "url", url: "https://example.com/cat.jpg" });

    const refused = client.chat.completions.create({ model: "text-model", messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/cat.jpg" } }] }] });
    expect(await rejection(refused)).toMatchObject({ status: 400, message: expect.stringContaining("does not accept images") });
  });

  test("sampling, limits, stop strings and reasoning effort reach the model", async () => {
    vision.script = () => say({ content: "one two STOP three" });
    const r = await client.chat.completions.create({
      model: "vision-model",
      messages: [{ role: "system", content: "Be brief." }, { role: "developer", content: [{ type: "text", text: "No jokes." }] }, { role: "user", content: "count" }],
      temperature: 0.3,
      top_p: 0.8,
      presence_penalty: 0.5,
      frequency_penalty: 0.25,
      seed: 7,
      max_completion_tokens: 100,
      stop: ["STOP"],
      reasoning_effort: "low",
      // Not in the SDK's types; vLLM-compatible clients send them.
      ...{ top_k: 40, min_p: 0.05 },
    });
    expect(r.choices[0]!.message.content).toBe("one two ");
    expect(r.choices[0]!.finish_reason).toBe("stop");
    const { conversation, options } = vision.lastCall;
    expect(options.sampling).toEqual({ temperature: 0.3, topP: 0.8, topK: 40, minP: 0.05, presencePenalty: 0.5, frequencyPenalty: 0.25, repetitionPenalty: 1, seed: 7 });
    expect(options.maxTokens).toBe(100);
    expect(options.stop).toEqual(["STOP"]);
    expect(conversation.thinking).toEqual({ enabled: true, effort: "low" });
    expect(conversation.messages.slice(0, 2)).toEqual([
      { role: "system", content: [{ type: "text", text: "Be brief." }] },
      { role: "system", content: [{ type: "text", text: "No jokes." }] },
    ]);

    await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "x" }], reasoning_effort: "none" });
    expect(vision.lastCall.conversation.thinking).toEqual({ enabled: false });
  });

  test("max_tokens is capped at the model's limit and ends with finish_reason length", async () => {
    textOnly.script = () => say({ content: "x".repeat(400) });
    const r = await client.chat.completions.create({ model: "text-model", messages: [{ role: "user", content: "go" }], max_tokens: 10_000 });
    expect(textOnly.lastCall.options.maxTokens).toBe(64);
    expect(r.choices[0]!.finish_reason).toBe("length");
    expect(r.usage?.completion_tokens).toBe(64);
  });

  test("logprobs come back per token with their alternatives", async () => {
    vision.script = () => say({ content: "abcdefgh", logprobs: true });
    const r = await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "x" }], logprobs: true, top_logprobs: 2 });
    expect(vision.lastCall.options.logprobs).toBe(2);
    expect(r.choices[0]!.logprobs?.content?.map((t) => t.token)).toEqual(["abcd", "efgh"]);
    expect(r.choices[0]!.logprobs?.content?.[0]?.top_logprobs).toHaveLength(2);
    const final = await client.chat.completions.stream({ model: "vision-model", messages: [{ role: "user", content: "x" }], logprobs: true }).finalChatCompletion();
    expect(final.choices[0]!.logprobs?.content?.map((t) => t.logprob)).toEqual([-0.25, -0.25]);
  });

  test("structured output: the format reaches the model; a schema a grammar cannot enforce is a 400 naming the field", async () => {
    await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object" }, strict: true } } });
    expect(vision.lastCall.conversation.responseFormat).toEqual({ type: "json_schema", name: "x", schema: { type: "object" }, strict: true });
    const r = client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", if: {} } } } });
    expect(await rejection(r)).toMatchObject({ status: 400, code: "unsupported_schema", param: "response_format.json_schema.schema", message: expect.stringContaining('"if"') });
  });

  test("errors: unknown model, overload with Retry-After, prompt too long, failure mid-stream", async () => {
    expect(await rejection(client.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }))).toMatchObject({ status: 404, code: "model_not_found" });

    vision.overloadedFor = 3;
    const overloaded = await client.chat.completions.create({ model: "vision-model", messages: [{ role: "user", content: "x" }], stream: true }).catch((e: unknown) => e);
    expect(overloaded).toBeInstanceOf(OpenAI.APIError);
    expect((overloaded as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((overloaded as InstanceType<typeof OpenAI.APIError>).headers?.get("retry-after")).toBe("3");
    vision.overloadedFor = undefined;

    const long = client.chat.completions.create({ model: "text-model", messages: [{ role: "user", content: "x".repeat(200_000) }] });
    expect(await rejection(long)).toMatchObject({ status: 400, code: "context_length_exceeded", message: expect.stringContaining("maximum context length is 32768 tokens") });

    vision.script = () => [...say({ content: "partial answer" }), { type: "fail", error: new Error("the engine fell over") }];
    const stream = client.chat.completions.stream({ model: "vision-model", messages: [{ role: "user", content: "x" }] });
    expect(await rejection(stream.finalChatCompletion())).toMatchObject({ message: expect.stringContaining("internal error: the engine fell over") });
  });

  test("GET /v1/models lists the served models", async () => {
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    expect(models).toEqual(["vision-model", "text-model"]);
    expect((await client.models.retrieve("text-model")).id).toBe("text-model");
  });
});
