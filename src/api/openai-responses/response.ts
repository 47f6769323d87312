// Responses API output: the response object and its streaming event sequence.
//
// Stream: response.created → response.in_progress → per output item: output_item.added → (content_part.added →
// text deltas → text done → content_part.done | function_call_arguments.delta* → .done) → output_item.done with the
// complete item (Codex reads items only from here) → response.completed (or .incomplete) with the whole response
// and usage. Every event carries `sequence_number`; item-scoped events carry the item's `item_id` and
// `output_index`, as the openai SDK's accumulator checks.
import type { ChatEvent, TokenLogprob, Usage } from "../../chat/ir.ts";
import type { ApiError } from "../errors.ts";
import { json, type SseFrame, type StreamEncoder } from "../frames.ts";
import { parseArguments, Turn, type Segment } from "../turn.ts";
import type { ResponsesRequest } from "./schema.ts";

export type ResponseMeta = { id: string; createdAt: number; model: string; request: ResponsesRequest; customTools: Set<string> };

type Status = "in_progress" | "completed" | "incomplete" | "failed";

export function responsesUsage(u: Usage) {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedPromptTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

const outputLogprobs = (items: TokenLogprob[]) =>
  items.map((t) => ({ token: t.text, logprob: t.logprob, bytes: t.bytes, top_logprobs: t.top.map((a) => ({ token: a.text, logprob: a.logprob, bytes: a.bytes })) }));

// Thinking goes out as raw reasoning text, or as a reasoning summary when the client asks for summaries: Codex shows
// summaries and hides raw reasoning unless told otherwise. Either way it is the model's whole reasoning.
const asSummary = (meta: ResponseMeta) => ["auto", "concise", "detailed"].includes(meta.request.reasoning?.summary ?? "");

function itemId(seg: Segment, meta: ResponseMeta): string {
  if (seg.kind === "reasoning") return `rs_${seg.key}`;
  if (seg.kind === "content") return `msg_${seg.key}`;
  return meta.customTools.has(seg.name) ? `ctc_${seg.key}` : `fc_${seg.key}`;
}

function textPart(seg: Extract<Segment, { kind: "content" }>, withLogprobs: boolean) {
  return { type: "output_text", text: seg.text, annotations: [], ...(withLogprobs ? { logprobs: outputLogprobs(seg.logprobs) } : {}) };
}

// A segment as a finished output item.
function outputItem(seg: Segment, meta: ResponseMeta) {
  const id = itemId(seg, meta);
  switch (seg.kind) {
    case "reasoning":
      return asSummary(meta) ? { type: "reasoning", id, summary: [{ type: "summary_text", text: seg.text }] } : { type: "reasoning", id, summary: [], content: [{ type: "reasoning_text", text: seg.text }] };
    case "content":
      return { type: "message", id, status: "completed", role: "assistant", content: [textPart(seg, meta.request.top_logprobs != null)] };
    case "tool":
      if (meta.customTools.has(seg.name)) {
        const args = parseArguments(seg.text);
        const input = typeof args === "object" && typeof args.input === "string" ? args.input : seg.text;
        return { type: "custom_tool_call", id, call_id: seg.id, name: seg.name, input, status: "completed" };
      }
      return { type: "function_call", id, call_id: seg.id, name: seg.name, arguments: seg.text, status: "completed" };
  }
}

export function responseObject(meta: ResponseMeta, turn: Turn | undefined, status: Status, error?: ApiError) {
  const r = meta.request;
  return {
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status,
    error: error ? { code: error.details.code ?? "server_error", message: error.message } : null,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: r.instructions ?? null,
    max_output_tokens: r.max_output_tokens ?? null,
    model: meta.model,
    output: turn && status !== "in_progress" ? turn.segments.map((s) => outputItem(s, meta)) : [],
    parallel_tool_calls: r.parallel_tool_calls ?? true,
    previous_response_id: r.previous_response_id ?? null,
    reasoning: { effort: r.reasoning?.effort ?? null, summary: r.reasoning?.summary ?? null },
    store: r.store ?? true,
    temperature: r.temperature ?? null,
    text: { format: r.text?.format ?? { type: "text" } },
    tool_choice: r.tool_choice ?? "auto",
    tools: (r.tools ?? []).filter((t) => t.type !== "ignored"),
    top_p: r.top_p ?? null,
    truncation: "disabled",
    metadata: r.metadata ?? {},
    usage: turn && status !== "in_progress" ? responsesUsage(turn.finalUsage) : null,
  };
}

export const finalStatus = (turn: Turn): Status => (turn.finishReason === "length" ? "incomplete" : "completed");

export class ResponsesStreamEncoder implements StreamEncoder {
  readonly ping: SseFrame = { comment: "keepalive" };
  readonly turn = new Turn();
  private seq = 0;
  private outputIndex = new Map<number, number>(); // segment → output_index

  constructor(
    private meta: ResponseMeta,
    private onComplete: (response: ReturnType<typeof responseObject>, turn: Turn) => void,
  ) {}

  open(): SseFrame[] {
    const response = responseObject(this.meta, undefined, "in_progress");
    return [this.emit("response.created", { response }), this.emit("response.in_progress", { response })];
  }

  event(event: ChatEvent): SseFrame[] {
    const frames: SseFrame[] = [];
    for (const step of this.turn.add(event)) {
      if (step.type === "open") frames.push(...this.openItem(step.segment));
      else if (step.type === "text") frames.push(...this.delta(step.segment, step.text, step.logprobs));
      else if (step.type === "close") frames.push(...this.closeItem(step.segment));
      else if (step.type === "done") {
        const status = finalStatus(this.turn);
        const response = responseObject(this.meta, this.turn, status);
        this.onComplete(response, this.turn);
        frames.push(this.emit(status === "incomplete" ? "response.incomplete" : "response.completed", { response }));
      }
    }
    return frames;
  }

  close(): SseFrame[] {
    return [];
  }

  fail(error: ApiError): SseFrame[] {
    return [this.emit("response.failed", { response: responseObject(this.meta, this.turn, "failed", error) })];
  }

  private emit(type: string, body: Record<string, unknown>): SseFrame {
    return { event: type, data: json({ type, sequence_number: this.seq++, ...body }) };
  }

  private openItem(segment: number): SseFrame[] {
    const seg = this.turn.segments[segment]!;
    const output_index = this.outputIndex.size;
    this.outputIndex.set(segment, output_index);
    const item_id = itemId(seg, this.meta);
    switch (seg.kind) {
      case "reasoning":
        return [
          this.emit("response.output_item.added", { output_index, item: { type: "reasoning", id: item_id, summary: [] } }),
          asSummary(this.meta)
            ? this.emit("response.reasoning_summary_part.added", { item_id, output_index, summary_index: 0, part: { type: "summary_text", text: "" } })
            : this.emit("response.content_part.added", { item_id, output_index, content_index: 0, part: { type: "reasoning_text", text: "" } }),
        ];
      case "content":
        return [
          this.emit("response.output_item.added", { output_index, item: { type: "message", id: item_id, status: "in_progress", role: "assistant", content: [] } }),
          this.emit("response.content_part.added", { item_id, output_index, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }),
        ];
      case "tool": {
        const item = this.meta.customTools.has(seg.name)
          ? { type: "custom_tool_call", id: item_id, call_id: seg.id, name: seg.name, input: "" }
          : { type: "function_call", id: item_id, call_id: seg.id, name: seg.name, arguments: "", status: "in_progress" };
        return [this.emit("response.output_item.added", { output_index, item })];
      }
    }
  }

  private delta(segment: number, delta: string, logprobs: TokenLogprob[] | undefined): SseFrame[] {
    const seg = this.turn.segments[segment]!;
    const at = { item_id: itemId(seg, this.meta), output_index: this.outputIndex.get(segment)! };
    switch (seg.kind) {
      case "reasoning":
        return [asSummary(this.meta) ? this.emit("response.reasoning_summary_text.delta", { ...at, summary_index: 0, delta }) : this.emit("response.reasoning_text.delta", { ...at, content_index: 0, delta })];
      case "content":
        return [this.emit("response.output_text.delta", { ...at, content_index: 0, delta, logprobs: logprobs ? outputLogprobs(logprobs) : [] })];
      case "tool":
        // A custom tool's input is known only once its JSON arguments are complete: it arrives whole at the end.
        return this.meta.customTools.has(seg.name) ? [] : [this.emit("response.function_call_arguments.delta", { ...at, delta })];
    }
  }

  private closeItem(segment: number): SseFrame[] {
    const seg = this.turn.segments[segment]!;
    const at = { item_id: itemId(seg, this.meta), output_index: this.outputIndex.get(segment)! };
    const frames: SseFrame[] = [];
    if (seg.kind === "reasoning" && asSummary(this.meta)) {
      frames.push(this.emit("response.reasoning_summary_text.done", { ...at, summary_index: 0, text: seg.text }));
      frames.push(this.emit("response.reasoning_summary_part.done", { ...at, summary_index: 0, part: { type: "summary_text", text: seg.text } }));
    } else if (seg.kind === "reasoning") {
      frames.push(this.emit("response.reasoning_text.done", { ...at, content_index: 0, text: seg.text }));
      frames.push(this.emit("response.content_part.done", { ...at, content_index: 0, part: { type: "reasoning_text", text: seg.text } }));
    } else if (seg.kind === "content") {
      frames.push(this.emit("response.output_text.done", { ...at, content_index: 0, text: seg.text, logprobs: outputLogprobs(seg.logprobs) }));
      frames.push(this.emit("response.content_part.done", { ...at, content_index: 0, part: textPart(seg, this.meta.request.top_logprobs != null) }));
    } else if (!this.meta.customTools.has(seg.name)) {
      frames.push(this.emit("response.function_call_arguments.done", { ...at, name: seg.name, arguments: seg.text }));
    }
    frames.push(this.emit("response.output_item.done", { output_index: at.output_index, item: outputItem(seg, this.meta) }));
    return frames;
  }
}
