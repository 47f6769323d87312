// The packed format's TypeScript side: a kind for every tensor name of the official layout (libsplash's inventory),
// and the import plan follows the recipe (vectors never quantized).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readCheckpointConfig } from "../../../src/models/config.ts";
import { DEFAULT_RECIPE, packPlan, tensorKind } from "../../../src/models/packed.ts";
import { hubSpecs } from "../../../src/models/registry.ts";
import { inventory } from "../../../src/native/inventory.ts";

const FIXTURES = join(import.meta.dir, "../../fixtures/models");

describe("tensorKind", () => {
  test("names every tensor of the official layout's text and MTP parts (dense, MoE, vision configs)", () => {
    const kinds = new Map<string, string>();
    for (const dir of ["qwen35-dense-tiny", "qwen35-moe-tiny-fused", "qwen35-vision-tiny"]) {
      const all = inventory(readCheckpointConfig(join(FIXTURES, dir)).root).tensors.filter((t) => t.part === "text" || t.part === "mtp");
      expect(all.length).toBeGreaterThan(20);
      for (const t of all) kinds.set(t.name.replace(/\.\d+\./g, ".N."), tensorKind(t.name));
    }
    expect(Object.fromEntries(kinds)).toMatchObject({
      "model.language_model.embed_tokens.weight": "embed",
      "lm_head.weight": "lm_head",
      "model.language_model.layers.N.input_layernorm.weight": "norm",
      "model.language_model.layers.N.self_attn.q_proj.weight": "attn_proj",
      "model.language_model.layers.N.self_attn.k_norm.weight": "norm",
      "model.language_model.layers.N.linear_attn.in_proj_qkv.weight": "gdn_proj",
      "model.language_model.layers.N.linear_attn.in_proj_a.weight": "gdn_gate_proj",
      "model.language_model.layers.N.linear_attn.conv1d.weight": "gdn_conv",
      "model.language_model.layers.N.linear_attn.A_log": "gdn_param",
      "model.language_model.layers.N.linear_attn.norm.weight": "norm",
      "model.language_model.layers.N.mlp.up_proj.weight": "mlp",
      "model.language_model.layers.N.mlp.gate.weight": "moe_router",
      "model.language_model.layers.N.mlp.experts.gate_up_proj": "moe_experts",
      "model.language_model.layers.N.mlp.shared_expert.down_proj.weight": "shared_expert",
      "model.language_model.layers.N.mlp.shared_expert_gate.weight": "shared_expert_gate",
      "mtp.fc.weight": "mtp_fc",
      "mtp.pre_fc_norm_hidden.weight": "norm",
      "mtp.layers.N.self_attn.o_proj.weight": "attn_proj",
    });
  });

  test("text-only and per-expert names", () => {
    expect(tensorKind("model.layers.3.mlp.experts.7.down_proj.weight")).toBe("moe_experts");
    expect(tensorKind("model.layers.0.linear_attn.in_proj_a.weight")).toBe("gdn_gate_proj");
    expect(tensorKind("model.embed_tokens.weight")).toBe("embed");
    expect(() => tensorKind("model.layers.0.something_new.weight")).toThrow(/not a tensor of a Qwen3\.5-family checkpoint/);
  });
});

describe("packPlan", () => {
  const tensors = [
    { name: "model.language_model.layers.0.self_attn.q_proj.weight", shape: [64, 32] },
    { name: "model.language_model.layers.0.input_layernorm.weight", shape: [32] },
    { name: "model.language_model.layers.0.linear_attn.in_proj_b.weight", shape: [4, 32] },
    { name: "model.language_model.layers.0.mlp.gate.weight", shape: [8, 32] },
    { name: "lm_head.weight", shape: [100, 32] },
  ];

  test("the default recipe: big matrices at the level, the head at 8 bits, gates and vectors as stored", () => {
    const plan = packPlan(tensors, DEFAULT_RECIPE, "q4");
    expect(Object.values(plan).map((p) => p.type ?? "as stored")).toEqual(["q4", "as stored", "as stored", "as stored", "q8"]);
    expect(plan["lm_head.weight"]!.kind).toBe("lm_head");
  });

  test("a hub model's own recipe", () => {
    const spec = hubSpecs().find((s) => s.id === "qwen3.6-35b-a3b")!;
    const plan = packPlan(tensors, spec.quantization.recipe, "q8");
    expect(plan["model.language_model.layers.0.self_attn.q_proj.weight"]!.type).toBe("q8");
    expect(plan["model.language_model.layers.0.mlp.gate.weight"]!.type).toBeUndefined();
  });
});
