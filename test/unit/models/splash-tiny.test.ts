// The embedded model's files as scripts/train wrote them: sizes (every file ≤ 16 MiB, all ≲ 40 MB), the official
// Qwen3.5 tensor layout against config.json (shapes of every layer kind, mtp.*, bf16, no vision tensors), the
// z-lab drafter layout (no embedding or head, fc over the tapped layers), token ids shared by spec, tokenizer and
// drafter, and the golden file's shapes.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { readSafetensorsHeader, type SafetensorsTensor } from "../../../src/models/safetensors.ts";

const root = join(import.meta.dir, "..", "..", "..");
const dir = join(root, "models/splash-tiny");
const json = (path: string) => JSON.parse(readFileSync(path, "utf8"));
const config = json(join(dir, "config.json"));
const text = config.text_config;
const spec = json(join(dir, "spec.json"));
const drafterConfig = json(join(dir, "dflash/config.json"));
const drafter2Config = json(join(dir, "dflash2/config.json"));
const tokenizerConfig = json(join(dir, "tokenizer_config.json"));
const tokenId = (content: string) =>
  Number(Object.entries(tokenizerConfig.added_tokens_decoder as Record<string, { content: string }>).find(([, v]) => v.content === content)?.[0]);

function files(d: string): string[] {
  return readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)]));
}

function tensorsOf(paths: string[]): Map<string, SafetensorsTensor> {
  const all = new Map<string, SafetensorsTensor>();
  for (const p of paths) for (const [k, v] of readSafetensorsHeader(p).tensors) all.set(k, v);
  return all;
}

describe("splash-tiny files", () => {
  test("every file is at most 16 MiB and the model is under 40 MB", () => {
    const sizes = files(dir).map((f) => statSync(f).size);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(16 * 1024 * 1024);
    expect(sizes.reduce((a, b) => a + b, 0)).toBeLessThan(40e6);
  });

  test("spec, tokenizer, config and drafter agree on token ids and context", () => {
    expect(spec.eosTokenIds).toEqual([tokenId("<|im_end|>"), tokenId("<|endoftext|>")]);
    expect(config.eos_token_id).toBe(tokenId("<|im_end|>"));
    expect(drafterConfig.dflash_config.mask_token_id).toBe(tokenId("<|MASK|>"));
    expect(spec.draft.maskTokenId).toBe(tokenId("<|MASK|>"));
    expect(config.image_token_id).toBe(tokenId("<|image_pad|>"));
    expect(spec.contextLength).toBe(text.max_position_embeddings);
    expect(text.max_position_embeddings).toBeGreaterThanOrEqual(65536);
    expect(spec.vocabSize).toBe(text.vocab_size);
    expect(Math.max(...Object.keys(tokenizerConfig.added_tokens_decoder).map(Number))).toBeLessThan(text.vocab_size);
  });
});

describe("splash-tiny target layout", () => {
  const index = json(join(dir, "model.safetensors.index.json"));
  const shards = [...new Set(Object.values(index.weight_map as Record<string, string>))].map((f) => join(dir, f));
  const tensors = tensorsOf(shards);
  const shape = (name: string) => tensors.get(name)?.shape;
  const H = text.hidden_size;

  test("the index names exactly the tensors of the shards, all bf16, no vision tower", () => {
    expect([...tensors.keys()].sort()).toEqual(Object.keys(index.weight_map).sort());
    expect([...tensors.values()].every((t) => t.dtype === "BF16")).toBe(true);
    expect([...tensors.keys()].filter((k) => k.startsWith("model.visual."))).toEqual([]);
  });

  test("hybrid layers: GQA gated attention with per-head query|gate rows, GDN with a GVA ratio above 1", () => {
    const kd = text.linear_num_key_heads * text.linear_key_head_dim;
    const vd = text.linear_num_value_heads * text.linear_value_head_dim;
    expect(text.num_attention_heads / text.num_key_value_heads).toBeGreaterThan(1);
    expect(text.linear_num_value_heads / text.linear_num_key_heads).toBeGreaterThan(1);
    expect(text.rope_parameters.partial_rotary_factor).toBeLessThan(1);
    (text.layer_types as string[]).forEach((kind, i) => {
      const p = `model.language_model.layers.${i}.`;
      if (kind === "full_attention") {
        expect(shape(p + "self_attn.q_proj.weight")).toEqual([text.num_attention_heads * text.head_dim * 2, H]);
        expect(shape(p + "self_attn.k_proj.weight")).toEqual([text.num_key_value_heads * text.head_dim, H]);
        expect(shape(p + "self_attn.q_norm.weight")).toEqual([text.head_dim]);
      } else {
        expect(shape(p + "linear_attn.in_proj_qkv.weight")).toEqual([2 * kd + vd, H]);
        expect(shape(p + "linear_attn.in_proj_z.weight")).toEqual([vd, H]);
        expect(shape(p + "linear_attn.in_proj_a.weight")).toEqual([text.linear_num_value_heads, H]);
        expect(shape(p + "linear_attn.conv1d.weight")).toEqual([2 * kd + vd, 1, text.linear_conv_kernel_dim]);
        expect(shape(p + "linear_attn.A_log")).toEqual([text.linear_num_value_heads]);
        expect(shape(p + "linear_attn.norm.weight")).toEqual([text.linear_value_head_dim]);
      }
      expect(shape(p + "mlp.down_proj.weight")).toEqual([H, text.intermediate_size]);
    });
    expect(text.layer_types).toContain("full_attention");
    expect(text.layer_types).toContain("linear_attention");
  });

  test("untied head and the MTP layer under its official names", () => {
    expect(shape("model.language_model.embed_tokens.weight")).toEqual([text.vocab_size, H]);
    expect(shape("lm_head.weight")).toEqual([text.vocab_size, H]);
    expect(shape("mtp.fc.weight")).toEqual([H, 2 * H]);
    for (const n of ["mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight"]) expect(shape(n)).toEqual([H]);
    expect(shape("mtp.layers.0.self_attn.q_proj.weight")).toEqual([text.num_attention_heads * text.head_dim * 2, H]);
    expect(text.mtp_num_hidden_layers).toBe(1);
  });
});

describe("splash-tiny DFlash drafter", () => {
  const tensors = tensorsOf([join(dir, "dflash/model.safetensors")]);
  const taps: number[] = drafterConfig.dflash_config.target_layer_ids;

  test("z-lab layout: fc over the tapped target layers, no embedding or head of its own", () => {
    expect(taps.every((t) => t >= 0 && t < text.num_hidden_layers)).toBe(true);
    expect(tensors.get("fc.weight")?.shape).toEqual([drafterConfig.hidden_size, taps.length * text.hidden_size]);
    expect(tensors.has("hidden_norm.weight") && tensors.has("norm.weight")).toBe(true);
    expect([...tensors.keys()].filter((k) => /embed|lm_head/.test(k))).toEqual([]);
    const perLayer = [...tensors.keys()].filter((k) => k.startsWith("layers.0."));
    expect(perLayer.length).toBe(11);
    expect([...tensors.keys()].length).toBe(3 + 11 * drafterConfig.num_hidden_layers);
    expect(drafterConfig.dflash_config.block_size).toBe(8);
  });
});

describe("splash-tiny DFlash2 drafter", () => {
  const tensors = tensorsOf([join(dir, "dflash2/model.safetensors")]);
  const dc = drafter2Config.dflash_config;

  test("z-lab DFlash2 layout: the DFlash backbone, convolutions around each sublayer, the selector's codebooks", () => {
    expect(drafter2Config.architectures).toEqual(["DFlash2DraftModel"]);
    const H = drafter2Config.hidden_size;
    for (const k of ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"]) expect(drafter2Config[k]).toBe(drafterConfig[k]);
    expect({ ...dc, conv_kernel_size: undefined, conv_group_size: undefined, selector_rank: undefined, selector_top_k: undefined }).toMatchObject(drafterConfig.dflash_config);
    expect(spec.draft.maskTokenId).toBe(dc.mask_token_id);
    expect(tensors.get("fc.weight")?.shape).toEqual([H, dc.target_layer_ids.length * text.hidden_size]);
    expect(tensors.get("layers.0.attention_conv.base_kernel")?.shape).toEqual([2, dc.conv_kernel_size, H]);
    expect(tensors.get("layers.0.mlp_conv.kernel_projection.weight")?.shape).toEqual([(2 * dc.conv_kernel_size * H) / dc.conv_group_size, H]);
    expect(tensors.get("candidate_selector.hidden_projection.weight")?.shape).toEqual([dc.selector_rank, H]);
    for (const c of ["predecessor", "successor"]) expect(tensors.get(`candidate_selector.${c}_codebook`)?.shape).toEqual([text.vocab_size, dc.selector_rank]);
    expect([...tensors.keys()].filter((k) => /embed|lm_head/.test(k))).toEqual([]);
    expect([...tensors.keys()].length).toBe(6 + 15 * drafter2Config.num_hidden_layers);
    expect([...tensors.values()].every((t) => t.dtype === "BF16")).toBe(true);
  });
});

describe("splash-tiny golden logits", () => {
  const golden = readSafetensorsHeader(join(root, "test/fixtures/models/splash-tiny-golden/golden.safetensors")).tensors;
  test("logits for every position of each prompt, MTP and DFlash outputs over the padded vocabulary", () => {
    for (const p of ["p0", "p1", "p2"]) {
      const n = golden.get(`${p}.input_ids`)?.shape[0] ?? 0;
      expect(n).toBeGreaterThan(0);
      expect(golden.get(`${p}.logits`)?.shape).toEqual([n, text.vocab_size]);
      expect(golden.get(`${p}.logits`)?.dtype).toBe("F32");
    }
    const n0 = golden.get("p0.input_ids")?.shape[0] ?? 0;
    expect(golden.get("p0.mtp_logits")?.shape).toEqual([n0 - 1, text.vocab_size]);
    expect(golden.get("p0.dflash_logits")?.shape).toEqual([drafterConfig.block_size - 1, text.vocab_size]);
    expect(golden.get("p0.taps")?.shape).toEqual([n0, drafterConfig.dflash_config.target_layer_ids.length * text.hidden_size]);
    expect(golden.get("p3.argmax")?.shape).toEqual(golden.get("p3.input_ids")?.shape);
  });
});
