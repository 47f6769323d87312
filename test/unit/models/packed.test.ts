// The packed format's TypeScript side: tensor kinds by name agree with the registry's inventory of the official
// layout, and the import plan follows the recipe (vectors never quantized).
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { readCheckpointConfig } from "../../../src/models/config.ts";
import { DEFAULT_RECIPE, packPlan, tensorKind } from "../../../src/models/packed.ts";
import { hubSpecs } from "../../../src/models/registry.ts";
import { textTensors, visionTensors } from "../../../src/models/tensors.ts";

const FIXTURES = join(import.meta.dir, "../../fixtures/models");

describe("tensorKind", () => {
  test("agrees with tensors.ts on every tensor of the official layout (dense, MoE, MTP, vision)", () => {
    for (const dir of ["qwen35-dense-tiny", "qwen35-moe-tiny-fused", "qwen35-vision-tiny"]) {
      const cfg = readCheckpointConfig(join(FIXTURES, dir));
      const all = [...textTensors(cfg.text, cfg.architecture, cfg.layerTypes), ...(cfg.vision ? visionTensors(cfg.vision) : [])];
      expect(all.length).toBeGreaterThan(20);
      for (const t of all) expect(`${t.name}: ${tensorKind(t.name)}`).toBe(`${t.name}: ${t.kind}`);
    }
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
