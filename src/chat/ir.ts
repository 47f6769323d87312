// The conversation IR: the one internal shape every API surface converts to (requests) and from (events).
// OpenAI Chat, OpenAI Responses and Anthropic Messages each have a converter in src/api/; the chat template
// renders this shape; the output parser produces ChatEvents. Token ids appear only where a client asks for them
// (ChatModel.tokenizer).

import type { MemoryPlan } from "../engine/memory-plan.ts";
import type { EngineStats, Sampling } from "../engine/types.ts";
import type { DraftMethod, Quant } from "../models/spec.ts";
import type { Tokenizer } from "../tokenizer/tokenizer.ts";

export type JsonSchema = Record<string, unknown>;

// Image bytes as the client sent them; decoding and preprocessing belong to the vision path.
export type ImageSource = { kind: "bytes"; data: Uint8Array; mediaType?: string } | { kind: "url"; url: string };

export type TextPart = { type: "text"; text: string };
export type ImagePart = { type: "image"; source: ImageSource };
export type ContentPart = TextPart | ImagePart;

export type ToolCall = {
  id: string;
  name: string;
  // Parsed arguments when they are a JSON object (what the model's XML produces after coercion); a client may
  // send arguments that are not an object, which are kept as the raw string it sent.
  arguments: Record<string, unknown> | string;
};

export type Message =
  | { role: "system"; content: TextPart[] }
  | { role: "user"; content: ContentPart[] }
  | { role: "assistant"; content: TextPart[]; reasoning?: string; toolCalls?: ToolCall[] }
  | { role: "tool"; toolCallId: string; name?: string; content: ContentPart[] };

export type ToolDef = { name: string; description?: string; parameters: JsonSchema; strict?: boolean };

export type ToolChoice = "auto" | "none" | "required" | { name: string };

export type ResponseFormat =
  | { type: "text" }
  | { type: "json_object" }
  | { type: "json_schema"; name?: string; schema: JsonSchema; strict?: boolean };

// low/medium/high come from OpenAI's reasoning_effort; xhigh is Qwen3.8's own default level.
export type ReasoningEffort = "none" | "minimal" | "low" | "medium" | "high" | "xhigh";

export type Conversation = {
  messages: Message[];
  tools: ToolDef[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  // enabled=false renders the empty thinking block (the template's enable_thinking=false).
  thinking: { enabled: boolean; effort?: ReasoningEffort; preserve?: boolean };
  responseFormat: ResponseFormat;
};

// The tools the model is shown and may call: the request's, none with tool_choice "none". Only these become tool
// calls; any other call the model writes stays text.
export function offeredTools(conversation: Pick<Conversation, "tools" | "toolChoice">): ToolDef[] {
  return conversation.toolChoice === "none" ? [] : conversation.tools;
}

// The engine's sampling settings; a request without a seed gets a random one.
export type SamplingOptions = Omit<Sampling, "seed"> & { seed?: number };

export type GenerationOptions = {
  maxTokens?: number; // undefined = up to the model's context
  stop: string[]; // stop strings, matched on visible content
  sampling: SamplingOptions;
  logprobs?: number; // number of top alternatives per token; undefined = no logprobs
  draft?: "auto" | DraftMethod;
  signal: AbortSignal; // client disconnect or cancel: generation stops and frees its memory at once
};

export type Usage = {
  promptTokens: number;
  cachedPromptTokens: number; // prompt tokens served from the prefix cache
  completionTokens: number;
  reasoningTokens: number;
};

export type FinishReason = "stop" | "length" | "tool_calls" | "cancelled";

export type TokenLogprob = { text: string; bytes: number[]; logprob: number; top: { text: string; bytes: number[]; logprob: number }[] };

// What a generation streams back, in order. Text deltas concatenate to the full text of their channel.
export type ChatEvent =
  | { type: "start"; promptTokens: number; cachedPromptTokens: number }
  | { type: "reasoning"; text: string }
  | { type: "content"; text: string; logprobs?: TokenLogprob[] }
  | { type: "tool_call_start"; index: number; id: string; name: string }
  | { type: "tool_call_delta"; index: number; argumentsJson: string } // a piece of the JSON arguments string
  | { type: "tool_call_end"; index: number; call: ToolCall }
  | { type: "done"; finishReason: FinishReason; usage: Usage };

// What a served model runs on and how its memory is laid out (the server's page shows it).
export type ModelRuntime = {
  backend: string; // "cpu", "vulkan: <device>", "metal: <device>"
  weights: Quant; // the level the weights run at
  weightBytes: number;
  memory: MemoryPlan;
};
// The served tokenizer as clients may use it (POST /tokenize, /detokenize).
export type ServedTokenizer = Pick<Tokenizer, "vocabSize" | "encode" | "encodeWithAddedTokens" | "decode" | "tokenBytes">;

// A served model as the server sees it: conversations in, ChatEvents out. Implemented over an Engine by
// src/chat/generate.ts; generation never hands the server token ids.
export interface ChatModel {
  readonly id: string;
  readonly contextLength: number; // tokens, prompt + output
  readonly maxOutputTokens: number; // default and cap for one answer
  readonly vocabSize: number; // the tokenizer's ids, 0 … vocabSize − 1 (the bound of top_k)
  hasToken(id: number): boolean; // whether a client's token id (logit_bias) names a token of the tokenizer
  readonly vision: boolean; // accepts image parts
  readonly runtime: ModelRuntime;
  generate(conversation: Conversation, options: GenerationOptions): AsyncIterable<ChatEvent>;
  // Prompt tokens the conversation renders to (Anthropic count_tokens, context-length checks).
  countTokens(conversation: Conversation): number;
  // The prompt text the conversation renders to, exactly as the engine's prompt is tokenized from it, and its
  // countTokens (POST /apply-template).
  prompt(conversation: Conversation): { text: string; tokens: number };
  readonly tokenizer: ServedTokenizer;
  stats(): EngineStats;
}
