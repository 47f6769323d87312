// The bun:ffi symbol table: every libsplash function the binding calls, with its C signature from
// native/include/splash.h. Keep this in the header's order; the ABI version below must equal SPLASH_ABI_VERSION.
import { FFIType } from "bun:ffi";

export const ABI_VERSION = 16;

export const symbols = {
  splash_abi_version: { args: [], returns: FFIType.i32 },
  splash_version: { args: [], returns: FFIType.cstring },
  splash_last_error: { args: [], returns: FFIType.cstring },
  splash_cpu_features: { args: [], returns: FFIType.cstring },
  // ---- tokenizer (src/tokenizer/native.ts) ----
  splash_tokenizer_create: {
    args: [FFIType.cstring, FFIType.ptr, FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.i32, FFIType.ptr],
    returns: FFIType.i32,
  },
  splash_tokenizer_free: { args: [FFIType.ptr], returns: FFIType.void },
  splash_tokenizer_encode: {
    args: [FFIType.ptr, FFIType.ptr, FFIType.i64, FFIType.ptr, FFIType.i64, FFIType.ptr],
    returns: FFIType.i32,
  },
  // ---- checkpoint files (src/models/files.ts) ----
  splash_checkpoint_open: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_checkpoint_close: { args: [FFIType.ptr], returns: FFIType.void },
  splash_checkpoint_tensor_count: { args: [FFIType.ptr], returns: FFIType.i64 },
  splash_checkpoint_file: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr], returns: FFIType.ptr },
  // ---- model, cache, step (src/native/model.ts) ----
  splash_tensor_kind_name: { args: [FFIType.i32], returns: FFIType.cstring },
  splash_model_load: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_model_free: { args: [FFIType.ptr], returns: FFIType.void },
  splash_model_get_info: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_model_backend: { args: [FFIType.ptr], returns: FFIType.cstring },
  splash_model_kv_types: { args: [FFIType.ptr], returns: FFIType.u32 },
  splash_model_set_kv_type: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  splash_backend_probe: { args: [FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  splash_cache_create: { args: [FFIType.ptr, FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
  splash_cache_free: { args: [FFIType.ptr], returns: FFIType.void },
  splash_cache_page_bytes: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.u64 },
  splash_cache_slot_bytes: { args: [FFIType.ptr], returns: FFIType.u64 },
  splash_cache_copy_page: { args: [FFIType.ptr, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  splash_cache_copy_slot: { args: [FFIType.ptr, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  splash_cache_clear_slot: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  splash_cache_read_page: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  splash_cache_write_page: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  splash_cache_read_slot: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  splash_cache_write_slot: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
  splash_step: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
  // ---- vision (src/native/model.ts) ----
  splash_vision_get_info: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_vision_encode: {
    args: [FFIType.ptr, FFIType.ptr, FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr],
    returns: FFIType.i32,
  },
  // ---- speculative decoding (src/native/model.ts) ----
  splash_model_attach_drafter: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_model_get_drafter_info: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_draft_accept: {
    args: [FFIType.ptr, FFIType.ptr, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.u64, FFIType.u64, FFIType.ptr],
    returns: FFIType.i32,
  },
  // ---- tensor inventory (src/native/inventory.ts) ----
  splash_inventory_create: { args: [FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  splash_inventory_free: { args: [FFIType.ptr], returns: FFIType.void },
  splash_inventory_count: { args: [FFIType.ptr], returns: FFIType.i64 },
  splash_inventory_tensor: { args: [FFIType.ptr, FFIType.i64, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.ptr },
  splash_inventory_state: { args: [FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.void },
  // ---- benchmarks (src/cli/bench-*.ts) ----
  splash_bench_memory_bandwidth: { args: [FFIType.i32, FFIType.u64, FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  // ---- the Mac's GPU (src/native/metal.ts) ----
  splash_metal_query: { args: [FFIType.ptr], returns: FFIType.i32 },
} as const;
