// A ChatModel for server tests: it plays a script of ChatEvents instead of running an engine.
//
// Like the real chat layer it may wait in a queue (`queueMs`), emits `start` first (prompt size from countTokens),
// waits `prefillMs` before the first token and `tokenDelayMs` between tokens, stops at options.maxTokens ("length")
// and at stop strings, ends with `done` and its usage, throws EngineOverloaded / PromptTooLong when admitted, and
// stops at once when options.signal aborts. It records every call and what its stats() would show, so tests can
// check what the server passed in and that a disconnect freed the sequence.
import type { ChatEvent, ChatModel, Conversation, FinishReason, GenerationOptions, ModelRuntime, ServedTokenizer, TokenLogprob, ToolCall } from "../../src/chat/ir.ts";
import { EngineOverloaded, PromptTooLong, type EngineStats } from "../../src/engine/types.ts";

export type ScriptStep = Exclude<ChatEvent, { type: "start" } | { type: "done" }> | { type: "wait"; ms: number } | { type: "fail"; error: Error } | { type: "finish"; reason: FinishReason };
export type Script = (conversation: Conversation, options: GenerationOptions) => ScriptStep[];

export type ScriptedModelOptions = {
  id?: string;
  vision?: boolean;
  contextLength?: number;
  maxOutputTokens?: number;
  script?: Script;
};

const BYTES_PER_SEQUENCE = 1 << 20;

// A CPU model whose state budget is 64 sequences' worth: half pages, half slots.
export const SCRIPTED_RUNTIME: ModelRuntime = {
  backend: "cpu",
  weights: "bf16",
  weightBytes: 50e6,
  memory: { budget: 64 * BYTES_PER_SEQUENCE, budgetSource: "default", fixedBytes: 60e6, pageTokens: 64, pageBytes: BYTES_PER_SEQUENCE / 16, nPages: 512, slotBytes: BYTES_PER_SEQUENCE, nSlots: 32, maxSeqs: 16, stateBytes: 64 * BYTES_PER_SEQUENCE },
};

export class ScriptedModel implements ChatModel {
  readonly id: string;
  readonly vision: boolean;
  readonly contextLength: number;
  readonly maxOutputTokens: number;
  readonly runtime = SCRIPTED_RUNTIME;
  readonly vocabSize = 1024;
  hasToken(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize;
  }
  script: Script;
  queueMs = 0; // waiting for admission, before EngineOverloaded / PromptTooLong are decided
  prefillMs = 0;
  tokenDelayMs = 0;
  cachedPromptTokens = 0;
  overloadedFor: number | undefined; // when set, generate() refuses with EngineOverloaded(retry after this)
  readonly calls: { conversation: Conversation; options: GenerationOptions }[] = [];
  running = 0;
  queued = 0;
  cancelled = 0;
  completed = 0;
  private hitTokens = 0;
  private promptTokensComputed = 0;
  private generatedTokens = 0; // one per scripted text or arguments piece, as a token would be

  constructor(o: ScriptedModelOptions = {}) {
    this.id = o.id ?? "scripted";
    this.vision = o.vision ?? false;
    this.contextLength = o.contextLength ?? 32768;
    this.maxOutputTokens = o.maxOutputTokens ?? 4096;
    this.script = o.script ?? (() => say({ content: "Hello!" }));
  }

  get lastCall(): { conversation: Conversation; options: GenerationOptions } {
    const call = this.calls.at(-1);
    if (!call) throw new Error("the model was not called");
    return call;
  }

  // A rough size: a quarter token per character of the rendered conversation.
  countTokens(conversation: Conversation): number {
    return Math.ceil(JSON.stringify(conversation).length / 4);
  }

  // Its "prompt" is the conversation as JSON.
  prompt(conversation: Conversation): { text: string; tokens: number } {
    return { text: JSON.stringify(conversation), tokens: this.countTokens(conversation) };
  }

  readonly tokenizer = byteTokenizer;

  stats(): EngineStats {
    return { running: this.running, queued: this.queued, stateBytesInUse: this.running * BYTES_PER_SEQUENCE, stateBytesBudget: 64 * BYTES_PER_SEQUENCE, prefixCacheHitTokens: this.hitTokens, promptTokensComputed: this.promptTokensComputed, generatedTokens: this.generatedTokens };
  }

  async *generate(conversation: Conversation, options: GenerationOptions): AsyncGenerator<ChatEvent> {
    this.calls.push({ conversation, options });
    if (this.queueMs > 0) {
      this.queued++;
      const admitted = await sleep(this.queueMs, options.signal);
      this.queued--;
      if (!admitted) return;
    }
    if (this.overloadedFor !== undefined) throw new EngineOverloaded(this.overloadedFor);
    const promptTokens = this.countTokens(conversation);
    if (promptTokens > this.contextLength) throw new PromptTooLong(promptTokens, this.contextLength);
    const signal = options.signal;
    this.running++;
    let completionTokens = 0;
    let reasoningTokens = 0;
    let finish: FinishReason | undefined;
    try {
      this.hitTokens += this.cachedPromptTokens;
      this.promptTokensComputed += Math.max(0, promptTokens - this.cachedPromptTokens);
      yield { type: "start", promptTokens, cachedPromptTokens: this.cachedPromptTokens };
      if (!(await sleep(this.prefillMs, signal))) return yield* this.end("cancelled", promptTokens, 0, 0);
      let content = "";
      let sent = 0; // characters of content passed on
      for (const step of this.script(conversation, options)) {
        if (signal.aborted) return yield* this.end("cancelled", promptTokens, completionTokens, reasoningTokens);
        if (step.type === "wait") {
          if (!(await sleep(step.ms, signal))) return yield* this.end("cancelled", promptTokens, completionTokens, reasoningTokens);
          continue;
        }
        if (step.type === "fail") throw step.error;
        if (step.type === "finish") {
          finish = step.reason;
          break;
        }
        if (step.type === "reasoning" || step.type === "content" || step.type === "tool_call_delta") {
          if (completionTokens >= (options.maxTokens ?? Infinity)) {
            finish = "length";
            break;
          }
          if (!(await sleep(this.tokenDelayMs, signal))) return yield* this.end("cancelled", promptTokens, completionTokens, reasoningTokens);
          completionTokens++;
          this.generatedTokens++;
          if (step.type === "reasoning") reasoningTokens++;
        }
        if (step.type === "content") {
          // Like the chat layer: text that may be the start of a stop string is held back until it is not.
          content += step.text;
          const stop = firstStop(content, options.stop);
          const safe = stop ?? content.length - heldBack(content, options.stop);
          if (safe > sent) yield { ...step, text: content.slice(sent, safe) };
          sent = Math.max(sent, safe);
          if (stop !== undefined) {
            finish = "stop";
            break;
          }
          continue;
        }
        if (step.type === "tool_call_end") finish = "tool_calls";
        yield step;
      }
      if (finish === undefined && sent < content.length) yield { type: "content", text: content.slice(sent) };
      yield* this.end(finish ?? "stop", promptTokens, completionTokens, reasoningTokens);
    } finally {
      this.running--;
      if (signal.aborted) this.cancelled++;
    }
  }

  private *end(reason: FinishReason, promptTokens: number, completionTokens: number, reasoningTokens: number): Generator<ChatEvent> {
    if (reason !== "cancelled") this.completed++;
    yield { type: "done", finishReason: reason, usage: { promptTokens, cachedPromptTokens: this.cachedPromptTokens, completionTokens, reasoningTokens } };
  }
}

// One token per UTF-8 byte, for the token endpoints' plumbing (their behaviour on a real tokenizer is tested against
// the embedded model).
const byteTokenizer: ServedTokenizer = {
  vocabSize: 256,
  encode: (text) => Int32Array.from(new TextEncoder().encode(text)),
  encodeWithAddedTokens: (text) => Int32Array.from(new TextEncoder().encode(text)),
  decode: (ids) => new TextDecoder().decode(Uint8Array.from(Array.from(ids))),
  tokenBytes: (id) => Uint8Array.of(id),
};

// Index in `text` where the earliest stop string begins.
function firstStop(text: string, stops: string[]): number | undefined {
  const found = stops.map((s) => text.indexOf(s)).filter((i) => i >= 0);
  return found.length ? Math.min(...found) : undefined;
}

// Length of the longest end of `text` that could still grow into a stop string.
function heldBack(text: string, stops: string[]): number {
  let longest = 0;
  for (const s of stops) for (let n = Math.min(s.length - 1, text.length); n > longest; n--) if (s.startsWith(text.slice(-n))) longest = n;
  return longest;
}

// Resolves true after ms, or false as soon as the signal aborts.
function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return Promise.resolve(false);
  if (ms <= 0) return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      resolve(ok);
    };
    const onAbort = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener("abort", onAbort);
  });
}

// Splits text into small pieces, as tokens would arrive.
export function pieces(text: string, size = 4): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

// A script for one answer: reasoning, then content, then tool calls (arguments streamed in pieces).
export function say(o: { reasoning?: string; content?: string; toolCalls?: ToolCall[]; logprobs?: boolean }): ScriptStep[] {
  const steps: ScriptStep[] = [];
  for (const text of pieces(o.reasoning ?? "")) steps.push({ type: "reasoning", text });
  for (const text of pieces(o.content ?? "")) steps.push(o.logprobs ? { type: "content", text, logprobs: [logprob(text)] } : { type: "content", text });
  (o.toolCalls ?? []).forEach((call, index) => {
    steps.push({ type: "tool_call_start", index, id: call.id, name: call.name });
    const json = typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments);
    for (const piece of pieces(json, 7)) steps.push({ type: "tool_call_delta", index, argumentsJson: piece });
    steps.push({ type: "tool_call_end", index, call });
  });
  return steps;
}

function logprob(text: string): TokenLogprob {
  const bytes = [...new TextEncoder().encode(text)];
  return { text, bytes, logprob: -0.25, top: [{ text, bytes, logprob: -0.25 }, { text: "?", bytes: [63], logprob: -2.5 }] };
}
