// A Qwen3.5-family checkpoint (qwen3_5 / qwen3_5_moe, official safetensors layout) as llama.cpp's `qwen35` /
// `qwen35moe` GGUF: tensor names, metadata keys and the weight transforms of llama.cpp's converter
// (conversion/qwen.py: Qwen3NextModel, _LinearAttentionVReorderBase, Qwen3_5TextModel / Qwen3_5MoeTextModel):
//   - zero-centred RMSNorm weights are stored as 1 + w (every *norm.weight except the GDN gated norm, ssm_norm);
//   - ssm_a = −exp(A_log); dt_bias becomes ssm_dt.bias; conv1d [C, 1, K] is stored as [C, K];
//   - V heads go from HF's grouped order (v heads of k head 0, then of k head 1, …) to ggml's tiled order (v head j
//     of every k head, for j = 0, 1, …) in attn_qkv (V rows), attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt.bias,
//     ssm_conv1d (V channels) and ssm_out (columns), so that in the GGUF v head h reads k head h mod Hk;
//   - MoE experts become ffn_{gate,up,down}_exps [E, ·, ·] (fused gate_up split, or per-expert tensors stacked).
// Which tensors stay F32 follows the converter too: 1-D tensors, norms, the routers (ffn_gate_inp, _shexp),
// ssm_conv1d, and tensors not named *.weight (ssm_a, ssm_dt.bias); a row length that the block format cannot
// hold falls back to F16. MTP and vision tensors are not exported (llama.cpp loads them from separate files).
import type { CheckpointConfig, JsonObject, LayerKind } from "../models/config.ts";
import { meta, type MetaValue, type TensorSource } from "./format.ts";
import type { GgmlType } from "./quantize.ts";
import { GGML_BLOCK } from "./quantize.ts";
import { readElements, type Checkpoint, type SourceTensor } from "./source.ts";

export type ExportType = "f32" | "f16" | "bf16" | "q8_0" | "q4_0";

const WEIGHT_TYPE: Record<ExportType, GgmlType> = { f32: "F32", f16: "F16", bf16: "BF16", q8_0: "Q8_0", q4_0: "Q4_0" };
// llama_ftype (general.file_type)
export const FILE_TYPE: Record<ExportType, number> = { f32: 0, f16: 1, q4_0: 2, q8_0: 7, bf16: 32 };

export class ExportError extends Error {
  override name = "ExportError";
}

function int(cfg: JsonObject, key: string): number {
  const v = cfg[key];
  if (typeof v !== "number" || !Number.isInteger(v)) throw new ExportError(`config: ${key} is ${JSON.stringify(v)}, expected an integer`);
  return v;
}

function num(cfg: JsonObject, key: string, fallback?: number): number {
  const v = cfg[key] ?? fallback;
  if (typeof v !== "number") throw new ExportError(`config: ${key} is ${JSON.stringify(v)}, expected a number`);
  return v;
}

export type Shapes = {
  moe: boolean;
  layers: number;
  layerTypes: LayerKind[];
  interval: number;
  H: number;
  vocab: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  Hk: number; // GDN key heads
  Hv: number; // GDN value heads
  dk: number;
  dv: number;
  convKernel: number;
  inter: number; // dense MLP
  experts: number;
  expertsUsed: number;
  expertInter: number;
  sharedInter: number;
  eps: number;
  ropeTheta: number;
  ropeDims: number;
  ropeSections: number[];
  context: number;
  tied: boolean;
};

// The config as the exporter needs it; refuses what llama.cpp's qwen35 cannot express.
export function shapesOf(cfg: CheckpointConfig): Shapes {
  const t = cfg.text;
  const layers = int(t, "num_hidden_layers");
  const rope = (typeof t.rope_parameters === "object" && t.rope_parameters !== null ? t.rope_parameters : {}) as JsonObject;
  const partial = num(rope, "partial_rotary_factor", (t.partial_rotary_factor as number | undefined) ?? 0.25);
  const headDim = int(t, "head_dim");
  const sections = Array.isArray(rope.mrope_section) ? (rope.mrope_section as number[]) : [11, 11, 10];
  // llama.cpp marks layer i as full attention exactly when (i + 1) % full_attention_interval == 0
  const firstFull = cfg.layerTypes.indexOf("full_attention");
  const interval = typeof t.full_attention_interval === "number" && !Array.isArray(t.layer_types) ? t.full_attention_interval : firstFull + 1;
  const regular = firstFull >= 0 && cfg.layerTypes.every((k, i) => (k === "full_attention") === ((i + 1) % interval === 0));
  if (!regular)
    throw new ExportError(
      `layer types [${cfg.layerTypes.map((k) => (k === "full_attention" ? "full" : "lin")).join(",")}] do not follow a full_attention_interval ` +
        "(layer i is full attention exactly when (i + 1) % interval == 0), the only layout llama.cpp's qwen35 can express",
    );
  // llama.cpp's qwen35 sizes the GDN from ssm.state_size alone: key and value heads must be equally wide
  if (int(t, "linear_key_head_dim") !== int(t, "linear_value_head_dim"))
    throw new ExportError(
      `GDN key head dim ${int(t, "linear_key_head_dim")} ≠ value head dim ${int(t, "linear_value_head_dim")}: llama.cpp's qwen35 assumes them equal (ssm.state_size)`,
    );
  const moe = cfg.architecture === "qwen3_5_moe";
  return {
    moe,
    layers,
    layerTypes: cfg.layerTypes,
    interval,
    H: int(t, "hidden_size"),
    vocab: int(t, "vocab_size"),
    heads: int(t, "num_attention_heads"),
    kvHeads: int(t, "num_key_value_heads"),
    headDim,
    Hk: int(t, "linear_num_key_heads"),
    Hv: int(t, "linear_num_value_heads"),
    dk: int(t, "linear_key_head_dim"),
    dv: int(t, "linear_value_head_dim"),
    convKernel: int(t, "linear_conv_kernel_dim"),
    inter: moe ? 0 : int(t, "intermediate_size"),
    experts: moe ? int(t, "num_experts") : 0,
    expertsUsed: moe ? int(t, "num_experts_per_tok") : 0,
    expertInter: moe ? int(t, "moe_intermediate_size") : 0,
    sharedInter: moe ? int(t, "shared_expert_intermediate_size") : 0,
    eps: num(t, "rms_norm_eps", 1e-6),
    ropeTheta: num(rope, "rope_theta", (t.rope_theta as number | undefined) ?? 10000),
    ropeDims: Math.trunc(headDim * partial),
    ropeSections: [...sections, 0, 0, 0, 0].slice(0, 4),
    context: int(t, "max_position_embeddings"),
    tied: t.tie_word_embeddings === true,
  };
}

export function archName(s: Shapes): string {
  return s.moe ? "qwen35moe" : "qwen35";
}

// The {arch}.* keys (llama.cpp's LLM_KV names).
export function modelMetadata(s: Shapes): Map<string, MetaValue> {
  const a = archName(s);
  const m = new Map<string, MetaValue>();
  m.set(`${a}.context_length`, meta.u32(s.context));
  m.set(`${a}.embedding_length`, meta.u32(s.H));
  m.set(`${a}.block_count`, meta.u32(s.layers));
  if (!s.moe) m.set(`${a}.feed_forward_length`, meta.u32(s.inter));
  m.set(`${a}.attention.head_count`, meta.u32(s.heads));
  m.set(`${a}.attention.head_count_kv`, meta.u32(s.kvHeads));
  m.set(`${a}.attention.key_length`, meta.u32(s.headDim));
  m.set(`${a}.attention.value_length`, meta.u32(s.headDim));
  m.set(`${a}.attention.layer_norm_rms_epsilon`, meta.f32(s.eps));
  m.set(`${a}.rope.freq_base`, meta.f32(s.ropeTheta));
  m.set(`${a}.rope.dimension_count`, meta.u32(s.ropeDims));
  m.set(`${a}.rope.dimension_sections`, meta.i32s(s.ropeSections));
  if (s.moe) {
    m.set(`${a}.expert_count`, meta.u32(s.experts));
    m.set(`${a}.expert_used_count`, meta.u32(s.expertsUsed));
    m.set(`${a}.expert_feed_forward_length`, meta.u32(s.expertInter));
    m.set(`${a}.expert_shared_feed_forward_length`, meta.u32(s.sharedInter));
  }
  m.set(`${a}.ssm.conv_kernel`, meta.u32(s.convKernel));
  m.set(`${a}.ssm.state_size`, meta.u32(s.dk));
  m.set(`${a}.ssm.group_count`, meta.u32(s.Hk));
  m.set(`${a}.ssm.time_step_rank`, meta.u32(s.Hv));
  m.set(`${a}.ssm.inner_size`, meta.u32(s.Hv * s.dv));
  m.set(`${a}.full_attention_interval`, meta.u32(s.interval));
  return m;
}

// Output row r of a V-head-reordered block of Hv heads × `dim` rows reads this source row: tiled head
// h' = j·Hk + g holds grouped head g·r + j (r = Hv / Hk v heads per k head).
export function groupedRow(s: Shapes, r: number, dim: number): number {
  const per = s.Hv / s.Hk;
  const h = Math.floor(r / dim);
  const g = h % s.Hk;
  const j = Math.floor(h / s.Hk);
  return (g * per + j) * dim + (r % dim);
}

type Transform = { kind: "copy" } | { kind: "add"; value: number } | { kind: "negexp" };

// Rows [r0, r0 + n) of source tensor t (its last dim = cols), each output row read from source row rowOf(r).
function rowsFill(t: SourceTensor, cols: number, rowOf: (r: number) => number, transform: Transform = { kind: "copy" }): TensorSource["fill"] {
  return (r0, n, out) => {
    let run = 0; // rows read in one go while the source rows are consecutive
    for (let i = 0; i < n; i += run) {
      const first = rowOf(r0 + i);
      run = 1;
      while (i + run < n && rowOf(r0 + i + run) === first + run) run++;
      readElements(t, first * cols, run * cols, out.subarray(i * cols, (i + run) * cols));
    }
    if (transform.kind === "add") for (let i = 0; i < n * cols; i++) out[i] = out[i]! + transform.value;
    else if (transform.kind === "negexp") for (let i = 0; i < n * cols; i++) out[i] = -Math.exp(out[i]!);
  };
}

// Columns permuted within each row: out[r][c] = src[r][colOf(c)].
function columnsFill(t: SourceTensor, cols: number, colOf: (c: number) => number): TensorSource["fill"] {
  const row = new Float32Array(cols);
  const perm = Int32Array.from({ length: cols }, (_, c) => colOf(c));
  return (r0, n, out) => {
    for (let i = 0; i < n; i++) {
      readElements(t, (r0 + i) * cols, cols, row);
      const o = out.subarray(i * cols, (i + 1) * cols);
      for (let c = 0; c < cols; c++) o[c] = row[perm[c]!]!;
    }
  };
}

const identity = (r: number) => r;

// The tensor list, in the order llama.cpp's converter writes it. `type` is the export type of 2-D weights.
export function qwen35Tensors(ck: Checkpoint, s: Shapes, type: ExportType): TensorSource[] {
  const L = ck.has("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  const out: TensorSource[] = [];
  const weightType = (cols: number): GgmlType => {
    const t = WEIGHT_TYPE[type];
    return cols % GGML_BLOCK[t][0] === 0 ? t : "F16";
  };
  // a 2-D (or stacked 3-D) weight, quantized per the export type
  const weight = (name: string, shape: number[], fill: TensorSource["fill"]) => out.push({ name, shape, type: weightType(shape.at(-1)!), fill });
  const f32 = (name: string, shape: number[], fill: TensorSource["fill"]) => out.push({ name, shape, type: "F32", fill });
  const plain = (src: string, shape: number[]) => rowsFill(ck.get(src, shape), shape.at(-1)!, identity);
  const norm = (src: string, n: number) => rowsFill(ck.get(src, [n]), n, identity, { kind: "add", value: 1 });

  const { H, vocab } = s;
  weight("token_embd.weight", [vocab, H], plain(`${L}embed_tokens.weight`, [vocab, H]));
  const reorder = s.Hk !== s.Hv; // the converter reorders only when the head counts differ
  const keyDim = s.Hk * s.dk;
  const valueDim = s.Hv * s.dv;
  const convDim = 2 * keyDim + valueDim;
  const vRow = (dim: number) => (r: number) => (reorder ? groupedRow(s, r, dim) : r);

  for (let l = 0; l < s.layers; l++) {
    const p = `${L}layers.${l}.`;
    const b = `blk.${l}.`;
    f32(`${b}attn_norm.weight`, [H], norm(`${p}input_layernorm.weight`, H));
    if (s.layerTypes[l] === "full_attention") {
      const q = s.heads * s.headDim;
      const kv = s.kvHeads * s.headDim;
      weight(`${b}attn_q.weight`, [2 * q, H], plain(`${p}self_attn.q_proj.weight`, [2 * q, H]));
      weight(`${b}attn_k.weight`, [kv, H], plain(`${p}self_attn.k_proj.weight`, [kv, H]));
      weight(`${b}attn_v.weight`, [kv, H], plain(`${p}self_attn.v_proj.weight`, [kv, H]));
      weight(`${b}attn_output.weight`, [H, q], plain(`${p}self_attn.o_proj.weight`, [H, q]));
      f32(`${b}attn_q_norm.weight`, [s.headDim], norm(`${p}self_attn.q_norm.weight`, s.headDim));
      f32(`${b}attn_k_norm.weight`, [s.headDim], norm(`${p}self_attn.k_norm.weight`, s.headDim));
    } else {
      const a = `${p}linear_attn.`;
      const qkvRow = vRow(s.dv);
      weight(`${b}attn_qkv.weight`, [convDim, H], rowsFill(ck.get(`${a}in_proj_qkv.weight`, [convDim, H]), H, (r) => (r < 2 * keyDim ? r : 2 * keyDim + qkvRow(r - 2 * keyDim))));
      weight(`${b}attn_gate.weight`, [valueDim, H], rowsFill(ck.get(`${a}in_proj_z.weight`, [valueDim, H]), H, vRow(s.dv)));
      weight(`${b}ssm_beta.weight`, [s.Hv, H], rowsFill(ck.get(`${a}in_proj_b.weight`, [s.Hv, H]), H, vRow(1)));
      weight(`${b}ssm_alpha.weight`, [s.Hv, H], rowsFill(ck.get(`${a}in_proj_a.weight`, [s.Hv, H]), H, vRow(1)));
      f32(`${b}ssm_conv1d.weight`, [convDim, s.convKernel], rowsFill(ck.get(`${a}conv1d.weight`, [convDim, 1, s.convKernel]), s.convKernel, (r) => (r < 2 * keyDim ? r : 2 * keyDim + qkvRow(r - 2 * keyDim))));
      // 1-D per-head vectors: read as Hv rows of one element
      const dt = ck.get(`${a}dt_bias`, [s.Hv]);
      f32(`${b}ssm_dt.bias`, [s.Hv], (r0, n, o) => rowsFill(dt, 1, vRow(1))(0, s.Hv, o));
      const A = ck.get(`${a}A_log`, [s.Hv]);
      f32(`${b}ssm_a`, [s.Hv], (r0, n, o) => rowsFill(A, 1, vRow(1), { kind: "negexp" })(0, s.Hv, o));
      f32(`${b}ssm_norm.weight`, [s.dv], plain(`${a}norm.weight`, [s.dv]));
      weight(`${b}ssm_out.weight`, [H, valueDim], columnsFill(ck.get(`${a}out_proj.weight`, [H, valueDim]), valueDim, vRow(s.dv)));
    }
    f32(`${b}post_attention_norm.weight`, [H], norm(`${p}post_attention_layernorm.weight`, H));
    if (s.moe) moeTensors(ck, s, p, b, weight, f32);
    else {
      weight(`${b}ffn_gate.weight`, [s.inter, H], plain(`${p}mlp.gate_proj.weight`, [s.inter, H]));
      weight(`${b}ffn_up.weight`, [s.inter, H], plain(`${p}mlp.up_proj.weight`, [s.inter, H]));
      weight(`${b}ffn_down.weight`, [H, s.inter], plain(`${p}mlp.down_proj.weight`, [H, s.inter]));
    }
  }
  f32("output_norm.weight", [H], norm(`${L}norm.weight`, H));
  // a tied head is absent from the GGUF: llama.cpp then reads token_embd for the output
  if (!s.tied || ck.has("lm_head.weight")) weight("output.weight", [vocab, H], plain("lm_head.weight", [vocab, H]));
  return out;
}

type Add = (name: string, shape: number[], fill: TensorSource["fill"]) => void;

function moeTensors(ck: Checkpoint, s: Shapes, p: string, b: string, weight: Add, f32: Add): void {
  const { H, experts: E, expertInter: I, sharedInter: S } = s;
  f32(`${b}ffn_gate_inp.weight`, [E, H], rowsFill(ck.get(`${p}mlp.gate.weight`, [E, H]), H, identity));
  if (ck.has(`${p}mlp.experts.gate_up_proj`)) {
    // fused [E, 2I, H], gate rows first in each expert
    const gu = ck.get(`${p}mlp.experts.gate_up_proj`, [E, 2 * I, H]);
    weight(`${b}ffn_gate_exps.weight`, [E, I, H], rowsFill(gu, H, (r) => Math.floor(r / I) * 2 * I + (r % I)));
    weight(`${b}ffn_up_exps.weight`, [E, I, H], rowsFill(gu, H, (r) => Math.floor(r / I) * 2 * I + I + (r % I)));
    weight(`${b}ffn_down_exps.weight`, [E, H, I], rowsFill(ck.get(`${p}mlp.experts.down_proj`, [E, H, I]), I, identity));
  } else {
    // per expert: stack experts.{e}.{gate,up,down}_proj.weight
    const stacked = (proj: string, rows: number, cols: number): TensorSource["fill"] => {
      const parts = Array.from({ length: E }, (_, e) => rowsFill(ck.get(`${p}mlp.experts.${e}.${proj}.weight`, [rows, cols]), cols, identity));
      return (r0, n, out) => {
        for (let i = 0; i < n; ) {
          const e = Math.floor((r0 + i) / rows);
          const within = (r0 + i) % rows;
          const take = Math.min(n - i, rows - within);
          parts[e]!(within, take, out.subarray(i * cols, (i + take) * cols));
          i += take;
        }
      };
    };
    weight(`${b}ffn_gate_exps.weight`, [E, I, H], stacked("gate_proj", I, H));
    weight(`${b}ffn_up_exps.weight`, [E, I, H], stacked("up_proj", I, H));
    weight(`${b}ffn_down_exps.weight`, [E, H, I], stacked("down_proj", H, I));
  }
  f32(`${b}ffn_gate_inp_shexp.weight`, [H], (r0, n, o) => rowsFill(ck.get(`${p}mlp.shared_expert_gate.weight`, [1, H]), H, identity)(0, 1, o));
  weight(`${b}ffn_gate_shexp.weight`, [S, H], rowsFill(ck.get(`${p}mlp.shared_expert.gate_proj.weight`, [S, H]), H, identity));
  weight(`${b}ffn_up_shexp.weight`, [S, H], rowsFill(ck.get(`${p}mlp.shared_expert.up_proj.weight`, [S, H]), H, identity));
  weight(`${b}ffn_down_shexp.weight`, [H, S], rowsFill(ck.get(`${p}mlp.shared_expert.down_proj.weight`, [H, S]), S, identity));
}
