// The flags that say how a model is loaded, declared once for every command that loads one (serve, run, logits,
// bench serve and grammar; bench kv and memory take the first two, as they compare KV types): where it runs, with
// how many threads, and the element type of its KV cache.
import type { ArgsDef } from "citty";
import { z } from "zod";
import { KV_CHOICES, type KvChoice } from "../models/kv-type.ts";
import { BACKENDS, type Backend } from "../native/model.ts";
import { intOption, parseOption } from "./_command.ts";

export const loadFlags = {
  backend: { type: "enum", options: [...BACKENDS], description: "auto (the GPU when one is usable, else the CPU), cpu, vulkan or metal (default: SPLASH_BACKEND, else auto)" },
  threads: { type: "string", description: "CPU threads (default: one per core)" },
  kvType: {
    type: "enum",
    options: [...KV_CHOICES],
    default: "auto",
    description: "KV cache element type: auto (the most compact type measured to hold the model's parity bound: int8 for splash-tiny and Qwen3.8-27B, else f32; narrowed to what the backend has), f32, f16 or int8",
  },
} as const satisfies ArgsDef;

export type LoadFlags = { backend?: Backend; threads?: number; kvType: KvChoice };

export function parseLoadFlags(command: string, args: { backend?: string; threads?: string; kvType?: string }): LoadFlags {
  const backend = args.backend === undefined ? undefined : parseOption(command, "backend", z.enum(BACKENDS), args.backend);
  const threads = args.threads === undefined ? undefined : parseOption(command, "threads", intOption(1, 1024), args.threads);
  const kvType = parseOption(command, "kv-type", z.enum(KV_CHOICES), args.kvType ?? "auto");
  return { ...(backend ? { backend } : {}), ...(threads !== undefined ? { threads } : {}), kvType };
}
