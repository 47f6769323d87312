// Struct layouts of the ABI structs the binding reads and writes (native/include/splash.h), in one place.
// Offsets follow C's natural alignment; test/unit/native/layout.test.ts compares every field with offsetof() as the
// C compiler sees it (native/tests/abi_layout.c), so a header change that the binding missed fails the suite.

export type FieldType = "i32" | "u32" | "f32" | "u64" | "ptr";
type FieldSpec = readonly [name: string, type: FieldType | StructLayout];
export type Field = { offset: number; type: FieldType | StructLayout };
export type StructLayout = { name: string; size: number; align: number; fields: Record<string, Field> };

const SIZE: Record<FieldType, number> = { i32: 4, u32: 4, f32: 4, u64: 8, ptr: 8 };

function struct(name: string, specs: readonly FieldSpec[]): StructLayout {
  const fields: Record<string, Field> = {};
  let offset = 0;
  let align = 1;
  for (const [field, type] of specs) {
    const size = typeof type === "string" ? SIZE[type] : type.size;
    const a = typeof type === "string" ? SIZE[type] : type.align;
    offset = Math.ceil(offset / a) * a;
    fields[field] = { offset, type };
    offset += size;
    align = Math.max(align, a);
  }
  return { name, size: Math.ceil(offset / align) * align, align, fields };
}

export const LOAD_OPTIONS = struct("splash_load_options", [
  ["struct_size", "u32"],
  ["quant", "ptr"],
  ["n_threads", "i32"],
  ["max_step_tokens", "i32"],
  ["backend", "i32"],
  ["n_tokens", "i32"],
  ["tokens", "ptr"],
]);

export const MODEL_INFO = struct("splash_model_info", [
  ["struct_size", "u32"],
  ["arch", "i32"],
  ["vocab_size", "i32"],
  ["hidden_size", "i32"],
  ["n_layers", "i32"],
  ["n_full_attention_layers", "i32"],
  ["n_linear_attention_layers", "i32"],
  ["max_position_embeddings", "i32"],
  ["has_mtp", "i32"],
  ["has_vision", "i32"],
  ["n_threads", "i32"],
  ["max_step_tokens", "i32"],
  ["kv_type", "i32"],
  ["weight_bytes", "u64"],
  ["scratch_bytes", "u64"],
  ["kv_bytes_per_token", "u64"],
  ["state_bytes", "u64"],
  ["decode_bytes_per_token", "u64"],
]);

export const SAMPLING = struct("splash_sampling", [
  ["temperature", "f32"],
  ["top_p", "f32"],
  ["top_k", "i32"],
  ["min_p", "f32"],
  ["presence_penalty", "f32"],
  ["frequency_penalty", "f32"],
  ["repetition_penalty", "f32"],
  ["n_bias", "i32"],
  ["seed", "u64"],
  ["bias_ids", "ptr"],
  ["bias", "ptr"],
]);

export const SEQ = struct("splash_seq", [
  ["slot", "i32"],
  ["n_past", "i32"],
  ["n_tokens", "i32"],
  ["n_logits", "i32"],
  ["tokens", "ptr"],
  ["pages", "ptr"],
  ["n_pages", "i32"],
  ["sample", "i32"],
  ["sampling", SAMPLING],
  ["penalty_tokens", "ptr"],
  ["n_penalty_tokens", "i32"],
  ["n_top_logprobs", "i32"],
  ["allowed", "ptr"],
  ["logits", "ptr"],
  ["token", "i32"],
  ["logprob", "f32"],
  ["top_ids", "ptr"],
  ["top_logprobs", "ptr"],
  ["embeds", "ptr"],
  ["n_embeds", "i32"],
  ["positions", "ptr"],
  ["error", "ptr"],
  ["speculate", "ptr"],
]);

export const DRAFTER_OPTIONS = struct("splash_drafter_options", [
  ["struct_size", "u32"],
  ["kind", "i32"],
  ["dir", "ptr"],
  ["max_draft", "i32"],
  ["max_seqs", "i32"],
]);

export const DRAFTER_INFO = struct("splash_drafter_info", [
  ["struct_size", "u32"],
  ["kind", "i32"],
  ["max_draft", "i32"],
  ["max_seqs", "i32"],
  ["block_size", "i32"],
  ["mask_token_id", "i32"],
  ["weight_bytes", "u64"],
  ["scratch_bytes", "u64"],
  ["kv_bytes_per_token", "u64"],
  ["state_bytes", "u64"],
]);

export const SPECULATE = struct("splash_speculate", [
  ["n_draft", "i32"],
  ["n_proposed", "i32"],
  ["allowed", "ptr"],
  ["n_accepted", "i32"],
  ["logprobs", "ptr"],
  ["top_ids", "ptr"],
  ["top_logprobs", "ptr"],
  ["n_next", "i32"],
  ["next", "ptr"],
  ["next_logits", "ptr"],
  ["next_probs", "ptr"],
]);

export const VISION_INFO = struct("splash_vision_info", [
  ["struct_size", "u32"],
  ["depth", "i32"],
  ["hidden_size", "i32"],
  ["out_hidden_size", "i32"],
  ["in_channels", "i32"],
  ["patch_size", "i32"],
  ["temporal_patch_size", "i32"],
  ["spatial_merge_size", "i32"],
  ["image_token_id", "i32"],
  ["video_token_id", "i32"],
  ["vision_start_token_id", "i32"],
  ["vision_end_token_id", "i32"],
  ["weight_bytes", "u64"],
]);

export const METAL_INFO = struct("splash_metal_info", [
  ["struct_size", "u32"],
  ["apple_family", "i32"],
  ["metal3", "i32"],
  ["usable", "i32"],
  ["recommended_working_set", "u64"],
  ["max_buffer", "u64"],
  ["wired_limit", "u64"],
]);

export const LAYOUTS = [LOAD_OPTIONS, MODEL_INFO, SAMPLING, SEQ, DRAFTER_OPTIONS, DRAFTER_INFO, SPECULATE, VISION_INFO, METAL_INFO] as const;

// Every field of a layout with its absolute offset, nested structs flattened as "outer.inner".
export function flatten(layout: StructLayout, prefix = "", base = 0): { name: string; offset: number; type: FieldType }[] {
  return Object.entries(layout.fields).flatMap(([name, f]) =>
    typeof f.type === "string"
      ? [{ name: prefix + name, offset: base + f.offset, type: f.type }]
      : flatten(f.type, `${prefix}${name}.`, base + f.offset),
  );
}

// Each layout's fields by path ("sampling.seed"), resolved once: the step writes a few dozen fields per sequence.
const resolved = new WeakMap<StructLayout, Map<string, { offset: number; type: FieldType }>>();

function field(layout: StructLayout, path: string): { offset: number; type: FieldType } {
  let fields = resolved.get(layout);
  if (!fields) resolved.set(layout, (fields = new Map(flatten(layout).map((f) => [f.name, f]))));
  const f = fields.get(path);
  if (!f) throw new Error(`${layout.name} has no field ${path}`);
  return f;
}

// Writes `value` into field `path` ("sampling.seed") of the struct at `base` in `view`.
export function setField(view: DataView, layout: StructLayout, path: string, value: number | bigint, base = 0): void {
  const f = field(layout, path);
  const at = base + f.offset;
  switch (f.type) {
    case "i32":
      return view.setInt32(at, Number(value), true);
    case "u32":
      return view.setUint32(at, Number(value), true);
    case "f32":
      return view.setFloat32(at, Number(value), true);
    case "u64":
    case "ptr":
      if (typeof value === "number" && value >= 0) {
        // two halves: no BigInt for each pointer of each step
        view.setUint32(at, value % 2 ** 32, true);
        return view.setUint32(at + 4, Math.floor(value / 2 ** 32), true);
      }
      return view.setBigUint64(at, BigInt(value), true);
  }
}

export function getField(view: DataView, layout: StructLayout, path: string, base = 0): number {
  const f = field(layout, path);
  const at = base + f.offset;
  switch (f.type) {
    case "i32":
      return view.getInt32(at, true);
    case "u32":
      return view.getUint32(at, true);
    case "f32":
      return view.getFloat32(at, true);
    case "u64":
    case "ptr":
      return Number(view.getBigUint64(at, true));
  }
}
