// What every surface shares when it turns a request into GenerationOptions: sampling settings over the server's
// defaults, the output cap, stop strings and the abort signal.
import type { ChatModel, GenerationOptions, ReasoningEffort, SamplingOptions } from "../chat/ir.ts";
import type { LogitBias } from "../engine/types.ts";
import { invalidRequest } from "./errors.ts";

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
  logitBias?: LogitBias;
};

export type OptionsInput = {
  maxTokens?: number | null;
  stop?: string[];
  sampling: RequestSampling;
  logprobs?: number;
};

// top_k as the engine takes it: −1, which llama.cpp and vLLM clients send for "off", is the engine's 0.
export const topKOrOff = (k: number) => Math.max(0, k);

export function generationOptions(model: ChatModel, input: OptionsInput, defaults: SamplingOptions, signal: AbortSignal): GenerationOptions {
  const s = input.sampling;
  if (s.topK != null && s.topK > model.vocabSize) throw invalidRequest(`${s.topK} is more than the model's vocabulary of ${model.vocabSize} tokens`, "top_k");
  const sampling: SamplingOptions = {
    temperature: s.temperature ?? defaults.temperature,
    topP: s.topP ?? defaults.topP,
    topK: s.topK == null ? defaults.topK : topKOrOff(s.topK),
    minP: s.minP ?? defaults.minP,
    presencePenalty: s.presencePenalty ?? defaults.presencePenalty,
    frequencyPenalty: s.frequencyPenalty ?? defaults.frequencyPenalty,
    repetitionPenalty: s.repetitionPenalty ?? defaults.repetitionPenalty,
  };
  if (s.seed !== undefined && s.seed !== null) sampling.seed = s.seed;
  if (s.logitBias) sampling.logitBias = s.logitBias;
  // Agents ask for more than a local model gives (Claude Code: 32000): the model's cap wins, silently.
  const maxTokens = Math.min(input.maxTokens ?? model.maxOutputTokens, model.maxOutputTokens);
  const options: GenerationOptions = { maxTokens, stop: (input.stop ?? []).filter((x) => x.length > 0), sampling, signal };
  if (input.logprobs !== undefined) options.logprobs = input.logprobs;
  return options;
}

// OpenAI's logit_bias ({"<token id>": bias}; the schema bounds the values): every key must name a token of the
// model, or the request is a 400 naming it.
export function logitBias(bias: Record<string, number> | null | undefined, model: ChatModel): LogitBias | undefined {
  const entries = Object.entries(bias ?? {});
  if (entries.length === 0) return undefined;
  const ids = new Int32Array(entries.length);
  const values = new Float32Array(entries.length);
  entries.forEach(([key, value], k) => {
    const id = /^\d{1,10}$/.test(key) ? Number(key) : NaN;
    if (!model.hasToken(id)) throw invalidRequest(`${JSON.stringify(key)} is not a token id of this model (0 to ${model.vocabSize - 1})`, `logit_bias.${key}`);
    ids[k] = id;
    values[k] = value;
  });
  return { ids, values };
}

export const EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"] as const satisfies readonly ReasoningEffort[];

// Thinking settings from an OpenAI-style effort: "none" turns thinking off, anything else keeps it on at that level.
export function thinkingFromEffort(effort: ReasoningEffort | null | undefined): { enabled: boolean; effort?: ReasoningEffort } {
  if (effort === "none") return { enabled: false };
  return effort ? { enabled: true, effort } : { enabled: true };
}
