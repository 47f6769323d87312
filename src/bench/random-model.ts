// The random-weight qwen3_5 models benchmarks run where real weights are not needed: `splash bench serve random:SIZE`
// where the embedded model is too small to show an effect (decode that is bound by reading the weights), and `bench
// decode` / `bench peers` on the Qwen3.8-27B layer shapes with a few layers. Their sizes, their config.json (text_config
// and, where asked, a one-block vision tower, as the official checkpoints carry); bench/random-checkpoint.ts writes the
// weights.
import type { JsonObject } from "../models/config.ts";
import { writeRandomCheckpoint } from "./random-checkpoint.ts";

export type RandomModelSize = { hidden: number; layers: number; intermediate: number; vocab: number; heads: number; kvHeads: number; headDim: number; linearKeyHeads: number; linearValueHeads: number; linearHeadDim: number; context: number; vision: boolean };

export const RANDOM_SIZES: Record<string, RandomModelSize> = {
  // ≈ 230M parameters, 460 MB in bf16: decode reads more than any CPU cache holds.
  medium: { hidden: 1024, layers: 16, intermediate: 3072, vocab: 8192, heads: 8, kvHeads: 2, headDim: 128, linearKeyHeads: 8, linearValueHeads: 16, linearHeadDim: 64, context: 65536, vision: true },
  // ≈ 25M parameters: prompts of thousands of tokens prefill in seconds on a laptop CPU.
  small: { hidden: 384, layers: 8, intermediate: 1024, vocab: 8192, heads: 4, kvHeads: 2, headDim: 64, linearKeyHeads: 4, linearValueHeads: 8, linearHeadDim: 48, context: 65536, vision: true },
  // Qwen3.8-27B's layer shapes (24 q / 4 kv heads × 256, GDN 16 key / 48 value heads × 128, SwiGLU 17408, vocab
  // 248320) with 4 of its 64 layers; no tower, so llama.cpp takes the same checkpoint (bench peers).
  "qwen3.8-27b-shapes": { hidden: 5120, layers: 4, intermediate: 17408, vocab: 248320, heads: 24, kvHeads: 4, headDim: 256, linearKeyHeads: 16, linearValueHeads: 48, linearHeadDim: 128, context: 262144, vision: false },
};

// Writes the checkpoint of the Qwen3.8-27B layer shapes with `layers` layers into dir, once (bench decode, bench peers).
export function ensure27bShapes(dir: string, layers: number): void {
  const size = { ...RANDOM_SIZES["qwen3.8-27b-shapes"]!, layers };
  writeRandomCheckpoint(dir, randomModelConfig(size), { seed: 0x9e3779b9, producer: "splash bench decode (random weights)" });
}

// The config.json of a random model of size s (its tensors and weights: bench/random-checkpoint.ts).
export function randomModelConfig(s: RandomModelSize): JsonObject {
  const layerTypes = Array.from({ length: s.layers }, (_, i) => (i % 4 === 3 ? "full_attention" : "linear_attention"));
  return {
    architectures: ["Qwen3_5ForConditionalGeneration"],
    model_type: "qwen3_5",
    dtype: "bfloat16",
    image_token_id: s.vocab - 2,
    video_token_id: s.vocab - 1,
    vision_start_token_id: s.vocab - 4,
    vision_end_token_id: s.vocab - 3,
    tie_word_embeddings: false,
    text_config: {
      model_type: "qwen3_5_text",
      attention_bias: false,
      attn_output_gate: true,
      eos_token_id: s.vocab - 8,
      pad_token_id: s.vocab - 8,
      full_attention_interval: 4,
      head_dim: s.headDim,
      hidden_act: "silu",
      hidden_size: s.hidden,
      intermediate_size: s.intermediate,
      layer_types: layerTypes,
      linear_conv_kernel_dim: 4,
      linear_key_head_dim: s.linearHeadDim,
      linear_num_key_heads: s.linearKeyHeads,
      linear_num_value_heads: s.linearValueHeads,
      linear_value_head_dim: s.linearHeadDim,
      mamba_ssm_dtype: "float32",
      max_position_embeddings: s.context,
      mtp_num_hidden_layers: 0,
      mtp_use_dedicated_embeddings: false,
      num_attention_heads: s.heads,
      num_hidden_layers: s.layers,
      num_key_value_heads: s.kvHeads,
      partial_rotary_factor: 0.25,
      rms_norm_eps: 1e-6,
      rope_parameters: { mrope_interleaved: true, mrope_section: [Math.floor(s.headDim / 16), Math.floor(s.headDim / 32), Math.floor(s.headDim / 32)], partial_rotary_factor: 0.25, rope_theta: 10000000.0, rope_type: "default" },
      tie_word_embeddings: false,
      vocab_size: s.vocab,
    },
    ...(s.vision ? { vision_config: visionConfig(s) } : {}),
  };
}

// A one-block tower, as small as the processor allows.
function visionConfig(s: RandomModelSize): JsonObject {
  return {
    model_type: "qwen3_5_vision",
    deepstack_visual_indexes: [],
    depth: 1,
    hidden_act: "gelu_pytorch_tanh",
    hidden_size: 16,
    in_channels: 3,
    intermediate_size: 32,
    num_heads: 1,
    num_position_embeddings: 16,
    out_hidden_size: s.hidden,
    patch_size: 16,
    spatial_merge_size: 2,
    temporal_patch_size: 2,
  };
}
