// The element type of a model's KV cache (`--kv-type auto|f32|f16|int8`): every attention layer's K and V, the
// drafter's too, as native/include/splash.h defines SPLASH_KV_* (the index here is the code). Attention accumulates
// in f32 whatever the type; the GDN state stays f32.
//
//   f32   4 bytes a value, exact
//   f16   2 bytes a value
//   int8  groups of 32 values as 32 int8 + an f16 scale (34 bytes, 8.5 bits a value), the Q8 weight row's layout
//
// auto: the most compact type measured to keep a model's predictions within KV_PARITY_BOUND of the f32 cache's
// (src/bench/kv-parity.ts, `splash bench kv`), as its spec records it (`cache.kv`); f32 for a checkpoint without a
// spec. When the backend lacks that type, the next wider one it has, with a log line saying so.
import { CliError } from "../cli/_command.ts";
import { log } from "../log.ts";
import type { Model } from "../native/model.ts";

export const KV_TYPES = ["f32", "f16", "int8"] as const;
export type KvType = (typeof KV_TYPES)[number];
export const KV_CHOICES = ["auto", ...KV_TYPES] as const;
export type KvChoice = (typeof KV_CHOICES)[number];

// From the most compact to f32: the order auto falls back along.
const WIDER: Record<KvType, KvType[]> = { int8: ["int8", "f16", "f32"], f16: ["f16", "f32"], f32: ["f32"] };

// Sets the model's KV type from the choice (before its cache exists) and returns it. `measured`: the type the
// model's spec records as holding the parity bound (undefined: none measured, so auto means f32).
export function applyKvType(model: Model, choice: KvChoice, measured: KvType | undefined): KvType {
  const have = model.kvTypes;
  const backend = model.info.backend;
  if (choice !== "auto") {
    if (!have.includes(choice)) {
      throw new CliError(`--kv-type ${choice}: the ${backend} backend has no ${choice} KV cache (it has ${have.join(", ")})`, `use --kv-type auto or one of ${have.join(", ")}`, 2);
    }
    model.setKvType(choice);
    return choice;
  }
  const want = measured ?? "f32";
  const type = WIDER[want].find((t) => have.includes(t)) ?? "f32";
  if (type !== want) log.info(`KV cache ${type}: the ${backend} backend has no ${want} KV cache`);
  model.setKvType(type);
  return type;
}
