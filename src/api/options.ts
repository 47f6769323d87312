// What every surface shares when it turns a request into GenerationOptions: sampling settings over the server's
// defaults, the output cap, stop strings and the abort signal.
import type { ChatModel, GenerationOptions, ReasoningEffort, SamplingOptions } from "../chat/ir.ts";

// Qwen3.5-family recommendations for thinking-mode coding; `createServer({ sampling })` overrides them.
export const DEFAULT_SAMPLING: SamplingOptions = {
  temperature: 0.6,
  topP: 0.95,
  topK: 20,
  minP: 0,
  presencePenalty: 0,
  frequencyPenalty: 0,
  repetitionPenalty: 1,
};

export type RequestSampling = {
  temperature?: number | null;
  topP?: number | null;
  topK?: number | null;
  minP?: number | null;
  presencePenalty?: number | null;
  frequencyPenalty?: number | null;
  repetitionPenalty?: number | null;
  seed?: number | null;
};

export type OptionsInput = {
  maxTokens?: number | null;
  stop?: string[];
  sampling: RequestSampling;
  logprobs?: number;
};

export function generationOptions(model: ChatModel, input: OptionsInput, defaults: SamplingOptions, signal: AbortSignal): GenerationOptions {
  const s = input.sampling;
  const sampling: SamplingOptions = {
    temperature: s.temperature ?? defaults.temperature,
    topP: s.topP ?? defaults.topP,
    // Some clients send -1 for "off", as llama.cpp accepts.
    topK: s.topK === undefined || s.topK === null ? defaults.topK : Math.max(0, s.topK),
    minP: s.minP ?? defaults.minP,
    presencePenalty: s.presencePenalty ?? defaults.presencePenalty,
    frequencyPenalty: s.frequencyPenalty ?? defaults.frequencyPenalty,
    repetitionPenalty: s.repetitionPenalty ?? defaults.repetitionPenalty,
  };
  if (s.seed !== undefined && s.seed !== null) sampling.seed = s.seed;
  // Agents ask for more than a local model gives (Claude Code: 32000): the model's cap wins, silently.
  const maxTokens = Math.min(input.maxTokens ?? model.maxOutputTokens, model.maxOutputTokens);
  const options: GenerationOptions = { maxTokens, stop: (input.stop ?? []).filter((x) => x.length > 0), sampling, signal };
  if (input.logprobs !== undefined) options.logprobs = input.logprobs;
  return options;
}

export const EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const satisfies readonly ReasoningEffort[];

// Thinking settings from an OpenAI-style effort: "none" turns thinking off, anything else keeps it on at that level.
export function thinkingFromEffort(effort: ReasoningEffort | null | undefined): { enabled: boolean; effort?: ReasoningEffort } {
  if (effort === "none") return { enabled: false };
  return effort ? { enabled: true, effort } : { enabled: true };
}
