// The memory plan's ground truth: the tensor inventory derived from a config must name every tensor of a real
// checkpoint with its exact shape (fixture checkpoints saved by transformers), the committed plans in the specs must
// equal what the script computes, and the byte arithmetic must agree with published figures.
import { describe, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { hubSpecs } from "../../../src/models/registry.ts";
import { join } from "node:path";
import { expectedConfig, readCheckpointConfig, type JsonObject } from "../../../src/models/config.ts";
import { computeMemoryPlan, inventory, kvBytesByType, stateBytesPerSequence, tensorBytes } from "../../../src/models/memory.ts";
import { readSafetensorsHeader } from "../../../src/models/safetensors.ts";
import { isHubSpec, parseSpec, recipeType, QUANTS, type DflashShapes } from "../../../src/models/spec.ts";
import { dflashTensors, type TensorInfo } from "../../../src/models/tensors.ts";
import { repoRoot } from "../../helpers/cli.ts";

const fixtures = join(repoRoot, "test/fixtures/models");

// name → shape of every tensor in a checkpoint directory (all shards). Per-expert MoE tensors
// (experts.{e}.{gate,up,down}_proj.weight, what transformers 5.17 saves) are folded into the fused hub layout.
function checkpointShapes(dir: string): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const perExpert = new Map<string, { gate: number[]; up: number[]; down: number[]; count: number }>();
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".safetensors"))) {
    for (const [name, t] of readSafetensorsHeader(join(dir, f)).tensors) {
      const m = /^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$/.exec(name);
      if (!m) {
        out.set(name, t.shape);
        continue;
      }
      const e = perExpert.get(m[1]!) ?? { gate: [], up: [], down: [], count: 0 };
      e[m[3] as "gate" | "up" | "down"] = t.shape;
      e.count = Math.max(e.count, Number(m[2]) + 1);
      perExpert.set(m[1]!, e);
    }
  }
  for (const [prefix, e] of perExpert) {
    out.set(`${prefix}.gate_up_proj`, [e.count, e.gate[0]! + e.up[0]!, e.gate[1]!]);
    out.set(`${prefix}.down_proj`, [e.count, ...e.down]);
  }
  return out;
}

function inventoryShapes(tensors: readonly TensorInfo[]): Map<string, number[]> {
  return new Map(tensors.map((t) => [t.name, t.shape]));
}

describe("tensor inventory matches real checkpoints", () => {
  for (const name of ["qwen35-dense-tiny", "qwen35-dense-tiny-sharded", "qwen35-dense-rope50", "qwen35-moe-tiny", "qwen35-moe-tiny-fused", "qwen35-vision-tiny"]) {
    test(name, () => {
      const dir = join(fixtures, name);
      const want = checkpointShapes(dir);
      const got = inventoryShapes(inventory(readCheckpointConfig(dir)));
      expect([...got.keys()].sort()).toEqual([...want.keys()].sort());
      for (const [k, shape] of want) expect({ k, shape: got.get(k) }).toEqual({ k, shape });
    });
  }

  for (const name of ["qwen35-dense-tiny-dflash", "qwen35-dense-tiny-dflash-swa", "qwen35-dense-tiny-dflash2"]) {
    test(`DFlash drafter ${name}`, () => {
      const dir = join(fixtures, name);
      const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as JsonObject & { dflash_config: JsonObject };
      const shapes: DflashShapes = {
        hidden_size: cfg.hidden_size as number,
        num_hidden_layers: cfg.num_hidden_layers as number,
        num_attention_heads: cfg.num_attention_heads as number,
        num_key_value_heads: cfg.num_key_value_heads as number,
        head_dim: cfg.head_dim as number,
        intermediate_size: cfg.intermediate_size as number,
        target_hidden_size: 64, // qwen35-dense-tiny's hidden size
        target_layer_ids: cfg.dflash_config.target_layer_ids as number[],
        block_size: cfg.dflash_config.block_size as number,
        vocab_size: cfg.vocab_size as number,
      };
      // DFlash2: the convolutions and the candidate selector
      for (const k of ["conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"] as const)
        if (k in cfg.dflash_config) shapes[k] = cfg.dflash_config[k] as number;
      expect(inventoryShapes(dflashTensors(shapes))).toEqual(checkpointShapes(dir));
    });
  }
});

describe("byte arithmetic", () => {
  test("per weight type", () => {
    expect(tensorBytes([10, 64], "bf16")).toBe(1280);
    expect(tensorBytes([10, 64], "q8")).toBe(10 * 2 * 34); // 2 groups of 32 int8 + f16 scale
    expect(tensorBytes([10, 70], "q8")).toBe(10 * 3 * 34); // the last group zero-padded
    expect(tensorBytes([10, 64], "q4")).toBe(10 * 2 * 20); // 16 bytes of nibbles + f16 d + f16 m
    expect(tensorBytes([10, 128], "mlx-affine-4")).toBe(10 * (64 + 2 * 4)); // packed + bf16 scale and bias per 64
    expect(tensorBytes([10, 128], "mlx-affine-8")).toBe(10 * (128 + 2 * 4));
    expect(tensorBytes([10, 100], "mlx-affine-4")).toBe(2000); // not a multiple of the group: mlx-lm leaves it bf16
    expect(tensorBytes([3, 10, 64], "q4")).toBe(30 * 2 * 20); // leading dims are rows (MoE experts)
  });

  test("sequence state of the 27B shapes (ARCHITECTURE.md §6): 16 KV layers of 4×256, 48 GDN layers of 48×128×128 fp32", () => {
    const spec = parseSpec(JSON.parse(readFileSync(join(repoRoot, "models/qwen3.8-27b/spec.json"), "utf8")), "27b");
    if (!isHubSpec(spec)) throw new Error("not a hub spec");
    const cfg = expectedConfig(spec);
    expect(kvBytesByType(cfg.layerTypes, cfg.text)).toEqual({ f32: 16 * 2 * 4 * 256 * 4, f16: 16 * 2 * 4 * 256 * 2, int8: 16 * 2 * 4 * 8 * 34 });
    expect(stateBytesPerSequence(cfg.layerTypes, cfg.text)).toBe(48 * (48 * 128 * 128 * 4 + 3 * 10240 * 4));
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
      const kinds = new Set(inventory(expectedConfig(spec)).map((t) => t.kind));
      if (typeof spec.draft.dflash === "object" || typeof spec.draft.dflash2 === "object") kinds.add("dflash");
      for (const kind of kinds) for (const q of QUANTS) expect(() => recipeType(spec.quantization.recipe, kind, q)).not.toThrow();
    });
  }
});
