// A random-weight checkpoint of the qwen3_5 family at a chosen size, in the official layout (config.json with
// text_config, model.language_model.* tensors in bf16, lm_head; a one-block vision tower as the checkpoints carry).
// `splash bench serve --random SIZE` uses it where the embedded model is too small to show an effect (decode that
// is bound by reading the weights). Value ranges follow scripts/fixtures/fixture_lib.py: projections scaled by
// 1/sqrt(fan_in), zero-centred norms, GDN decays from slow to fast, so activations stay O(1).
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export type RandomModelSize = { hidden: number; layers: number; intermediate: number; vocab: number; heads: number; kvHeads: number; headDim: number; linearKeyHeads: number; linearValueHeads: number; linearHeadDim: number; context: number };

export const RANDOM_SIZES: Record<string, RandomModelSize> = {
  // ≈ 230M parameters, 460 MB in bf16: decode reads more than any CPU cache holds.
  medium: { hidden: 1024, layers: 16, intermediate: 3072, vocab: 8192, heads: 8, kvHeads: 2, headDim: 128, linearKeyHeads: 8, linearValueHeads: 16, linearHeadDim: 64, context: 65536 },
  // ≈ 25M parameters: prompts of thousands of tokens prefill in seconds on a laptop CPU.
  small: { hidden: 384, layers: 8, intermediate: 1024, vocab: 8192, heads: 4, kvHeads: 2, headDim: 64, linearKeyHeads: 4, linearValueHeads: 8, linearHeadDim: 48, context: 65536 },
};

function tensorShapes(s: RandomModelSize): [string, number[]][] {
  const out: [string, number[]][] = [];
  const L = "model.language_model";
  const conv = 2 * s.linearKeyHeads * s.linearHeadDim + s.linearValueHeads * s.linearHeadDim;
  const value = s.linearValueHeads * s.linearHeadDim;
  out.push([`${L}.embed_tokens.weight`, [s.vocab, s.hidden]], [`${L}.norm.weight`, [s.hidden]], ["lm_head.weight", [s.vocab, s.hidden]]);
  for (let i = 0; i < s.layers; i++) {
    const p = `${L}.layers.${i}`;
    out.push([`${p}.input_layernorm.weight`, [s.hidden]], [`${p}.post_attention_layernorm.weight`, [s.hidden]]);
    out.push([`${p}.mlp.gate_proj.weight`, [s.intermediate, s.hidden]], [`${p}.mlp.up_proj.weight`, [s.intermediate, s.hidden]], [`${p}.mlp.down_proj.weight`, [s.hidden, s.intermediate]]);
    if (i % 4 === 3) {
      out.push(
        [`${p}.self_attn.q_proj.weight`, [2 * s.heads * s.headDim, s.hidden]],
        [`${p}.self_attn.k_proj.weight`, [s.kvHeads * s.headDim, s.hidden]],
        [`${p}.self_attn.v_proj.weight`, [s.kvHeads * s.headDim, s.hidden]],
        [`${p}.self_attn.o_proj.weight`, [s.hidden, s.heads * s.headDim]],
        [`${p}.self_attn.q_norm.weight`, [s.headDim]],
        [`${p}.self_attn.k_norm.weight`, [s.headDim]],
      );
    } else {
      out.push(
        [`${p}.linear_attn.in_proj_qkv.weight`, [conv, s.hidden]],
        [`${p}.linear_attn.in_proj_z.weight`, [value, s.hidden]],
        [`${p}.linear_attn.in_proj_a.weight`, [s.linearValueHeads, s.hidden]],
        [`${p}.linear_attn.in_proj_b.weight`, [s.linearValueHeads, s.hidden]],
        [`${p}.linear_attn.conv1d.weight`, [conv, 1, 4]],
        [`${p}.linear_attn.A_log`, [s.linearValueHeads]],
        [`${p}.linear_attn.dt_bias`, [s.linearValueHeads]],
        [`${p}.linear_attn.norm.weight`, [s.linearHeadDim]],
        [`${p}.linear_attn.out_proj.weight`, [s.hidden, value]],
      );
    }
  }
  const V = "model.visual";
  out.push(
    [`${V}.patch_embed.proj.weight`, [16, 3, 2, 16, 16]],
    [`${V}.patch_embed.proj.bias`, [16]],
    [`${V}.pos_embed.weight`, [16, 16]],
    [`${V}.blocks.0.norm1.weight`, [16]],
    [`${V}.blocks.0.norm1.bias`, [16]],
    [`${V}.blocks.0.norm2.weight`, [16]],
    [`${V}.blocks.0.norm2.bias`, [16]],
    [`${V}.blocks.0.attn.qkv.weight`, [48, 16]],
    [`${V}.blocks.0.attn.qkv.bias`, [48]],
    [`${V}.blocks.0.attn.proj.weight`, [16, 16]],
    [`${V}.blocks.0.attn.proj.bias`, [16]],
    [`${V}.blocks.0.mlp.linear_fc1.weight`, [32, 16]],
    [`${V}.blocks.0.mlp.linear_fc1.bias`, [32]],
    [`${V}.blocks.0.mlp.linear_fc2.weight`, [16, 32]],
    [`${V}.blocks.0.mlp.linear_fc2.bias`, [16]],
    [`${V}.merger.norm.weight`, [16]],
    [`${V}.merger.norm.bias`, [16]],
    [`${V}.merger.linear_fc1.weight`, [64, 64]],
    [`${V}.merger.linear_fc1.bias`, [64]],
    [`${V}.merger.linear_fc2.weight`, [s.hidden, 64]],
    [`${V}.merger.linear_fc2.bias`, [s.hidden]],
  );
  return out;
}

// (lo, hi) of a uniform draw for a tensor, by its name (uniform with the fixtures' standard deviations).
function range(name: string, shape: number[]): [number, number] {
  const u = (std: number): [number, number] => [-std * Math.sqrt(3), std * Math.sqrt(3)];
  if (name.endsWith("linear_attn.norm.weight")) return [0.6, 1.4];
  if (name.endsWith("A_log")) return [Math.log(0.05), Math.log(5)];
  if (name.endsWith("dt_bias")) return [-2, 0.5];
  if (name.endsWith("conv1d.weight")) return u(0.5);
  if (name.startsWith("model.visual") && /norm\d?\.weight$/.test(name)) return [0.9, 1.1];
  if (/norm\.weight$|layernorm\.weight$/.test(name)) return u(0.2);
  if (name.endsWith(".bias")) return u(0.1);
  if (name.endsWith("embed_tokens.weight") || name.endsWith("pos_embed.weight")) return u(1);
  if (name.endsWith("in_proj_a.weight") || name.endsWith("in_proj_b.weight")) return u(1.5 / Math.sqrt(shape.at(-1)!));
  const fanIn = shape.length === 5 ? shape.slice(1).reduce((a, b) => a * b, 1) : shape.at(-1)!;
  return u(1 / Math.sqrt(fanIn));
}

function config(s: RandomModelSize): object {
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
    vision_config: {
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
    },
  };
}

// Writes config.json and model.safetensors (bf16) into `dir`; the same size and seed give the same bytes.
export function writeRandomCheckpoint(dir: string, s: RandomModelSize, seed = 1): void {
  mkdirSync(dir, { recursive: true });
  const shapes = tensorShapes(s);
  const header: Record<string, unknown> = { __metadata__: { format: "pt", producer: "splash bench serve (random weights)" } };
  let offset = 0;
  for (const [name, shape] of shapes) {
    const bytes = shape.reduce((a, b) => a * b, 1) * 2;
    header[name] = { dtype: "BF16", shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((json.length + 8) % 8)) % 8); // data starts 8-byte aligned
  const data = new Uint8Array(8 + json.length + offset);
  new DataView(data.buffer).setBigUint64(0, BigInt(json.length), true);
  data.set(new TextEncoder().encode(json), 8);
  const bf16 = new Uint16Array(data.buffer, 8 + json.length, offset / 2);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  let state = seed >>> 0 || 1;
  let at = 0;
  for (const [name, shape] of shapes) {
    const [lo, hi] = range(name, shape);
    const n = shape.reduce((a, b) => a * b, 1);
    for (let i = 0; i < n; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      f32[0] = lo + ((state >>> 0) / 4294967296) * (hi - lo);
      bf16[at++] = (u32[0]! + 0x8000) >>> 16; // round to nearest
    }
  }
  writeFileSync(join(dir, "config.json"), JSON.stringify(config(s), null, 2));
  writeFileSync(join(dir, "model.safetensors"), data);
}
