// The tensors of a checkpoint of a given config.json as libsplash's loaders read them (splash_inventory_*,
// native/api/inventory.c), without any weights: name, shape (PyTorch order), the part that loads it, and its bytes in
// each weight type; and the sequence state a load of it sizes. The one list of a checkpoint's tensors: the memory
// plan (models/memory.ts), random-weight checkpoints (bench/random-checkpoint.ts) and the GGUF export's tests count
// over it.
import { CString, type Pointer } from "bun:ffi";
import type { JsonObject } from "../models/config.ts";
import { KV_TYPES, type KvType } from "../models/kv-type.ts";
import { TENSOR_KINDS, type TensorKind, type WeightType } from "../models/spec.ts";
import { check } from "./errors.ts";
import { native } from "./library.ts";
import { DRAFTER_CODES } from "./model.ts";

// splash.h's SPLASH_PART_* and SPLASH_WEIGHT_*, by the name after the prefix (test/unit/native/layout.test.ts).
export const PART_CODES = { text: 0, mtp: 1, vision: 2, drafter: 3 } as const;
export const WEIGHT_CODES = { bf16: 0, q8: 1, q4: 2, mlx4: 3, mlx8: 4 } as const;
export const MAX_DIMS = 8;

export type Part = keyof typeof PART_CODES;
// kind: what the loader took it as (splash_tensor_kind), which the recipe gives a storage to.
export type InventoryTensor = { name: string; shape: number[]; part: Part; kind: TensorKind; bytes: Record<WeightType, number> };
// K/V bytes per token in each KV type and one state slot's bytes: the target's (its full-attention layers, a GDN
// slot), and the drafter's (the MTP layer in a target's inventory, zeros without one; the DFlash drafter in a
// drafter's).
type State = { kvBytesPerToken: Record<KvType, number>; slotBytes: number };
export type SequenceState = State & { drafter: State };
export type Inventory = { tensors: InventoryTensor[]; state: SequenceState };

const PARTS = Object.keys(PART_CODES) as Part[];
const WEIGHT_OF: Record<WeightType, keyof typeof WEIGHT_CODES> = { bf16: "bf16", q8: "q8", q4: "q4", "mlx-affine-4": "mlx4", "mlx-affine-8": "mlx8" };

// The tensors of the checkpoint a target's config.json describes (parts text, mtp, vision); with a DFlash or DFlash2
// drafter's config.json, that drafter's tensors alone (part drafter), as attaching it to that target reads them.
// Throws NativeError with the loader's message when the config is one it refuses.
export function inventory(config: JsonObject, drafter?: { kind: "dflash" | "dflash2"; config: JsonObject }): Inventory {
  const lib = native();
  const out = new BigUint64Array(1);
  const cstr = (o: JsonObject) => Buffer.from(`${JSON.stringify(o)}\0`);
  const drafterKind = drafter ? DRAFTER_CODES[drafter.kind] : 0;
  check(lib, "splash_inventory_create", lib.splash_inventory_create(cstr(config), drafterKind, drafter ? cstr(drafter.config) : null, out));
  const handle = Number(out[0]) as Pointer;
  try {
    const part = new Int32Array(1);
    const kind = new Int32Array(1);
    const ndim = new Int32Array(1);
    const shape = new BigInt64Array(MAX_DIMS);
    const bytes = new BigUint64Array(Object.keys(WEIGHT_CODES).length);
    const tensors: InventoryTensor[] = [];
    const n = Number(lib.splash_inventory_count(handle));
    for (let i = 0; i < n; i++) {
      const name = lib.splash_inventory_tensor(handle, i, part, kind, ndim, shape, bytes)!;
      tensors.push({
        name: new CString(name).toString(),
        shape: Array.from(shape.subarray(0, ndim[0]!), Number),
        part: PARTS[part[0]!]!,
        kind: TENSOR_KINDS[kind[0]!]!,
        bytes: Object.fromEntries(Object.entries(WEIGHT_OF).map(([w, code]) => [w, Number(bytes[WEIGHT_CODES[code]]!)])) as Record<WeightType, number>,
      });
    }
    const [kv, drafterKv] = [new BigUint64Array(KV_TYPES.length), new BigUint64Array(KV_TYPES.length)];
    const [slot, drafterSlot] = [new BigUint64Array(1), new BigUint64Array(1)];
    lib.splash_inventory_state(handle, kv, slot, drafterKv, drafterSlot);
    const state = (k: BigUint64Array, s: BigUint64Array): State => ({
      kvBytesPerToken: Object.fromEntries(KV_TYPES.map((t, code) => [t, Number(k[code]!)])) as Record<KvType, number>,
      slotBytes: Number(s[0]!),
    });
    return { tensors, state: { ...state(kv, slot), drafter: state(drafterKv, drafterSlot) } };
  } finally {
    lib.splash_inventory_free(handle);
  }
}
