// A hub model's memory plan, counted over its inventory (libsplash's loaders, src/native/inventory.ts: each tensor's
// bytes in every weight type, with native/core/quant.h's row layouts, and the sequence state as the cache sizes it):
// weights per part at each quantization level, the fixed part (weights + drafter), and the sequence state per token
// and per sequence. Which type a tensor takes is decided here: the model's recipe per tensor kind for Splash's levels,
// and mlx-lm's rule for an MLX checkpoint.
import type { CheckpointConfig, JsonObject } from "./config.ts";
import type { DflashShapes, Format, HubModelSpec, MemoryPlan, MlxQuantization, Quant, RecipeRule, TensorKind, WeightType } from "./spec.ts";
import { recipeType } from "./spec.ts";
import { inventory, type InventoryTensor, type Part, type SequenceState } from "../native/inventory.ts";

// Kinds mlx-lm's quantize() turns into QuantizedLinear / QuantizedEmbedding (Linear, Embedding and the experts'
// SwitchLinear); conv1d, norms, A_log and dt_bias stay as they are.
const MLX_QUANTIZED: ReadonlySet<TensorKind> = new Set([
  "embed", "lm_head", "attn_proj", "gdn_proj", "gdn_gate_proj", "mlp", "moe_router", "moe_experts", "shared_expert", "shared_expert_gate", "mtp_fc",
]);

function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

function mlxType(kind: TensorKind, q: MlxQuantization): WeightType {
  if (!MLX_QUANTIZED.has(kind)) return "bf16";
  return (q.overrides[kind] ?? q.bits) === 4 ? "mlx-affine-4" : "mlx-affine-8";
}

function sumBytes(tensors: readonly InventoryTensor[], typeOf: (t: InventoryTensor) => WeightType): number {
  return tensors.reduce((a, t) => a + t.bytes[typeOf(t)], 0);
}

// Every tensor of the checkpoint a config describes (text, MTP, vision) with its kind, and its sequence state.
export function modelInventory(cfg: Pick<CheckpointConfig, "root">): { tensors: InventoryTensor[]; state: SequenceState } {
  return inventory(cfg.root);
}

// A z-lab drafter's config.json with these shapes: what its loader reads (the shapes, dflash_config's taps and block,
// DFlash2's convolutions and selector). The mask token is no shape; id 0 stands for it.
function drafterConfig(s: DflashShapes, kind: "dflash" | "dflash2"): JsonObject {
  const v2 = kind === "dflash2" ? { conv_kernel_size: s.conv_kernel_size!, conv_group_size: s.conv_group_size!, selector_rank: s.selector_rank!, selector_top_k: s.selector_top_k! } : {};
  return {
    architectures: [kind === "dflash2" ? "DFlash2DraftModel" : "DFlashDraftModel"],
    hidden_size: s.hidden_size,
    num_hidden_layers: s.num_hidden_layers,
    num_attention_heads: s.num_attention_heads,
    num_key_value_heads: s.num_key_value_heads,
    head_dim: s.head_dim,
    intermediate_size: s.intermediate_size,
    vocab_size: s.vocab_size,
    dflash_config: { mask_token_id: 0, target_layer_ids: s.target_layer_ids, block_size: s.block_size, ...v2 },
  };
}

// The tensors of a DFlash or DFlash2 drafter of these shapes for the target cfg describes, and its sequence state.
export function drafterInventory(cfg: Pick<CheckpointConfig, "root">, kind: "dflash" | "dflash2", shapes: DflashShapes): { tensors: InventoryTensor[]; state: SequenceState } {
  return inventory(cfg.root, { kind, config: drafterConfig(shapes, kind) });
}

function ofPart(tensors: readonly InventoryTensor[], part: Part): InventoryTensor[] {
  return tensors.filter((t) => t.part === part);
}

function atQuant(tensors: readonly InventoryTensor[], recipe: readonly RecipeRule[], quant: Quant): number {
  return sumBytes(tensors, (t) => recipeType(recipe, t.kind, quant));
}

// The whole plan of a hub model, from its expected config (the shapes every matching checkpoint has).
export function computeMemoryPlan(spec: HubModelSpec, cfg: Pick<CheckpointConfig, "root">): MemoryPlan {
  const { tensors: all, state } = modelInventory(cfg);
  const text = ofPart(all, "text");
  const mtp = ofPart(all, "mtp");
  const vision = ofPart(all, "vision");
  const recipe = spec.quantization.recipe;
  const drafter = (kind: "dflash" | "dflash2") => {
    const d = spec.draft[kind];
    return typeof d === "object" ? drafterInventory(cfg, kind, d.shapes) : undefined;
  };
  const dflashInventory = drafter("dflash");
  const dflash2Inventory = drafter("dflash2");
  const dflash = dflashInventory?.tensors;
  const dflash2 = dflash2Inventory?.tensors;
  const mlx = (f: Format) => spec.sources[f]?.quantization ?? { mode: "affine" as const, bits: f === "mlx-4bit" ? (4 as const) : (8 as const), groupSize: 64 as const, overrides: {} };
  const mlxText = (f: "mlx-4bit" | "mlx-8bit") => sumBytes(text, (t) => mlxType(t.kind, mlx(f)));
  const quantBytes = (ts: readonly InventoryTensor[]) => ({ bf16: atQuant(ts, recipe, "bf16"), q8: atQuant(ts, recipe, "q8"), q4: atQuant(ts, recipe, "q4") });

  const textBytes = { ...quantBytes(text), "mlx-4bit": mlxText("mlx-4bit"), "mlx-8bit": mlxText("mlx-8bit") };
  const mtpBytes = quantBytes(mtp);
  const dflashBytes = dflash ? quantBytes(dflash) : null;
  const dflash2Bytes = dflash2 ? quantBytes(dflash2) : null;
  const hasMtp = mtp.length > 0;
  // An MLX checkpoint carries no MTP layer when its source says so (mlx-lm's sanitize drops mtp.*).
  const mlxHasMtp = (f: "mlx-4bit" | "mlx-8bit") => hasMtp && spec.sources[f]?.contains.mtp === true;
  const plus = (weights: number, drafter: number | null | undefined) => (drafter == null ? null : weights + drafter);
  const fixed = (weights: number, mtpBytes: number | null, level: "bf16" | "q8" | "q4") => ({
    none: weights,
    mtp: plus(weights, mtpBytes),
    dflash: plus(weights, dflashBytes?.[level]),
    dflash2: plus(weights, dflash2Bytes?.[level]),
  });
  const mlxMtp = (f: "mlx-4bit" | "mlx-8bit") => (mlxHasMtp(f) ? sumBytes(mtp, (t) => mlxType(t.kind, mlx(f))) : null);
  const mlxDownload = (f: "mlx-4bit" | "mlx-8bit") =>
    textBytes[f] + (mlxMtp(f) ?? 0) + (spec.sources[f]?.contains.vision ? sumBytes(vision, (t) => mlxType(t.kind, mlx(f))) : 0);

  return {
    generatedBy: "scripts/models/memory_plan.ts",
    parameters: {
      text: text.reduce((a, t) => a + numel(t.shape), 0),
      mtp: mtp.reduce((a, t) => a + numel(t.shape), 0),
      vision: vision.reduce((a, t) => a + numel(t.shape), 0),
      dflash: dflash ? dflash.reduce((a, t) => a + numel(t.shape), 0) : null,
      dflash2: dflash2 ? dflash2.reduce((a, t) => a + numel(t.shape), 0) : null,
    },
    text: textBytes,
    mtp: mtpBytes,
    vision: { bf16: sumBytes(vision, () => "bf16") },
    dflash: dflashBytes,
    dflash2: dflash2Bytes,
    download: {
      bf16: sumBytes(all, () => "bf16"),
      "mlx-4bit": mlxDownload("mlx-4bit"),
      "mlx-8bit": mlxDownload("mlx-8bit"),
      dflash: dflash ? sumBytes(dflash, () => "bf16") : null,
      dflash2: dflash2 ? sumBytes(dflash2, () => "bf16") : null,
    },
    fixed: {
      bf16: fixed(textBytes.bf16, hasMtp ? mtpBytes.bf16 : null, "bf16"),
      q8: fixed(textBytes.q8, hasMtp ? mtpBytes.q8 : null, "q8"),
      q4: fixed(textBytes.q4, hasMtp ? mtpBytes.q4 : null, "q4"),
      "mlx-4bit": fixed(textBytes["mlx-4bit"], mlxMtp("mlx-4bit"), "bf16"),
      "mlx-8bit": fixed(textBytes["mlx-8bit"], mlxMtp("mlx-8bit"), "bf16"),
    },
    kvBytesPerToken: state.kvBytesPerToken,
    mtpKvBytesPerToken: state.drafter.kvBytesPerToken,
    dflashKvBytesPerToken: dflashInventory?.state.drafter.kvBytesPerToken ?? null,
    dflash2KvBytesPerToken: dflash2Inventory?.state.drafter.kvBytesPerToken ?? null,
    stateBytesPerSequence: state.slotBytes,
    mtpStateBytes: state.drafter.slotBytes,
  };
}
