// Anthropic Messages output: the message object and its `event:`-named stream.
//
// Stream: ping (at once, so headers go out during prefill) → message_start (with usage: the SDK reads it) → per
// block content_block_start → deltas (thinking_delta, then signature_delta; text_delta; input_json_delta) →
// content_block_stop → message_delta (stop_reason, usage) → message_stop. Every SSE event is named after its
// `type`: the SDK ignores data-only events.
import type { ChatEvent, FinishReason, Usage } from "../../chat/ir.ts";
import { anthropicErrorBody, type ApiError } from "../errors.ts";
import { json, type SseFrame, type StreamEncoder } from "../frames.ts";
import { parseArguments, Turn, type Segment } from "../turn.ts";

export type MessageMeta = { id: string; model: string };

// Thinking blocks must carry a signature for clients to send them back; Splash does not verify what it gets.
export const THINKING_SIGNATURE = "splash";

const STOP_REASON: Record<FinishReason, string> = { stop: "end_turn", length: "max_tokens", tool_calls: "tool_use", cancelled: "end_turn" };

// Anthropic counts cached prompt tokens apart from input_tokens; clients add the two for the context size.
export function anthropicUsage(u: Usage) {
  return { input_tokens: u.promptTokens - u.cachedPromptTokens, output_tokens: u.completionTokens, cache_read_input_tokens: u.cachedPromptTokens, cache_creation_input_tokens: 0 };
}

function toolInput(text: string): Record<string, unknown> {
  const args = parseArguments(text);
  return typeof args === "object" ? args : {};
}

function block(seg: Segment) {
  switch (seg.kind) {
    case "reasoning":
      return { type: "thinking", thinking: seg.text, signature: THINKING_SIGNATURE };
    case "content":
      return { type: "text", text: seg.text };
    case "tool":
      return { type: "tool_use", id: seg.id, name: seg.name, input: toolInput(seg.text) };
  }
}

export function anthropicMessage(turn: Turn, meta: MessageMeta) {
  return {
    id: meta.id,
    type: "message",
    role: "assistant",
    model: meta.model,
    content: turn.segments.map(block),
    stop_reason: STOP_REASON[turn.finishReason ?? "stop"],
    stop_sequence: null,
    usage: anthropicUsage(turn.finalUsage),
  };
}

export class AnthropicStreamEncoder implements StreamEncoder {
  readonly ping: SseFrame = { event: "ping", data: json({ type: "ping" }) };
  private turn = new Turn();
  private started = false;

  constructor(private meta: MessageMeta) {}

  open(): SseFrame[] {
    return [this.ping];
  }

  event(event: ChatEvent): SseFrame[] {
    const frames: SseFrame[] = [];
    for (const step of this.turn.add(event)) {
      if (!this.started) frames.push(this.messageStart());
      switch (step.type) {
        case "open": {
          const seg = this.turn.segments[step.segment]!;
          const content_block = seg.kind === "reasoning" ? { type: "thinking", thinking: "", signature: "" } : seg.kind === "content" ? { type: "text", text: "" } : { type: "tool_use", id: seg.id, name: seg.name, input: {} };
          frames.push(this.emit("content_block_start", { index: step.segment, content_block }));
          break;
        }
        case "text": {
          const seg = this.turn.segments[step.segment]!;
          const delta = seg.kind === "reasoning" ? { type: "thinking_delta", thinking: step.text } : seg.kind === "content" ? { type: "text_delta", text: step.text } : { type: "input_json_delta", partial_json: step.text };
          frames.push(this.emit("content_block_delta", { index: step.segment, delta }));
          break;
        }
        case "close":
          if (this.turn.segments[step.segment]!.kind === "reasoning") {
            frames.push(this.emit("content_block_delta", { index: step.segment, delta: { type: "signature_delta", signature: THINKING_SIGNATURE } }));
          }
          frames.push(this.emit("content_block_stop", { index: step.segment }));
          break;
        case "done":
          frames.push(this.emit("message_delta", { delta: { stop_reason: STOP_REASON[step.finishReason], stop_sequence: null }, usage: anthropicUsage(step.usage) }));
          frames.push(this.emit("message_stop", {}));
          break;
      }
    }
    return frames;
  }

  close(): SseFrame[] {
    return [];
  }

  fail(error: ApiError): SseFrame[] {
    return [{ event: "error", data: json(anthropicErrorBody(error)) }];
  }

  private messageStart(): SseFrame {
    this.started = true;
    const usage = anthropicUsage(this.turn.finalUsage);
    return this.emit("message_start", { message: { id: this.meta.id, type: "message", role: "assistant", model: this.meta.model, content: [], stop_reason: null, stop_sequence: null, usage } });
  }

  private emit(type: string, body: Record<string, unknown>): SseFrame {
    return { event: type, data: json({ type, ...body }) };
  }
}
