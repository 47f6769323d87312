// The tensor inventory of a Qwen3.5-family checkpoint, derived from its config alone: every tensor of the official
// layout (names as in the safetensors files, shapes in PyTorch order) with its kind and the part it belongs to. The
// memory plan counts bytes over it; test/unit/models/memory.test.ts checks it name by name and shape by shape
// against the fixture checkpoints' safetensors headers, so the arithmetic is the checkpoint's, not a guess.
import type { JsonObject, LayerKind } from "./config.ts";
import type { Architecture, DflashShapes, TensorKind } from "./spec.ts";

export type Part = "text" | "mtp" | "vision" | "dflash";
export type TensorInfo = { name: string; shape: number[]; kind: TensorKind; part: Part };

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

const n = (cfg: JsonObject, key: string) => {
  const v = cfg[key];
  if (typeof v !== "number" || !Number.isInteger(v)) throw new Error(`config key ${key} is ${JSON.stringify(v)}, expected an integer`);
  return v;
};

// One decoder layer's tensors (the main stack's and the MTP layer's share it). `kind` decides the mixer.
function decoderLayer(prefix: string, cfg: JsonObject, arch: Architecture, mixer: LayerKind, part: Part): TensorInfo[] {
  const H = n(cfg, "hidden_size");
  const t = (name: string, shape: number[], kind: TensorKind): TensorInfo => ({ name: `${prefix}.${name}`, shape, kind, part });
  const out: TensorInfo[] = [t("input_layernorm.weight", [H], "norm"), t("post_attention_layernorm.weight", [H], "norm")];
  if (mixer === "full_attention") {
    const hd = n(cfg, "head_dim");
    const q = n(cfg, "num_attention_heads") * hd;
    const kv = n(cfg, "num_key_value_heads") * hd;
    // q_proj holds query and output gate per head: 2·heads·head_dim rows (attn_output_gate).
    out.push(
      t("self_attn.q_proj.weight", [2 * q, H], "attn_proj"),
      t("self_attn.k_proj.weight", [kv, H], "attn_proj"),
      t("self_attn.v_proj.weight", [kv, H], "attn_proj"),
      t("self_attn.o_proj.weight", [H, q], "attn_proj"),
      t("self_attn.q_norm.weight", [hd], "norm"),
      t("self_attn.k_norm.weight", [hd], "norm"),
    );
  } else {
    const keyDim = n(cfg, "linear_num_key_heads") * n(cfg, "linear_key_head_dim");
    const hv = n(cfg, "linear_num_value_heads");
    const valueDim = hv * n(cfg, "linear_value_head_dim");
    const convDim = 2 * keyDim + valueDim;
    out.push(
      t("linear_attn.in_proj_qkv.weight", [convDim, H], "gdn_proj"),
      t("linear_attn.in_proj_z.weight", [valueDim, H], "gdn_proj"),
      t("linear_attn.in_proj_b.weight", [hv, H], "gdn_gate_proj"),
      t("linear_attn.in_proj_a.weight", [hv, H], "gdn_gate_proj"),
      t("linear_attn.conv1d.weight", [convDim, 1, n(cfg, "linear_conv_kernel_dim")], "gdn_conv"),
      t("linear_attn.dt_bias", [hv], "gdn_param"),
      t("linear_attn.A_log", [hv], "gdn_param"),
      t("linear_attn.norm.weight", [n(cfg, "linear_value_head_dim")], "norm"),
      t("linear_attn.out_proj.weight", [H, valueDim], "gdn_proj"),
    );
  }
  if (arch === "qwen3_5_moe") {
    const E = n(cfg, "num_experts");
    const I = n(cfg, "moe_intermediate_size");
    const S = n(cfg, "shared_expert_intermediate_size");
    // Experts fused as the hub stores them: gate_up_proj [E, 2I, H] (gate rows first), down_proj [E, H, I].
    out.push(
      t("mlp.gate.weight", [E, H], "moe_router"),
      t("mlp.experts.gate_up_proj", [E, 2 * I, H], "moe_experts"),
      t("mlp.experts.down_proj", [E, H, I], "moe_experts"),
      t("mlp.shared_expert.gate_proj.weight", [S, H], "shared_expert"),
      t("mlp.shared_expert.up_proj.weight", [S, H], "shared_expert"),
      t("mlp.shared_expert.down_proj.weight", [H, S], "shared_expert"),
      t("mlp.shared_expert_gate.weight", [1, H], "shared_expert_gate"),
    );
  } else {
    const I = n(cfg, "intermediate_size");
    out.push(t("mlp.gate_proj.weight", [I, H], "mlp"), t("mlp.up_proj.weight", [I, H], "mlp"), t("mlp.down_proj.weight", [H, I], "mlp"));
  }
  return out;
}

// The language model (text part) and its MTP layers. Layer kinds come from the caller (config.ts decides them once).
export function textTensors(text: JsonObject, arch: Architecture, layerTypes: readonly LayerKind[]): TensorInfo[] {
  const H = n(text, "hidden_size");
  const V = n(text, "vocab_size");
  const out: TensorInfo[] = [{ name: "model.language_model.embed_tokens.weight", shape: [V, H], kind: "embed", part: "text" }];
  layerTypes.forEach((kind, i) => out.push(...decoderLayer(`model.language_model.layers.${i}`, text, arch, kind, "text")));
  out.push({ name: "model.language_model.norm.weight", shape: [H], kind: "norm", part: "text" });
  if (text.tie_word_embeddings !== true) out.push({ name: "lm_head.weight", shape: [V, H], kind: "lm_head", part: "text" });
  const nMtp = typeof text.mtp_num_hidden_layers === "number" ? text.mtp_num_hidden_layers : 0;
  if (nMtp > 0) {
    out.push(
      { name: "mtp.fc.weight", shape: [H, 2 * H], kind: "mtp_fc", part: "mtp" },
      { name: "mtp.pre_fc_norm_embedding.weight", shape: [H], kind: "norm", part: "mtp" },
      { name: "mtp.pre_fc_norm_hidden.weight", shape: [H], kind: "norm", part: "mtp" },
      { name: "mtp.norm.weight", shape: [H], kind: "norm", part: "mtp" },
    );
    for (let i = 0; i < nMtp; i++) out.push(...decoderLayer(`mtp.layers.${i}`, text, arch, "full_attention", "mtp"));
  }
  return out;
}

// The vision tower (Qwen3-VL style ViT + patch merger).
export function visionTensors(v: JsonObject): TensorInfo[] {
  const h = n(v, "hidden_size");
  const inter = n(v, "intermediate_size");
  const merged = h * n(v, "spatial_merge_size") ** 2;
  const out: TensorInfo[] = [];
  const t = (name: string, shape: number[]) => out.push({ name: `model.visual.${name}`, shape, kind: "vision", part: "vision" });
  t("patch_embed.proj.weight", [h, n(v, "in_channels"), n(v, "temporal_patch_size"), n(v, "patch_size"), n(v, "patch_size")]);
  t("patch_embed.proj.bias", [h]);
  t("pos_embed.weight", [n(v, "num_position_embeddings"), h]);
  for (let b = 0; b < n(v, "depth"); b++) {
    for (const norm of ["norm1", "norm2"]) for (const p of ["weight", "bias"]) t(`blocks.${b}.${norm}.${p}`, [h]);
    t(`blocks.${b}.attn.qkv.weight`, [3 * h, h]);
    t(`blocks.${b}.attn.qkv.bias`, [3 * h]);
    t(`blocks.${b}.attn.proj.weight`, [h, h]);
    t(`blocks.${b}.attn.proj.bias`, [h]);
    t(`blocks.${b}.mlp.linear_fc1.weight`, [inter, h]);
    t(`blocks.${b}.mlp.linear_fc1.bias`, [inter]);
    t(`blocks.${b}.mlp.linear_fc2.weight`, [h, inter]);
    t(`blocks.${b}.mlp.linear_fc2.bias`, [h]);
  }
  t("merger.norm.weight", [h]);
  t("merger.norm.bias", [h]);
  t("merger.linear_fc1.weight", [merged, merged]);
  t("merger.linear_fc1.bias", [merged]);
  t("merger.linear_fc2.weight", [n(v, "out_hidden_size"), merged]);
  t("merger.linear_fc2.bias", [n(v, "out_hidden_size")]);
  return out;
}

// A DFlash or DFlash2 drafter (z-lab layout: no embeddings or head of its own; the target's are shared).
export function dflashTensors(d: DflashShapes): TensorInfo[] {
  const H = d.hidden_size;
  const hd = d.head_dim;
  const out: TensorInfo[] = [];
  const t = (name: string, shape: number[]) => out.push({ name, shape, kind: "dflash", part: "dflash" });
  t("fc.weight", [H, d.target_layer_ids.length * d.target_hidden_size]);
  t("hidden_norm.weight", [H]);
  t("norm.weight", [H]);
  for (let i = 0; i < d.num_hidden_layers; i++) {
    const p = `layers.${i}`;
    t(`${p}.input_layernorm.weight`, [H]);
    t(`${p}.post_attention_layernorm.weight`, [H]);
    t(`${p}.self_attn.q_proj.weight`, [d.num_attention_heads * hd, H]);
    t(`${p}.self_attn.k_proj.weight`, [d.num_key_value_heads * hd, H]);
    t(`${p}.self_attn.v_proj.weight`, [d.num_key_value_heads * hd, H]);
    t(`${p}.self_attn.o_proj.weight`, [H, d.num_attention_heads * hd]);
    t(`${p}.self_attn.q_norm.weight`, [hd]);
    t(`${p}.self_attn.k_norm.weight`, [hd]);
    t(`${p}.mlp.gate_proj.weight`, [d.intermediate_size, H]);
    t(`${p}.mlp.up_proj.weight`, [d.intermediate_size, H]);
    t(`${p}.mlp.down_proj.weight`, [H, d.intermediate_size]);
    if (d.conv_kernel_size !== undefined && d.conv_group_size !== undefined) {
      // DFlash2: a grouped dynamic causal convolution around attention and around the MLP.
      for (const c of ["attention_conv", "mlp_conv"]) {
        t(`${p}.${c}.base_kernel`, [2, d.conv_kernel_size, H]);
        t(`${p}.${c}.kernel_projection.weight`, [(2 * d.conv_kernel_size * H) / d.conv_group_size, H]);
      }
    }
  }
  if (d.selector_rank !== undefined) {
    t("candidate_selector.hidden_projection.weight", [d.selector_rank, H]);
    t("candidate_selector.predecessor_codebook", [d.vocab_size, d.selector_rank]);
    t("candidate_selector.successor_codebook", [d.vocab_size, d.selector_rank]);
  }
  return out;
}

