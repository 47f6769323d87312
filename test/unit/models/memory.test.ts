// The memory plan: the committed plans in the specs equal what the script computes, and the sizes agree with published
// figures. The tensor inventory it counts over is libsplash's, checked against real checkpoints in
// test/unit/native/inventory.test.ts.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { hubSpecs } from "../../../src/models/registry.ts";
import { join } from "node:path";
import { expectedConfig } from "../../../src/models/config.ts";
import { computeMemoryPlan, drafterInventory, modelInventory } from "../../../src/models/memory.ts";
import { isHubSpec, parseSpec, recipeType, QUANTS } from "../../../src/models/spec.ts";
import { repoRoot } from "../../helpers/cli.ts";

describe("sizes", () => {
  test("sequence state of the 27B shapes (ARCHITECTURE.md §6): 16 KV layers of 4×256, 48 GDN layers of 48×128×128 fp32", () => {
    const spec = parseSpec(JSON.parse(readFileSync(join(repoRoot, "models/qwen3.8-27b/spec.json"), "utf8")), "27b");
    if (!isHubSpec(spec)) throw new Error("not a hub spec");
    const plan = computeMemoryPlan(spec, expectedConfig(spec));
    expect(plan.kvBytesPerToken).toEqual({ f32: 16 * 2 * 4 * 256 * 4, f16: 16 * 2 * 4 * 256 * 2, int8: 16 * 2 * 4 * 8 * 34 });
    // the MTP layer: one more attention layer of the same heads
    expect(plan.mtpKvBytesPerToken).toEqual({ f32: 2 * 4 * 256 * 4, f16: 2 * 4 * 256 * 2, int8: 2 * 4 * 8 * 34 });
    expect(plan.stateBytesPerSequence).toBe(48 * (48 * 128 * 128 * 4 + 3 * 10240 * 4));
    expect(plan.mtpStateBytes).toBe(5120 * 4); // the MTP layer's last hidden row, f32
    // the DFlash2 drafter: its layers of K/V heads, as its spec's shapes say
    const d = spec.draft.dflash2;
    if (typeof d !== "object") throw new Error("the 27B spec has a DFlash2 drafter");
    const s = d.shapes;
    const rows = s.num_hidden_layers * 2 * s.num_key_value_heads;
    expect(plan.dflash2KvBytesPerToken).toEqual({ f32: rows * s.head_dim * 4, f16: rows * s.head_dim * 2, int8: rows * Math.ceil(s.head_dim / 32) * 34 });
  });

  test("the 27B's bf16 tensors add up to the published 55.56 GB of safetensors", () => {
    const spec = parseSpec(JSON.parse(readFileSync(join(repoRoot, "models/qwen3.8-27b/spec.json"), "utf8")), "27b");
    if (!isHubSpec(spec)) throw new Error("not a hub spec");
    expect(Math.round(computeMemoryPlan(spec, expectedConfig(spec)).download.bf16 / 1e7) / 100).toBe(55.56);
  });
});

describe("committed specs", () => {
  const hub = hubSpecs();

  test("there are hub specs", () => expect(hub.map((s) => s.id).sort()).toEqual(["qwen3.6-35b-a3b", "qwen3.8-27b"]));

  for (const spec of hub) {
    test(`${spec.id}: the memory plan is what scripts/models/memory_plan.ts computes`, () => {
      expect(spec.memory).toEqual(computeMemoryPlan(spec, expectedConfig(spec)));
    });
    test(`${spec.id}: the recipe covers every tensor kind of the model and its drafter`, () => {
      const cfg = expectedConfig(spec);
      const kinds = new Set(modelInventory(cfg).tensors.map((t) => t.kind));
      for (const kind of ["dflash", "dflash2"] as const) {
        const d = spec.draft[kind];
        if (typeof d === "object") for (const t of drafterInventory(cfg, kind, d.shapes).tensors) kinds.add(t.kind);
      }
      for (const kind of kinds) for (const q of QUANTS) expect(() => recipeType(spec.quantization.recipe, kind, q)).not.toThrow();
    });
  }
});
