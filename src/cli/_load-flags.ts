// The flags that say how a model is loaded, declared once with one meaning for every command that takes them:
//
//   --backend B   where it runs: auto (the GPU when one is usable, else the CPU), cpu, vulkan or metal
//   --threads N   CPU threads, 1 … 1024; left out, one per core
//   --kv-type T   the KV cache's element type
//   --quant L     the weight level: bf16 (the weights as stored), q8 or q4. A benchmark that compares levels takes
//                 several, comma-separated; a command that cannot produce a level refuses it by name (import packs
//                 q8 or q4 only). Each command's default is its own and its help says it.
import type { ArgsDef } from "citty";
import { z } from "zod";
import { KV_CHOICES, type KvChoice } from "../models/kv-type.ts";
import { QUANTS, type Quant } from "../models/spec.ts";
import { BACKENDS, type Backend } from "../native/model.ts";
import { intOption, parseOption, UsageError } from "./_command.ts";

export const MAX_THREADS = 1024;

export const loadFlags = {
  backend: { type: "enum", options: [...BACKENDS], description: "auto (the GPU when one is usable, else the CPU), cpu, vulkan or metal (default: SPLASH_BACKEND, else auto)" },
  threads: { type: "string", description: `CPU threads, 1 to ${MAX_THREADS} (default: one per core)` },
  kvType: {
    type: "enum",
    options: [...KV_CHOICES],
    default: "auto",
    description: "KV cache element type: auto (the most compact type measured to hold the model's parity bound: int8 for splash-tiny and Qwen3.8-27B, else f32; narrowed to what the backend has), f32, f16 or int8",
  },
} as const satisfies ArgsDef;

// --quant for a command that loads at one level; `dflt` says what it does when the flag is left out.
export function quantFlag(dflt: string, levels: readonly Quant[] = QUANTS): { type: "enum"; options: string[]; description: string } {
  return { type: "enum", options: [...levels], description: `Weight level: ${levelNames(levels)} (default: ${dflt})` };
}

// --quant for a benchmark that measures several levels.
export function quantsFlag(levels: readonly Quant[], dflt: readonly Quant[]): { type: "string"; description: string } {
  return { type: "string", description: `Weight levels to measure, comma-separated: ${levelNames(levels)} (default ${dflt.join(",")})` };
}

function levelNames(levels: readonly Quant[]): string {
  const named = levels.map((l) => (l === "bf16" ? "bf16 (as stored)" : l));
  return named.length < 2 ? named.join("") : `${named.slice(0, -1).join(", ")} or ${named.at(-1)}`;
}

export type LoadFlags = { backend?: Backend; threads?: number; kvType: KvChoice };

export function parseLoadFlags(command: string, args: { backend?: string; threads?: string; kvType?: string }): LoadFlags {
  const backend = args.backend === undefined ? undefined : parseOption(command, "backend", z.enum(BACKENDS), args.backend);
  const threads = parseThreads(command, args.threads);
  const kvType = parseOption(command, "kv-type", z.enum(KV_CHOICES), args.kvType ?? "auto");
  return { ...(backend ? { backend } : {}), ...(threads !== undefined ? { threads } : {}), kvType };
}

// --threads N, or undefined when left out (one per core).
export function parseThreads(command: string, value: string | undefined): number | undefined {
  return value === undefined ? undefined : parseOption(command, "threads", intOption(1, MAX_THREADS), value);
}

// --quant L among `levels`, or undefined when left out.
export function parseQuant<L extends Quant>(command: string, value: string | undefined, levels: readonly L[] = QUANTS as unknown as readonly L[]): L | undefined {
  return value === undefined ? undefined : parseOption(command, "quant", levelSchema(levels), value);
}

// --quant L1,L2,… among `levels`, in the order given, each once; `dflt` when left out.
export function parseQuants<L extends Quant>(command: string, value: string | undefined, levels: readonly L[], dflt: readonly L[]): L[] {
  if (value === undefined) return [...dflt];
  const list = value.split(",").map((l) => parseOption(command, "quant", levelSchema(levels), l.trim()));
  if (new Set(list).size !== list.length) throw new UsageError(`--quant ${JSON.stringify(value)}: a level is named twice`, command);
  return list;
}

function levelSchema<L extends Quant>(levels: readonly L[]): z.ZodType<L> {
  return z.enum(levels as unknown as [L, ...L[]], { error: `expected ${levels.join(", ")}` }) as unknown as z.ZodType<L>;
}
