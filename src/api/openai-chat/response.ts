// Chat Completions responses: the chat.completion object and the chat.completion.chunk stream.
//
// The openai SDK's stream accumulator is strict: the first delta carries `role`, each tool call's first chunk
// carries index, id, type and function.name (later chunks only argument pieces), the last choice chunk carries
// finish_reason, and `data: [DONE]` ends the stream.
import type { ChatEvent, FinishReason, TokenLogprob, Usage } from "../../chat/ir.ts";
import { openaiErrorBody, type ApiError } from "../errors.ts";
import { json, type SseFrame, type StreamEncoder } from "../frames.ts";
import { Turn } from "../turn.ts";

export type ChatMeta = { id: string; created: number; model: string };

const FINISH: Record<FinishReason, string> = { stop: "stop", length: "length", tool_calls: "tool_calls", cancelled: "stop" };

export function chatUsage(u: Usage) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: { cached_tokens: u.cachedPromptTokens },
    completion_tokens_details: { reasoning_tokens: u.reasoningTokens },
  };
}

function chatLogprobs(items: TokenLogprob[]) {
  return items.map((t) => ({
    token: t.text,
    logprob: t.logprob,
    bytes: t.bytes,
    top_logprobs: t.top.map((a) => ({ token: a.text, logprob: a.logprob, bytes: a.bytes })),
  }));
}

export function chatCompletion(turn: Turn, meta: ChatMeta, withLogprobs: boolean) {
  const tools = turn.toolSegments;
  const message: Record<string, unknown> = { role: "assistant", content: turn.content || (tools.length ? null : ""), refusal: null };
  if (turn.reasoning) {
    message.reasoning_content = turn.reasoning;
    message.reasoning = turn.reasoning;
  }
  if (tools.length) message.tool_calls = tools.map((t) => ({ id: t.id, type: "function", function: { name: t.name, arguments: t.text } }));
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message,
        logprobs: withLogprobs ? { content: chatLogprobs(turn.logprobs), refusal: null } : null,
        finish_reason: FINISH[turn.finishReason ?? "stop"],
      },
    ],
    usage: chatUsage(turn.finalUsage),
  };
}

export class ChatStreamEncoder implements StreamEncoder {
  readonly ping: SseFrame = { comment: "keepalive" };
  private turn = new Turn();
  private toolIndex = new Map<number, number>(); // segment → tool_calls[].index

  constructor(
    private meta: ChatMeta,
    private includeUsage: boolean,
  ) {}

  open(): SseFrame[] {
    return [this.chunk({ role: "assistant", content: "" })];
  }

  event(event: ChatEvent): SseFrame[] {
    const frames: SseFrame[] = [];
    for (const step of this.turn.add(event)) {
      if (step.type === "open") {
        const seg = this.turn.segments[step.segment]!;
        if (seg.kind !== "tool") continue;
        const index = this.toolIndex.size;
        this.toolIndex.set(step.segment, index);
        frames.push(this.chunk({ tool_calls: [{ index, id: seg.id, type: "function", function: { name: seg.name, arguments: "" } }] }));
      } else if (step.type === "text") {
        const seg = this.turn.segments[step.segment]!;
        if (seg.kind === "reasoning") frames.push(this.chunk({ reasoning_content: step.text, reasoning: step.text }));
        else if (seg.kind === "content") frames.push(this.chunk({ content: step.text }, step.logprobs));
        else frames.push(this.chunk({ tool_calls: [{ index: this.toolIndex.get(step.segment)!, function: { arguments: step.text } }] }));
      } else if (step.type === "done") {
        frames.push(this.chunk({}, undefined, FINISH[step.finishReason]));
        if (this.includeUsage) frames.push({ data: json({ ...this.base(), choices: [], usage: chatUsage(step.usage) }) });
      }
    }
    return frames;
  }

  close(): SseFrame[] {
    return [{ data: "[DONE]" }];
  }

  fail(error: ApiError): SseFrame[] {
    return [{ data: json(openaiErrorBody(error)) }];
  }

  private base() {
    return { id: this.meta.id, object: "chat.completion.chunk", created: this.meta.created, model: this.meta.model };
  }

  private chunk(delta: Record<string, unknown>, logprobs?: TokenLogprob[], finish?: string): SseFrame {
    const choice = { index: 0, delta, logprobs: logprobs ? { content: chatLogprobs(logprobs), refusal: null } : null, finish_reason: finish ?? null };
    return { data: json({ ...this.base(), choices: [choice], ...(this.includeUsage ? { usage: null } : {}) }) };
  }
}
