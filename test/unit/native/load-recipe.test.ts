// One recipe for both ways a float checkpoint reaches a level: loaded directly with a quant (the loaders quantize each
// matrix to its kind's type, splash_load_options.quant) and `splash import`ed (packPlan, kinds from tensor names).
// Both give the same model, and the memory plan, counted over the inventory (the loaders' kinds) by the same recipe,
// counts exactly what the load holds. The tensor kinds have one home, libsplash's (splash_tensor_kind_name), which
// spec.ts's TENSOR_KINDS must equal.
import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expectedConfig, type JsonObject } from "../../../src/models/config.ts";
import { hubSpecs } from "../../../src/models/registry.ts";
import { DEFAULT_RECIPE, PACKED_FILE, packPlan, tensorKind, writePacked } from "../../../src/models/packed.ts";
import { readSafetensorsHeader } from "../../../src/models/safetensors.ts";
import { recipeType, TENSOR_KINDS, type RecipeRule } from "../../../src/models/spec.ts";
import { inventory } from "../../../src/native/inventory.ts";
import { native } from "../../../src/native/library.ts";
import { Model } from "../../../src/native/model.ts";
import { repoRoot } from "../../helpers/cli.ts";

const fixtures = join(repoRoot, "test/fixtures/models");
const config = (dir: string) => JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as JsonObject;

test("TENSOR_KINDS is libsplash's list of tensor kinds, in its order", () => {
  const lib = native();
  const names: string[] = [];
  for (let k = 0; lib.splash_tensor_kind_name(k) !== null; k++) names.push(String(lib.splash_tensor_kind_name(k)));
  expect(names).toEqual([...TENSOR_KINDS]);
  expect(lib.splash_tensor_kind_name(-1)).toBeNull();
});

// The kind import gives each tensor from its name (packed.ts) is the one the loaders take it as (the inventory's, which
// the memory plan counts by), for every tensor of every target fixture and of the hub models' expected configs.
describe("tensorKind agrees with the loaders' kinds", () => {
  const targets = ["qwen35-dense-tiny", "qwen35-dense-rope50", "qwen35-moe-tiny", "qwen35-moe-tiny-fused", "qwen35-vision-tiny"].map((n) => join(fixtures, n));
  const configs: [string, JsonObject][] = [...targets, join(repoRoot, "models/splash-tiny")].map((d) => [d, config(d)]);
  for (const spec of hubSpecs()) configs.push([spec.id, expectedConfig(spec).root]);
  for (const [name, cfg] of configs) {
    test(name, () => {
      const tensors = inventory(cfg).tensors;
      expect(tensors.map((t) => ({ name: t.name, kind: tensorKind(t.name) }))).toEqual(tensors.map((t) => ({ name: t.name, kind: t.kind })));
      expect(tensors.some((t) => t.kind === "embed") && tensors.some((t) => t.kind === "norm")).toBe(true);
    });
  }
  for (const [target, drafter, kind] of [
    ["models/splash-tiny", "models/splash-tiny/dflash", "dflash"],
    ["models/splash-tiny", "models/splash-tiny/dflash2", "dflash2"],
    ["test/fixtures/models/qwen35-dense-tiny", "test/fixtures/models/qwen35-dense-tiny-dflash", "dflash"],
  ] as const) {
    test(`${drafter}: every tensor of a DFlash drafter is dflash`, () => {
      const tensors = inventory(config(join(repoRoot, target)), { kind, config: config(join(repoRoot, drafter)) }).tensors;
      expect(tensors.length).toBeGreaterThan(0);
      expect(new Set(tensors.map((t) => t.kind))).toEqual(new Set(["dflash"]));
    });
  }
});

async function weightBytes(dir: string, quant: "none" | "q8" | "q4", recipe: readonly RecipeRule[] = DEFAULT_RECIPE): Promise<number> {
  const model = await Model.load(dir, { quant, recipe, threads: 1, backend: "cpu" });
  try {
    return model.info.weightBytes;
  } finally {
    model.free();
  }
}

// The fixture imported at `quant` by `recipe`, as a loadable directory.
async function imported(dir: string, quant: "q8" | "q4", recipe: readonly RecipeRule[]): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), "splash-recipe-"));
  const tensors = [...readSafetensorsHeader(join(dir, "model.safetensors")).tensors].map(([name, t]) => ({ name, shape: t.shape }));
  copyFileSync(join(dir, "config.json"), join(out, "config.json"));
  await writePacked(dir, join(out, PACKED_FILE), packPlan(tensors, recipe, quant), {}, 1);
  return out;
}

// A recipe unlike the default in every way the loaders once hard-coded: the embedding and the small gate matrices
// quantized, the head and the router at the level, the big matrices at the other level.
const ODD: RecipeRule[] = [
  { kinds: ["embed", "gdn_gate_proj", "moe_router", "shared_expert_gate"], q8: "q8", q4: "q4", why: "test" },
  { kinds: ["lm_head", "mtp_fc"], q8: "q4", q4: "q4", why: "test" },
  { kinds: ["attn_proj", "gdn_proj", "mlp", "moe_experts", "shared_expert"], q8: "q4", q4: "q8", why: "test" },
  { kinds: ["norm", "gdn_conv", "gdn_param", "vision", "dflash"], q8: "bf16", q4: "bf16", why: "test" },
];

describe("a float checkpoint loaded at a level is its import at that level", () => {
  for (const name of ["qwen35-dense-tiny", "qwen35-moe-tiny-fused", "qwen35-moe-tiny"]) {
    for (const [recipeName, recipe] of [["default", DEFAULT_RECIPE], ["odd", ODD]] as const) {
      for (const quant of ["q8", "q4"] as const) {
        test(`${name}, ${recipeName} recipe, ${quant}: loaded bytes = the import's = the plan's`, async () => {
          const dir = join(fixtures, name);
          const source = await weightBytes(dir, quant, recipe);
          // The vectors (f32 at load whatever the level) cancel out of the difference with the load as stored.
          const asStored = await weightBytes(dir, "none");
          const plan = inventory(config(dir)).tensors
            .filter((t) => t.part === "text") // the MTP head loads with its drafter
            .reduce((a, t) => a + t.bytes[recipeType(recipe, t.kind, quant)] - t.bytes.bf16, 0);
          expect(source - asStored).toBe(plan);
          expect(plan).not.toBe(0);
          // Tensor by tensor: the imported file holds each matrix at the recipe's type, and loads to the same bytes.
          expect(await weightBytes(await imported(dir, quant, recipe), "none")).toBe(source);
        });
      }
    }
  }
});

describe("a recipe a load cannot follow is refused", () => {
  const dir = join(fixtures, "qwen35-vision-tiny");
  test("the vision tower quantized: refused by libsplash, naming the kind", async () => {
    const recipe: RecipeRule[] = [...DEFAULT_RECIPE.map((r) => ({ ...r, kinds: r.kinds.filter((k) => k !== "vision") })).filter((r) => r.kinds.length > 0), { kinds: ["vision"], q8: "q8", q4: "q8", why: "test" }];
    await expect(Model.load(dir, { quant: "q8", recipe, threads: 1, backend: "cpu" })).rejects.toThrow(/quant\[vision\] 1: the vision tower computes in f32/);
  });
});
