// zod pieces every surface's request schema uses. Objects strip unknown keys instead of refusing them: agents send
// many fields a local server has no use for, and "Extra inputs are not permitted" is a documented way to break them.
import { z } from "zod";

export const JsonObject = z.record(z.string(), z.unknown());

export const Temperature = (max: number) => z.number().min(0).max(max).nullish();
export const Probability = z.number().min(0).max(1).nullish();
export const Penalty = z.number().min(-2).max(2).nullish();
export const TopK = z.number().int().min(-1).nullish();
export const Seed = z.number().int().nullish();
export const MaxTokens = z.number().int().min(1).nullish();

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
