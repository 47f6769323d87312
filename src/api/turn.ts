// One assistant turn assembled from its ChatEvents, as the ordered segments every surface renders.
//
// Anthropic content blocks and Responses output items are both "a run of one kind of output": thinking, visible
// text, or one tool call. Turn cuts the event stream into such segments and says, per event, which segment opened,
// grew or closed. The streaming encoders turn those steps into their surface's events; the non-streaming
// renderers read the finished segments. One state machine, so a streamed answer and its final object agree.
import type { ChatEvent, FinishReason, Message, TokenLogprob, ToolCall, Usage } from "../chat/ir.ts";
import { newId } from "./ids.ts";

export type Segment =
  | { kind: "reasoning"; key: string; text: string }
  | { kind: "content"; key: string; text: string; logprobs: TokenLogprob[] }
  // `text` is the arguments JSON exactly as streamed; `call` arrives with tool_call_end.
  | { kind: "tool"; key: string; id: string; name: string; text: string; call?: ToolCall };

export type TurnStep =
  | { type: "start"; promptTokens: number; cachedPromptTokens: number }
  | { type: "open"; segment: number }
  | { type: "text"; segment: number; text: string; logprobs?: TokenLogprob[] }
  | { type: "close"; segment: number }
  | { type: "done"; finishReason: FinishReason; usage: Usage };

export class Turn {
  readonly segments: Segment[] = [];
  promptTokens = 0;
  cachedPromptTokens = 0;
  finishReason: FinishReason | undefined;
  usage: Usage | undefined;
  private current: number | undefined; // the open reasoning/content segment, or the tool being streamed
  private tools = new Map<number, number>(); // tool_call index → segment

  // Applies one event and returns what it changed, in order.
  add(event: ChatEvent): TurnStep[] {
    switch (event.type) {
      case "start":
        this.promptTokens = event.promptTokens;
        this.cachedPromptTokens = event.cachedPromptTokens;
        return [{ type: "start", promptTokens: event.promptTokens, cachedPromptTokens: event.cachedPromptTokens }];
      case "reasoning":
      case "content":
        return this.addText(event.type, event.text, event.type === "content" ? event.logprobs : undefined);
      case "tool_call_start": {
        const steps = this.closeCurrent();
        this.segments.push({ kind: "tool", key: newId(""), id: event.id, name: event.name, text: "" });
        this.current = this.segments.length - 1;
        this.tools.set(event.index, this.current);
        return [...steps, { type: "open", segment: this.current }];
      }
      case "tool_call_delta": {
        const i = this.tools.get(event.index);
        const seg = i === undefined ? undefined : this.segments[i];
        if (i === undefined || seg?.kind !== "tool" || event.argumentsJson === "") return [];
        seg.text += event.argumentsJson;
        return i === this.current ? [{ type: "text", segment: i, text: event.argumentsJson }] : [];
      }
      case "tool_call_end": {
        const steps: TurnStep[] = [];
        let i = this.tools.get(event.index);
        if (i === undefined) {
          // Announced only at its end: open it now so every surface still sees a whole tool call.
          steps.push(...this.closeCurrent());
          this.segments.push({ kind: "tool", key: newId(""), id: event.call.id, name: event.call.name, text: "" });
          i = this.current = this.segments.length - 1;
          this.tools.set(event.index, i);
          steps.push({ type: "open", segment: i });
        }
        const seg = this.segments[i];
        if (seg?.kind !== "tool") return steps;
        seg.call = event.call;
        // A parser that sent no argument pieces still owes the client the arguments.
        if (!seg.text) {
          seg.text = argumentsText(event.call);
          if (i === this.current) steps.push({ type: "text", segment: i, text: seg.text });
        }
        if (i === this.current) steps.push(...this.closeCurrent());
        return steps;
      }
      case "done": {
        const steps = this.closeCurrent();
        this.finishReason = event.finishReason;
        this.usage = event.usage;
        return [...steps, { type: "done", finishReason: event.finishReason, usage: event.usage }];
      }
    }
  }

  get reasoning(): string {
    return this.segments.flatMap((s) => (s.kind === "reasoning" ? [s.text] : [])).join("");
  }

  get content(): string {
    return this.segments.flatMap((s) => (s.kind === "content" ? [s.text] : [])).join("");
  }

  get logprobs(): TokenLogprob[] {
    return this.segments.flatMap((s) => (s.kind === "content" ? s.logprobs : []));
  }

  get toolSegments(): Extract<Segment, { kind: "tool" }>[] {
    return this.segments.filter((s): s is Extract<Segment, { kind: "tool" }> => s.kind === "tool");
  }

  // The turn as a conversation message, for the next request of a stateful conversation (Responses).
  assistantMessage(): Message {
    const message: Message = { role: "assistant", content: this.content ? [{ type: "text", text: this.content }] : [] };
    if (this.reasoning) message.reasoning = this.reasoning;
    const calls = this.toolSegments.map((s) => s.call ?? { id: s.id, name: s.name, arguments: parseArguments(s.text) });
    if (calls.length > 0) message.toolCalls = calls;
    return message;
  }

  // Usage as reported by the done event; before it (a failed stream) what is known so far.
  get finalUsage(): Usage {
    return this.usage ?? { promptTokens: this.promptTokens, cachedPromptTokens: this.cachedPromptTokens, completionTokens: 0, reasoningTokens: 0 };
  }

  private addText(kind: "reasoning" | "content", text: string, logprobs: TokenLogprob[] | undefined): TurnStep[] {
    if (text === "") return [];
    const steps: TurnStep[] = [];
    let seg = this.current === undefined ? undefined : this.segments[this.current];
    if (seg?.kind !== kind) {
      steps.push(...this.closeCurrent());
      seg = kind === "reasoning" ? { kind, key: newId(""), text: "" } : { kind, key: newId(""), text: "", logprobs: [] };
      this.segments.push(seg);
      this.current = this.segments.length - 1;
      steps.push({ type: "open", segment: this.current });
    }
    seg.text += text;
    if (seg.kind === "content" && logprobs) seg.logprobs.push(...logprobs);
    steps.push(logprobs ? { type: "text", segment: this.current!, text, logprobs } : { type: "text", segment: this.current!, text });
    return steps;
  }

  private closeCurrent(): TurnStep[] {
    if (this.current === undefined) return [];
    const segment = this.current;
    this.current = undefined;
    return [{ type: "close", segment }];
  }
}

export function argumentsText(call: ToolCall): string {
  return typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments);
}

// Arguments as a client sent them (a JSON string): an object when they parse to one, else the raw text.
export function parseArguments(text: string): Record<string, unknown> | string {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : text;
  } catch {
    return text;
  }
}
