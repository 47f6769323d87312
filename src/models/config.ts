// A checkpoint's config.json as the registry reads it: which architecture it is, its text_config with Hugging Face's
// defaults filled in (a key left out of config.json means the config class's default there too), the kind of each
// layer, and the exact match against a spec's expected values.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Architecture, HubModelSpec, MlxQuantization } from "./spec.ts";

export type JsonObject = { [key: string]: unknown };

// transformers 5.17's Qwen3_5TextConfig / Qwen3_5MoeTextConfig / Qwen3_5VisionConfig defaults, for the keys the
// registry reads. `full_attention_interval` and `mtp_num_hidden_layers` are not class fields: the former defaults
// to 4 in the class's layer_types rule, the latter is absent from configs without an MTP layer.
const TEXT_DEFAULTS: Record<Architecture, JsonObject> = {
  qwen3_5: {
    vocab_size: 248320, hidden_size: 4096, intermediate_size: 12288, num_hidden_layers: 32, num_attention_heads: 16,
    num_key_value_heads: 4, head_dim: 256, linear_conv_kernel_dim: 4, linear_key_head_dim: 128, linear_value_head_dim: 128,
    linear_num_key_heads: 16, linear_num_value_heads: 32, tie_word_embeddings: false, attention_bias: false,
    full_attention_interval: 4, mtp_num_hidden_layers: 0, max_position_embeddings: 32768,
  },
  qwen3_5_moe: {
    vocab_size: 248320, hidden_size: 2048, num_hidden_layers: 40, num_attention_heads: 16, num_key_value_heads: 2,
    head_dim: 256, linear_conv_kernel_dim: 4, linear_key_head_dim: 128, linear_value_head_dim: 128, linear_num_key_heads: 16,
    linear_num_value_heads: 32, moe_intermediate_size: 512, shared_expert_intermediate_size: 512, num_experts_per_tok: 8,
    num_experts: 256, tie_word_embeddings: false, attention_bias: false, full_attention_interval: 4, mtp_num_hidden_layers: 0,
    max_position_embeddings: 32768,
  },
};
const VISION_DEFAULTS: JsonObject = {
  depth: 27, hidden_size: 1152, intermediate_size: 4304, num_heads: 16, in_channels: 3, patch_size: 16, spatial_merge_size: 2,
  temporal_patch_size: 2, out_hidden_size: 3584, num_position_embeddings: 2304,
};
// Older configs keep RoPE settings at the top level of text_config instead of in rope_parameters.
const ROPE_FALLBACK: Record<string, string> = { "rope_parameters.rope_theta": "rope_theta", "rope_parameters.partial_rotary_factor": "partial_rotary_factor" };

export type LayerKind = "linear_attention" | "full_attention";

export type CheckpointConfig = {
  architecture: Architecture;
  root: JsonObject; // config.json as written
  text: JsonObject; // text_config (or the root of a flat config) with the defaults filled in
  vision: JsonObject | undefined; // vision_config with defaults, when the config has one
  layerTypes: LayerKind[];
  mlx: MlxQuantization | undefined; // an MLX affine-quantized checkpoint's settings (config.json "quantization")
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function architectureOf(root: JsonObject): Architecture | undefined {
  const type = root.model_type;
  if (type === "qwen3_5" || type === "qwen3_5_text") return "qwen3_5";
  if (type === "qwen3_5_moe" || type === "qwen3_5_moe_text") return "qwen3_5_moe";
  const arch = Array.isArray(root.architectures) ? root.architectures[0] : undefined;
  if (arch === "Qwen3_5ForConditionalGeneration" || arch === "Qwen3_5ForCausalLM") return "qwen3_5";
  if (arch === "Qwen3_5MoeForConditionalGeneration" || arch === "Qwen3_5MoeForCausalLM") return "qwen3_5_moe";
  return undefined;
}

// The kind of each layer: `layer_types` when the config lists them, else every `full_attention_interval`-th layer
// is full attention (transformers' rule: layer i is full when (i + 1) % interval == 0).
export function layerTypesOf(text: JsonObject): LayerKind[] {
  const n = Number(text.num_hidden_layers);
  if (Array.isArray(text.layer_types)) return text.layer_types.map((t) => (t === "full_attention" ? "full_attention" : "linear_attention"));
  const interval = Number(text.full_attention_interval ?? 4);
  return Array.from({ length: n }, (_, i) => ((i + 1) % interval === 0 ? "full_attention" : "linear_attention"));
}

function mlxQuantizationOf(root: JsonObject): MlxQuantization | undefined {
  const q = root.quantization ?? root.quantization_config;
  if (!isObject(q) || typeof q.bits !== "number") return undefined;
  if (q.mode !== undefined && q.mode !== "affine") throw new ConfigError(`MLX quantization mode ${JSON.stringify(q.mode)} is not supported (affine is)`);
  if (q.bits !== 4 && q.bits !== 8) throw new ConfigError(`MLX quantization with ${q.bits} bits is not supported (4 and 8 are)`);
  if (q.group_size !== 64) throw new ConfigError(`MLX quantization with group size ${String(q.group_size)} is not supported (64 is)`);
  return { mode: "affine", bits: q.bits, groupSize: 64, overrides: {} };
}

// Interprets a parsed config.json; throws ConfigError for a config that is not of the Qwen3.5 family.
export function interpretConfig(root: JsonObject, where: string): CheckpointConfig {
  const architecture = architectureOf(root);
  if (!architecture) {
    const what = root.model_type ?? (Array.isArray(root.architectures) ? root.architectures[0] : undefined) ?? "unknown";
    throw new ConfigError(`${where}: model type ${JSON.stringify(what)} is not a Qwen3.5-family checkpoint (qwen3_5 or qwen3_5_moe)`);
  }
  const textRaw = isObject(root.text_config) ? root.text_config : root;
  const text = { ...TEXT_DEFAULTS[architecture], ...textRaw };
  const vision = isObject(root.vision_config) ? { ...VISION_DEFAULTS, ...root.vision_config } : undefined;
  return { architecture, root, text, vision, layerTypes: layerTypesOf(text), mlx: mlxQuantizationOf(root) };
}

export function readCheckpointConfig(dir: string): CheckpointConfig {
  const path = join(dir, "config.json");
  if (!existsSync(path)) throw new ConfigError(`${dir} has no config.json`);
  let root: unknown;
  try {
    root = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new ConfigError(`${path} is not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(root)) throw new ConfigError(`${path} is not a JSON object`);
  return interpretConfig(root, path);
}

// A value at a dotted path ("rope_parameters.rope_theta"), with the top-level fallback for RoPE keys.
export function configValue(obj: JsonObject, path: string): unknown {
  let v: unknown = obj;
  for (const part of path.split(".")) v = isObject(v) ? v[part] : undefined;
  if (v === undefined && ROPE_FALLBACK[path]) return obj[ROPE_FALLBACK[path]];
  return v;
}

export type Mismatch = { key: string; expected: unknown; actual: unknown };

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// Every expected key whose value differs, in the spec's order. `full_attention_interval` is compared as the layer
// kinds it implies, so a config that lists layer_types explicitly matches when the kinds agree.
export function configMismatches(expected: { text: JsonObject; vision?: JsonObject }, cfg: CheckpointConfig): Mismatch[] {
  const out: Mismatch[] = [];
  for (const [key, want] of Object.entries(expected.text)) {
    if (key === "full_attention_interval") {
      const wantKinds = layerTypesOf({ ...expected.text, layer_types: undefined });
      const i = wantKinds.findIndex((k, j) => cfg.layerTypes[j] !== k);
      if (i >= 0 || wantKinds.length !== cfg.layerTypes.length) {
        out.push({ key: i >= 0 ? `layer_types[${i}]` : "layer_types.length", expected: i >= 0 ? wantKinds[i] : wantKinds.length, actual: i >= 0 ? (cfg.layerTypes[i] ?? "none") : cfg.layerTypes.length });
      }
      continue;
    }
    const got = configValue(cfg.text, key);
    if (!same(got, want)) out.push({ key: `text_config.${key}`, expected: want, actual: got });
  }
  for (const [key, want] of Object.entries(expected.vision ?? {})) {
    const got = cfg.vision ? configValue(cfg.vision, key) : undefined;
    if (!same(got, want)) out.push({ key: `vision_config.${key}`, expected: want, actual: got });
  }
  return out;
}

export function describeMismatch(m: Mismatch): string {
  return `${m.key}: expected ${JSON.stringify(m.expected)}, found ${m.actual === undefined ? "nothing" : JSON.stringify(m.actual)}`;
}


// {"rope_parameters.rope_theta": 1e7} → {rope_parameters: {rope_theta: 1e7}}: a spec's dotted keys as a config nests them.
export function expandDotted(flat: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(flat)) {
    const parts = key.split(".");
    let obj = out;
    for (const p of parts.slice(0, -1)) obj = (obj[p] ??= {}) as JsonObject;
    obj[parts.at(-1)!] = value;
  }
  return out;
}

// The config every checkpoint matching a hub spec has: the spec's expected values over the class defaults.
export function expectedConfig(spec: HubModelSpec): CheckpointConfig {
  return interpretConfig({ model_type: spec.architecture, text_config: expandDotted(spec.config.text), vision_config: spec.config.vision }, `${spec.id} spec`);
}
