// zod pieces every surface's request schema uses. Objects strip unknown keys instead of refusing them: agents send
// many fields a local server has no use for, and "Extra inputs are not permitted" is a documented way to break them.
import { z } from "zod";
import { MAX_TOP_LOGPROBS } from "../native/model.ts";
import { type ApiError, invalidRequest } from "./errors.ts";

export const JsonObject = z.record(z.string(), z.unknown());

// Sampling fields, bounded to what the engine takes (native/api/step.c checks the same per sequence), so a value
// outside is a 400 naming the field and never reaches a batch. Where a vendor documents a range it is that range;
// the engine's fields are 32-bit (floats, and an int for top_k), and every bound keeps a value finite there.
export const Temperature = (max: number) => z.number().min(0).max(max).nullish();
export const Probability = z.number().min(0).max(1).nullish(); // top_p 0 keeps the most likely token alone
export const Penalty = z.number().min(-2).max(2).nullish(); // presence and frequency penalties (OpenAI's range)
export const RepetitionPenalty = z.number().min(0.01).max(100).nullish(); // 1 = off; logits ÷ or × it (transformers)
// −1 and 0 mean off (llama.cpp, vLLM); options.ts also refuses more than the model's vocabulary.
export const TopK = z.number().int().min(-1).max(2 ** 31 - 1).nullish();
export const Seed = z.number().int().nullish(); // any safe integer: the engine's seed is it modulo 2^64
export const MaxTokens = z.number().int().min(1).nullish();
export const TopLogprobs = z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullish();
// OpenAI's range; its keys are token ids, checked against the model in options.ts.
export const LogitBiasMap = z.record(z.string(), z.number().min(-100).max(100));
// Every stop string is matched against the output at each token: a bound on their number bounds that work.
export const StopSequences = z.array(z.string()).max(64);

// Replaces an array element whose `type` is not one the surface knows with `{ type: "ignored", was }`, so unknown
// kinds of items, blocks or tools are accepted and dropped while known kinds still get precise errors from a
// discriminated union. `fill` lets an element without `type` stand for a default kind (Responses messages).
export function tagUnknown(known: readonly string[], fill?: (value: Record<string, unknown>) => string | undefined) {
  const set = new Set(known);
  return (value: unknown): unknown => {
    if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
    const obj = value as Record<string, unknown>;
    if (obj.type === undefined) {
      const type = fill?.(obj);
      return type ? { ...obj, type } : value;
    }
    if (typeof obj.type === "string" && !set.has(obj.type)) return { type: "ignored", was: obj.type };
    return value;
  };
}

export const Ignored = z.object({ type: z.literal("ignored"), was: z.string() });

// A conversation left with no message once the ignored kinds are dropped: the model would have nothing to read.
export function nothingToRead(param: string, skipped: readonly string[]): ApiError {
  const kinds = [...new Set(skipped)];
  const why = kinds.length ? `: ${kinds.join(", ")} ${kinds.length === 1 ? "is a kind" : "are kinds"} Splash skips` : "";
  return invalidRequest(`no message the model can read${why}`, param, "empty_conversation");
}
