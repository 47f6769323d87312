// The Turn state machine and the stream encoders built on it, fed ChatEvents directly (no server).
import { describe, expect, test } from "bun:test";
import type { ChatEvent } from "../../../src/chat/ir.ts";
import { AnthropicStreamEncoder } from "../../../src/api/anthropic/response.ts";
import { ChatStreamEncoder } from "../../../src/api/openai-chat/response.ts";
import { Turn, type TurnStep } from "../../../src/api/turn.ts";
import type { SseFrame } from "../../../src/api/frames.ts";

const usage = { promptTokens: 10, cachedPromptTokens: 4, completionTokens: 5, reasoningTokens: 2 };
const done: ChatEvent = { type: "done", finishReason: "tool_calls", usage };

function steps(events: ChatEvent[]): [Turn, TurnStep[]] {
  const turn = new Turn();
  return [turn, events.flatMap((e) => turn.add(e))];
}

describe("Turn", () => {
  test("runs of one kind become segments; empty text opens nothing; done closes the last", () => {
    const [turn, s] = steps([
      { type: "start", promptTokens: 10, cachedPromptTokens: 4 },
      { type: "reasoning", text: "" },
      { type: "reasoning", text: "think " },
      { type: "reasoning", text: "more" },
      { type: "content", text: "Answer" },
      { type: "reasoning", text: "again" },
      { type: "done", finishReason: "stop", usage },
    ]);
    expect(s.map((x) => `${x.type}${"segment" in x ? x.segment : ""}`)).toEqual(["start", "open0", "text0", "text0", "close0", "open1", "text1", "close1", "open2", "text2", "close2", "done"]);
    expect(turn.segments.map((x) => [x.kind, x.text])).toEqual([
      ["reasoning", "think more"],
      ["content", "Answer"],
      ["reasoning", "again"],
    ]);
    expect(turn.reasoning).toBe("think moreagain");
    expect(turn.content).toBe("Answer");
    expect(turn.finalUsage).toEqual(usage);
  });

  test("a tool call announced only by its end still opens, fills and closes a segment", () => {
    const [turn, s] = steps([{ type: "content", text: "ok" }, { type: "tool_call_end", index: 0, call: { id: "c1", name: "f", arguments: { a: 1 } } }, done]);
    expect(s.map((x) => x.type)).toEqual(["open", "text", "close", "open", "text", "close", "done"]);
    expect(turn.toolSegments[0]).toMatchObject({ id: "c1", name: "f", text: '{"a":1}' });
  });

  test("a tool call with no argument pieces gets its arguments from the end event", () => {
    const [turn] = steps([
      { type: "tool_call_start", index: 0, id: "c1", name: "f" },
      { type: "tool_call_end", index: 0, call: { id: "c1", name: "f", arguments: "raw text" } },
      done,
    ]);
    expect(turn.toolSegments[0]!.text).toBe("raw text");
    expect(turn.assistantMessage()).toEqual({ role: "assistant", content: [], toolCalls: [{ id: "c1", name: "f", arguments: "raw text" }] });
  });

  test("before done, usage is what start said", () => {
    const [turn] = steps([{ type: "start", promptTokens: 7, cachedPromptTokens: 2 }, { type: "content", text: "x" }]);
    expect(turn.finalUsage).toEqual({ promptTokens: 7, cachedPromptTokens: 2, completionTokens: 0, reasoningTokens: 0 });
  });
});

const data = (frames: SseFrame[]) => frames.map((f) => ("data" in f ? (f.data === "[DONE]" ? "[DONE]" : JSON.parse(f.data)) : f));
const twoTools: ChatEvent[] = [
  { type: "tool_call_start", index: 0, id: "a", name: "f" },
  { type: "tool_call_delta", index: 0, argumentsJson: '{"x":' },
  { type: "tool_call_delta", index: 0, argumentsJson: "1}" },
  { type: "tool_call_end", index: 0, call: { id: "a", name: "f", arguments: { x: 1 } } },
  { type: "tool_call_start", index: 1, id: "b", name: "g" },
  { type: "tool_call_end", index: 1, call: { id: "b", name: "g", arguments: {} } },
  done,
];

test("chat chunks: each tool call has its own index; identity first, then argument pieces", () => {
  const enc = new ChatStreamEncoder({ id: "chatcmpl-1", created: 1, model: "m" }, true);
  const chunks = data([...enc.open(), ...twoTools.flatMap((e) => enc.event(e)), ...enc.close()]);
  const deltas = chunks.slice(0, -2).map((c) => c.choices[0].delta);
  expect(deltas).toEqual([
    { role: "assistant", content: "" },
    { tool_calls: [{ index: 0, id: "a", type: "function", function: { name: "f", arguments: "" } }] },
    { tool_calls: [{ index: 0, function: { arguments: '{"x":' } }] },
    { tool_calls: [{ index: 0, function: { arguments: "1}" } }] },
    { tool_calls: [{ index: 1, id: "b", type: "function", function: { name: "g", arguments: "" } }] },
    { tool_calls: [{ index: 1, function: { arguments: "{}" } }] },
    {},
  ]);
  expect(chunks.at(-3).choices[0].finish_reason).toBe("tool_calls");
  expect(chunks.at(-2)).toMatchObject({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 } } });
  expect(chunks.at(-1)).toBe("[DONE]");
});

test("anthropic events: message_start before any block even without start; block indices follow content order", () => {
  const enc = new AnthropicStreamEncoder({ id: "msg_1", model: "m" });
  const frames = [...enc.open(), ...[{ type: "reasoning", text: "hm" } as ChatEvent, ...twoTools].flatMap((e) => enc.event(e))];
  expect(frames.every((f) => "event" in f && JSON.parse(f.data).type === f.event)).toBe(true);
  const events = data(frames).map((e) => [e.type, e.index, e.delta?.type ?? e.content_block?.type ?? ""].filter((x) => x !== undefined).join(" "));
  expect(events).toEqual([
    "ping ",
    "message_start ",
    "content_block_start 0 thinking",
    "content_block_delta 0 thinking_delta",
    "content_block_delta 0 signature_delta",
    "content_block_stop 0 ",
    "content_block_start 1 tool_use",
    "content_block_delta 1 input_json_delta",
    "content_block_delta 1 input_json_delta",
    "content_block_stop 1 ",
    "content_block_start 2 tool_use",
    "content_block_delta 2 input_json_delta",
    "content_block_stop 2 ",
    "message_delta ",
    "message_stop ",
  ]);
  expect(data(frames).at(-2)).toEqual({ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { input_tokens: 6, output_tokens: 5, cache_read_input_tokens: 4, cache_creation_input_tokens: 0 } });
});
