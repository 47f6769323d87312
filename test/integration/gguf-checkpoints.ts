// Random-weight checkpoints (official layout, bf16) in shapes llama.cpp's qwen35 / qwen35moe can express — a
// full_attention_interval layout and GDN key head dim = value head dim — for the GGUF parity tests. The committed
// fixtures (test/fixtures/models) deliberately use irregular layer types and key ≠ value head dims, which llama.cpp
// cannot load, so these are made at test time instead: a few hundred KB, deterministic from the seed.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { JsonObject } from "../../src/models/config.ts";
import { inventory } from "../../src/native/inventory.ts";

export const DENSE_TEXT: JsonObject = {
  model_type: "qwen3_5_text",
  vocab_size: 512,
  hidden_size: 64,
  intermediate_size: 96,
  num_hidden_layers: 8,
  full_attention_interval: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2, // GQA 2
  head_dim: 32,
  linear_num_key_heads: 2,
  linear_num_value_heads: 6, // GVA 3: the V-head reorder is a real permutation
  linear_key_head_dim: 16,
  linear_value_head_dim: 16,
  linear_conv_kernel_dim: 4,
  rms_norm_eps: 1e-6,
  max_position_embeddings: 4096,
  rope_parameters: { rope_type: "default", rope_theta: 10000000, partial_rotary_factor: 0.25, mrope_section: [2, 1, 1], mrope_interleaved: true },
  tie_word_embeddings: false,
  mtp_num_hidden_layers: 1, // carried in the checkpoint, not exported
  eos_token_id: 504,
};

export const MOE_TEXT: JsonObject = {
  model_type: "qwen3_5_moe_text",
  vocab_size: 384,
  hidden_size: 64,
  num_hidden_layers: 6,
  full_attention_interval: 3,
  num_attention_heads: 4,
  num_key_value_heads: 1,
  head_dim: 32,
  linear_num_key_heads: 2,
  linear_num_value_heads: 4,
  linear_key_head_dim: 32,
  linear_value_head_dim: 32,
  linear_conv_kernel_dim: 4,
  num_experts: 8,
  num_experts_per_tok: 3,
  moe_intermediate_size: 32,
  shared_expert_intermediate_size: 64,
  rms_norm_eps: 1e-6,
  max_position_embeddings: 4096,
  rope_parameters: { rope_type: "default", rope_theta: 1000000, partial_rotary_factor: 0.5, mrope_section: [4, 2, 2], mrope_interleaved: true },
  tie_word_embeddings: false,
  mtp_num_hidden_layers: 0,
  eos_token_id: 376,
};

// [lo, hi) of a uniform draw per tensor, as scripts/fixtures draws them: projections ~ 1/√fan_in, zero-centred
// norms, GDN decays from slow to fast.
function range(name: string, shape: number[]): [number, number] {
  const u = (std: number): [number, number] => [-std * Math.sqrt(3), std * Math.sqrt(3)];
  if (name.endsWith("linear_attn.norm.weight")) return [0.6, 1.4];
  if (name.endsWith("A_log")) return [Math.log(0.05), Math.log(5)];
  if (name.endsWith("dt_bias")) return [-2, 0.5];
  if (name.endsWith("conv1d.weight")) return u(0.5);
  if (/norm\.weight$|layernorm\.weight$/.test(name)) return u(0.2);
  if (name.endsWith("embed_tokens.weight")) return u(1);
  return u(1 / Math.sqrt(shape.at(-1)!));
}

// Writes config.json + model.safetensors. perExpert: experts as experts.{e}.{gate,up,down}_proj.weight (what
// transformers' save_pretrained writes) instead of the fused gate_up_proj / down_proj.
export function writeCheckpoint(dir: string, text: JsonObject, options: { perExpert?: boolean; seed?: number } = {}): void {
  const moe = text.model_type === "qwen3_5_moe_text";
  const config = {
    architectures: [moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"],
    model_type: moe ? "qwen3_5_moe" : "qwen3_5",
    tie_word_embeddings: false,
    text_config: text,
  };
  const tensors: [string, number[], Float32Array][] = [];
  let state = options.seed ?? 7;
  const draw = (name: string, shape: number[]) => {
    const [lo, hi] = range(name, shape);
    const out = new Float32Array(shape.reduce((a, b) => a * b, 1));
    for (let i = 0; i < out.length; i++) {
      state ^= state << 13;
      state ^= state >>> 17;
      state ^= state << 5;
      out[i] = lo + ((state >>> 0) / 4294967296) * (hi - lo);
    }
    return out;
  };
  for (const t of inventory(config).tensors) {
    const data = draw(t.name, t.shape);
    if (options.perExpert && /\.mlp\.experts\.(gate_up|down)_proj$/.test(t.name)) {
      const [E, R, C] = t.shape as [number, number, number];
      const base = t.name.replace(/experts\.(gate_up_proj|down_proj)$/, "experts.");
      for (let e = 0; e < E; e++) {
        const rows = (r0: number, n: number) => data.slice((e * R + r0) * C, (e * R + r0 + n) * C);
        if (t.name.endsWith("gate_up_proj")) {
          tensors.push([`${base}${e}.gate_proj.weight`, [R / 2, C], rows(0, R / 2)], [`${base}${e}.up_proj.weight`, [R / 2, C], rows(R / 2, R / 2)]);
        } else tensors.push([`${base}${e}.down_proj.weight`, [R, C], rows(0, R)]);
      }
    } else tensors.push([t.name, t.shape, data]);
  }
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const [name, shape, data] of tensors) {
    header[name] = { dtype: "BF16", shape, data_offsets: [offset, offset + data.length * 2] };
    offset += data.length * 2;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((json.length + 8) % 8)) % 8);
  const file = new Uint8Array(8 + json.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(new TextEncoder().encode(json), 8);
  const bf16 = new Uint16Array(file.buffer, 8 + json.length, offset / 2);
  let at = 0;
  for (const [, , data] of tensors) {
    const bits = new Uint32Array(data.buffer);
    for (let i = 0; i < bits.length; i++) bf16[at++] = (bits[i]! + 0x8000) >>> 16;
  }
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 2));
  writeFileSync(join(dir, "model.safetensors"), file);
}
