// ChatModel over an Engine: render → tokenize → engine.generate → incremental detokenize → output parser → ChatEvents.
//
//   conversation ──templateVariables──▶ template.render ──encodeTemplate──▶ prompt ids ──▶ engine.generate
//   ChatEvents ◀── stop strings ◀── OutputParser ◀── IncrementalDetokenizer ◀── tokens ◀─┘
//
// Structured output (a response format, a forced tool choice, strict tools): the grammar is compiled (or taken from
// the model's cache) before the request reaches the engine, the constraint goes with the request and is released
// when the engine is done with it; a complete value ends the output ("constraint_complete"), which finishes as "stop"
// or "tool_calls". Compiling runs on the event loop (xgrammar's WebAssembly is synchronous): a cold compile delays
// every running sequence's next step by its duration (BENCHMARKS.md, Grammar).
//
// Stop strings are matched on visible content only (not reasoning, not tool-call markup), across token boundaries:
// content that could be the start of a stop string is held until it cannot; a match ends the answer there, aborts
// the engine request (freeing its memory at once) and finishes with "stop". Usage counts every generated token;
// reasoning tokens are those generated while the parser was inside <think>.
import type { PreparedGrammar } from "../engine/grammar/index.ts";
import { ConstraintError, grammarKind, type ConstraintRequest, type GrammarKind } from "../engine/grammar/request.ts";
import type { Engine, PromptImages, TokenConstraint } from "../engine/types.ts";
import { PromptTooLong } from "../engine/types.ts";
import { IncrementalDetokenizer } from "../tokenizer/detokenizer.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";
import type { VisionEncoder } from "../vision/encoder.ts";
import { expandImagePads, promptImages } from "../vision/prompt.ts";
import { offeredTools, type ChatEvent, type ChatModel, type Conversation, type FinishReason, type GenerationOptions, type ImageSource, type ModelRuntime, type TokenLogprob } from "./ir.ts";
import { OutputParser, type ParserEvent } from "./output-parser.ts";
import type { ChatTemplate } from "./template.ts";
import { templateVariables } from "./template-vars.ts";

// What generateChat needs of a loaded model.
export type ChatModelParts = {
  id: string;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  engine: Engine;
  stopTokens: number[]; // end of turn: <|im_end|>, <|endoftext|>
  contextLength: number;
  maxOutputTokens: number;
  runtime: ModelRuntime;
  vision?: VisionEncoder; // the image path of a vision checkpoint; without it image parts are refused
  // Compiles the grammar a conversation needs (null: none). Without it, a conversation that needs one is refused.
  structuredOutput?: { prepare(req: ConstraintRequest): Promise<PreparedGrammar | null> };
};

// Where the output parser looks for tool calls in an answer a grammar of this kind wrote.
const CALLS_IN: Record<GrammarKind, "never" | "leading" | "anywhere"> = {
  json: "never",
  tool_calls: "leading",
  json_or_tool_calls: "leading",
  text_or_tool_calls: "anywhere",
};

async function prepareGrammar(model: ChatModelParts, conversation: Conversation): Promise<PreparedGrammar | null> {
  if (model.structuredOutput) return model.structuredOutput.prepare(conversation);
  if (grammarKind(conversation)) throw new ConstraintError(`${model.id} cannot constrain its output (structured output is not available for it)`, "responseFormat");
  return null;
}

// The end-of-turn tokens of a Qwen-family tokenizer, for ChatModelParts.stopTokens.
export const END_OF_TURN = ["<|im_end|>", "<|endoftext|>"] as const;
export function endOfTurnTokens(tokenizer: Tokenizer): number[] {
  return END_OF_TURN.map((t) => tokenizer.addedTokenId(t)).filter((id): id is number => id !== undefined);
}

export type RenderedPrompt = {
  text: string;
  ids: Int32Array;
  startInReasoning: boolean; // the generation prompt left a <think> block open
};

// With the model's context, a prompt that cannot fit it is refused as soon as that is known: from its size before
// it is tokenized (a huge prompt would otherwise hold the event loop for seconds), and, when generating, once its
// tokens pass `limit` (counting tokens needs them all).
export function renderPrompt(
  model: Pick<ChatModelParts, "tokenizer" | "template"> & { contextLength?: number },
  conversation: Conversation,
  limit = Infinity,
): RenderedPrompt {
  const text = model.template.render(templateVariables(conversation, (s) => model.tokenizer.escape(s)));
  const context = model.contextLength ?? Infinity;
  const least = model.tokenizer.minTemplateTokens(text);
  if (least >= context) throw new PromptTooLong(least, context, true);
  const ids = model.tokenizer.encodeTemplate(text, limit);
  if (ids.length > limit) throw new PromptTooLong(ids.length, context, true);
  const turn = text.slice(Math.max(0, text.lastIndexOf("<|im_start|>")));
  return { text, ids, startInReasoning: turn.lastIndexOf("<think>") > turn.lastIndexOf("</think>") };
}

// The images of a conversation in the order the template renders them (message by message, part by part).
function conversationImages(conversation: Conversation): ImageSource[] {
  return conversation.messages.flatMap((m) => (m.role === "user" || m.role === "tool" ? m.content.flatMap((p) => (p.type === "image" ? [p.source] : [])) : []));
}

// The prompt with every image's placeholder expanded to its rows, and what the engine needs of the images. The
// images are encoded here (or found in the vision encoder's cache by content), before the request reaches the engine.
async function withImages(model: ChatModelParts, conversation: Conversation, ids: Int32Array, signal: AbortSignal): Promise<{ ids: Int32Array; images?: PromptImages }> {
  const sources = conversationImages(conversation);
  if (sources.length === 0) return { ids };
  const vision = model.vision;
  if (!vision) throw new Error(`${model.id} does not accept images`);
  const encoded = [];
  for (const [k, source] of sources.entries()) encoded.push(await vision.encode(source, signal).catch((e: unknown) => Promise.reject(numbered(e, k, sources.length))));
  const expanded = expandImagePads(ids, vision.padTokenId, encoded.map((im) => im.tokens));
  return { ids: expanded.ids, images: promptImages(expanded.ids.length, expanded.starts, encoded, vision.info.spatialMergeSize) };
}

// "image 2 of 3: …" when a conversation has several images, so the client knows which one failed.
function numbered(e: unknown, k: number, n: number): unknown {
  if (n > 1 && e instanceof Error) e.message = `image ${k + 1} of ${n}: ${e.message}`;
  return e;
}

export function countTokens(model: Pick<ChatModelParts, "tokenizer" | "template" | "vision" | "contextLength">, conversation: Conversation): number {
  return promptTokens(model, conversation, renderPrompt(model, conversation).ids);
}

// How many tokens the model sees for the rendered prompt: each image's one placeholder id stands for tokensFor(image).
function promptTokens(model: Pick<ChatModelParts, "vision">, conversation: Conversation, ids: Int32Array): number {
  const sources = conversationImages(conversation);
  if (sources.length === 0 || !model.vision) return ids.length;
  return ids.length - sources.length + sources.reduce((n, s) => n + model.vision!.tokensFor(s), 0);
}

// The prompt as text (escape()'s marks removed: what a client reading it expects) and its token count.
export function promptOf(model: Pick<ChatModelParts, "tokenizer" | "template" | "vision" | "contextLength">, conversation: Conversation): { text: string; tokens: number } {
  const rendered = renderPrompt(model, conversation);
  return { text: model.tokenizer.unescape(rendered.text), tokens: promptTokens(model, conversation, rendered.ids) };
}

// Holds back visible text that may be the start of a stop string; reports the first complete match.
export class StopMatcher {
  private buf = "";
  private readonly stops: string[];

  constructor(stops: string[]) {
    this.stops = stops.filter((s) => s.length > 0);
  }

  // The text that is safe to show, and whether a stop string ended the answer (the text then ends before it).
  push(text: string): { text: string; stopped: boolean } {
    if (this.stops.length === 0) return { text, stopped: false };
    this.buf += text;
    let at = -1;
    for (const s of this.stops) {
      const i = this.buf.indexOf(s);
      if (i >= 0 && (at < 0 || i < at)) at = i;
    }
    if (at >= 0) {
      const out = this.buf.slice(0, at);
      this.buf = "";
      return { text: out, stopped: true };
    }
    let hold = 0;
    for (const s of this.stops) {
      for (let n = Math.min(s.length - 1, this.buf.length); n > hold; n--) {
        if (this.buf.endsWith(s.slice(0, n))) {
          hold = n;
          break;
        }
      }
    }
    const out = this.buf.slice(0, this.buf.length - hold);
    this.buf = this.buf.slice(this.buf.length - hold);
    return { text: out, stopped: false };
  }

  flush(): string {
    const out = this.buf;
    this.buf = "";
    return out;
  }
}

function tokenLogprob(tok: Tokenizer, id: number, logprob: number): Omit<TokenLogprob, "top"> {
  const bytes = tok.tokenBytes(id);
  return { text: tok.decode([id]), bytes: Array.from(bytes), logprob };
}

export async function* generateChat(model: ChatModelParts, conversation: Conversation, options: GenerationOptions): AsyncGenerator<ChatEvent> {
  const rendered = renderPrompt(model, conversation, model.contextLength);
  const { ids, images } = await withImages(model, conversation, rendered.ids, options.signal);
  const prompt = { ...rendered, ids };
  if (prompt.ids.length >= model.contextLength) throw new PromptTooLong(prompt.ids.length, model.contextLength);
  const maxTokens = Math.min(options.maxTokens ?? model.maxOutputTokens, model.maxOutputTokens, model.contextLength - prompt.ids.length);

  // Compiled before the engine sees the request, so a slow compile holds no engine slot; then one matcher per sequence.
  const grammar = await prepareGrammar(model, conversation);
  const constraint: TokenConstraint | undefined = grammar ? await grammar.start({ thinking: prompt.startInReasoning }) : undefined;

  // Our own controller: a stop string aborts the request; so does the client's signal.
  const abort = new AbortController();
  const onAbort = () => abort.abort();
  options.signal.addEventListener("abort", onAbort);
  if (options.signal.aborted) abort.abort();

  const tok = model.tokenizer;
  const stopTokens = new Set(model.stopTokens);
  const detok = new IncrementalDetokenizer(tok);
  const parser = new OutputParser({ tools: offeredTools(conversation), startInReasoning: prompt.startInReasoning, ...(grammar ? { constrained: { calls: CALLS_IN[grammar.kind] } } : {}) });
  const stop = new StopMatcher(options.stop);
  const usage = { promptTokens: prompt.ids.length, cachedPromptTokens: 0, completionTokens: 0, reasoningTokens: 0 };
  let pendingLogprobs: TokenLogprob[] = [];
  let stopped = false;
  let started = false;

  // Parser events → ChatEvents: content passes the stop matcher and carries the logprobs of its tokens.
  const forward = (events: ParserEvent[]): ChatEvent[] => {
    const out: ChatEvent[] = [];
    for (const e of events) {
      if (stopped) break;
      if (e.type !== "content") {
        out.push(e);
        continue;
      }
      const r = stop.push(e.text);
      stopped = r.stopped;
      if (r.text) {
        const ev: ChatEvent = { type: "content", text: r.text };
        if (options.logprobs !== undefined) {
          ev.logprobs = pendingLogprobs;
          pendingLogprobs = [];
        }
        out.push(ev);
      }
    }
    return out;
  };

  let reason: "stop" | "length" | "cancelled" | "constraint_complete" = "stop";
  let completed = false;
  try {
    const stream = model.engine.generate({
      prompt: prompt.ids,
      maxTokens,
      sampling: { ...options.sampling, seed: options.sampling.seed ?? Math.floor(Math.random() * 2 ** 32) },
      seeded: options.sampling.seed !== undefined,
      stopTokens: model.stopTokens,
      topLogprobs: options.logprobs,
      draft: options.draft,
      signal: abort.signal,
      constraint,
      images,
    });
    for await (const ev of stream) {
      if (ev.type === "admitted") {
        usage.cachedPromptTokens = ev.cachedPromptTokens;
        usage.promptTokens = ev.promptTokens;
        started = true;
        yield { type: "start", promptTokens: ev.promptTokens, cachedPromptTokens: ev.cachedPromptTokens };
        continue;
      }
      if (ev.type === "done") {
        reason = ev.reason;
        completed = true;
        break;
      }
      for (const t of ev.tokens) {
        usage.completionTokens++;
        if (parser.inReasoning) usage.reasoningTokens++;
        if (stopTokens.has(t.id)) continue;
        if (options.logprobs !== undefined && t.logprob !== undefined) {
          pendingLogprobs.push({
            ...tokenLogprob(tok, t.id, t.logprob),
            top: (t.top ?? []).map((x) => tokenLogprob(tok, x.id, x.logprob)),
          });
        }
        for (const out of forward(parser.push(detok.push(t.id)))) yield out;
        // A token that fed reasoning, format newlines or tool-call markup has no content to carry its logprob.
        if (!parser.inContent) pendingLogprobs = [];
        if (stopped) break;
      }
      if (stopped) break;
    }
  } finally {
    options.signal.removeEventListener("abort", onAbort);
    // A stop string, an error, or a consumer that stopped reading: the request ends now.
    if (!completed) abort.abort();
    // The engine no longer touches the constraint: it is done, or the abort cancelled it at once (the scheduler
    // neither fills masks for nor hands tokens to a cancelled sequence).
    constraint?.release?.();
  }
  if (!started) yield { type: "start", promptTokens: usage.promptTokens, cachedPromptTokens: usage.cachedPromptTokens };

  if (!stopped) {
    for (const out of forward(parser.push(detok.flush()))) yield out;
    for (const out of forward(parser.finish())) yield out;
  }
  // The held possible stop-string prefix that never completed is shown.
  if (!stopped) {
    const rest = stop.flush();
    if (rest) yield { type: "content", text: rest, ...(options.logprobs !== undefined ? { logprobs: pendingLogprobs } : {}) };
  }
  let finishReason: FinishReason;
  if (stopped) finishReason = "stop";
  else if (options.signal.aborted || reason === "cancelled") finishReason = "cancelled";
  else if (reason === "length") finishReason = "length";
  else finishReason = parser.toolCalls.length > 0 ? "tool_calls" : "stop";
  yield { type: "done", finishReason, usage };
}

// A ChatModel over the parts of a loaded model (src/models/ assembles them).
export function chatModel(parts: ChatModelParts): ChatModel {
  return {
    id: parts.id,
    contextLength: parts.contextLength,
    maxOutputTokens: parts.maxOutputTokens,
    vocabSize: parts.tokenizer.vocabSize,
    hasToken: (id) => parts.tokenizer.hasToken(id),
    vision: parts.vision !== undefined,
    runtime: parts.runtime,
    generate: (conversation, options) => generateChat(parts, conversation, options),
    countTokens: (conversation) => countTokens(parts, conversation),
    prompt: (conversation) => promptOf(parts, conversation),
    tokenizer: parts.tokenizer,
    stats: () => parts.engine.stats(),
  };
}
