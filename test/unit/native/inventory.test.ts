// The tensor inventory libsplash describes from a config alone (src/native/inventory.ts) against real checkpoints:
// every tensor of each fixture (saved by transformers or z-lab's code) with its exact shape and part, its bf16 bytes
// those of the file, and its Q8/Q4 bytes those `splash import` writes — dense, MoE (per-expert and fused), vision, MTP
// and the DFlash and DFlash2 drafters; and the sequence state, which a load of the same checkpoint sizes.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { JsonObject } from "../../../src/models/config.ts";
import { DEFAULT_RECIPE, packPlan, readPackedHeader, writePacked } from "../../../src/models/packed.ts";
import { readSafetensorsHeader } from "../../../src/models/safetensors.ts";
import { KV_TYPES, type KvType } from "../../../src/models/kv-type.ts";
import { NativeError } from "../../../src/native/errors.ts";
import { inventory, type InventoryTensor, type Part } from "../../../src/native/inventory.ts";
import { Model, type DrafterOptions } from "../../../src/native/model.ts";
import { repoRoot } from "../../helpers/cli.ts";

const fixtures = join(repoRoot, "test/fixtures/models");
const tiny = join(repoRoot, "models/splash-tiny");
const config = (dir: string) => JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as JsonObject;

type Want = { shape: number[]; bytes: number };

// name → shape and bytes of every tensor in a checkpoint directory (all shards). Per-expert MoE tensors
// (experts.{e}.{gate,up,down}_proj.weight, what transformers saves) are folded into the fused hub layout the
// inventory names.
function checkpointTensors(dir: string): Map<string, Want> {
  const out = new Map<string, Want>();
  const perExpert = new Map<string, { gate: number[]; up: number[]; down: number[]; count: number; bytes: number }>();
  for (const f of readdirSync(dir).filter((f) => f.endsWith(".safetensors"))) {
    for (const [name, t] of readSafetensorsHeader(join(dir, f)).tensors) {
      const m = /^(.*\.mlp\.experts)\.(\d+)\.(gate|up|down)_proj\.weight$/.exec(name);
      if (!m) {
        out.set(name, { shape: t.shape, bytes: t.end - t.begin });
        continue;
      }
      const e = perExpert.get(m[1]!) ?? { gate: [], up: [], down: [], count: 0, bytes: 0 };
      e[m[3] as "gate" | "up" | "down"] = t.shape;
      e.count = Math.max(e.count, Number(m[2]) + 1);
      perExpert.set(m[1]!, e);
    }
  }
  for (const [prefix, e] of perExpert) {
    const gateUp = [e.count, e.gate[0]! + e.up[0]!, e.gate[1]!];
    out.set(`${prefix}.gate_up_proj`, { shape: gateUp, bytes: 2 * gateUp.reduce((a, b) => a * b) });
    out.set(`${prefix}.down_proj`, { shape: [e.count, ...e.down], bytes: 2 * e.count * e.down.reduce((a, b) => a * b) });
  }
  return out;
}

function expectSame(got: InventoryTensor[], want: Map<string, Want>): void {
  expect(got.map((t) => t.name).sort()).toEqual([...want.keys()].sort());
  for (const t of got) expect({ name: t.name, shape: t.shape, bytes: t.bytes.bf16 }).toEqual({ name: t.name, ...want.get(t.name)! });
}

const partOf = (name: string): Part => (name.startsWith("mtp.") ? "mtp" : name.startsWith("model.visual.") ? "vision" : "text");

describe("a target's tensors are its checkpoint's", () => {
  const targets: [string, Part[]][] = [
    [join(fixtures, "qwen35-dense-tiny"), ["text", "mtp", "vision"]],
    [join(fixtures, "qwen35-dense-tiny-sharded"), ["text", "mtp", "vision"]],
    [join(fixtures, "qwen35-dense-rope50"), ["text", "vision"]],
    [join(fixtures, "qwen35-moe-tiny"), ["text", "mtp", "vision"]],
    [join(fixtures, "qwen35-moe-tiny-fused"), ["text", "mtp", "vision"]],
    [join(fixtures, "qwen35-vision-tiny"), ["text", "vision"]],
  ];
  for (const [dir, parts] of targets) {
    test(dir.slice(repoRoot.length + 1), () => {
      const got = inventory(config(dir)).tensors;
      expectSame(got, checkpointTensors(dir));
      expect(got.filter((t) => t.part !== partOf(t.name))).toEqual([]);
      expect([...new Set(got.map((t) => t.part))].sort()).toEqual([...parts].sort());
    });
  }
});

describe("a drafter's tensors are its checkpoint's", () => {
  const drafters: [string, string, "dflash" | "dflash2"][] = [
    ["qwen35-dense-tiny", "qwen35-dense-tiny-dflash", "dflash"],
    ["qwen35-dense-tiny", "qwen35-dense-tiny-dflash-swa", "dflash"],
    ["qwen35-dense-tiny", "qwen35-dense-tiny-dflash2", "dflash2"],
  ];
  const cases = [
    ...drafters.map(([target, drafter, kind]) => [join(fixtures, target), join(fixtures, drafter), kind] as const),
    [tiny, join(tiny, "dflash"), "dflash"] as const,
    [tiny, join(tiny, "dflash2"), "dflash2"] as const,
  ];
  for (const [target, dir, kind] of cases) {
    test(`${kind} ${dir.slice(repoRoot.length + 1)}`, () => {
      const got = inventory(config(target), { kind, config: config(dir) }).tensors;
      expectSame(got, checkpointTensors(dir));
      expect(new Set(got.map((t) => t.part))).toEqual(new Set(["drafter"]));
    });
  }

  test("a drafter of the other version is refused as attaching it would be", () => {
    expect(() => inventory(config(tiny), { kind: "dflash", config: config(join(tiny, "dflash2")) })).toThrow(/holds a DFlash2 drafter/);
  });
});

describe("bytes in each weight type", () => {
  // rows of 96 and 32 weights: three Q4 groups and one, whose nibbles are padded to whole 64-weight blocks
  for (const name of ["qwen35-dense-tiny", "qwen35-moe-tiny-fused"]) {
    for (const quant of ["q8", "q4"] as const) {
      test(`${name}: ${quant} is what splash import writes`, async () => {
        const dir = join(fixtures, name);
        const tensors = [...readSafetensorsHeader(join(dir, "model.safetensors")).tensors].map(([n, t]) => ({ name: n, shape: t.shape }));
        const out = join(mkdtempSync(join(tmpdir(), "splash-inventory-")), "model.splash");
        await writePacked(dir, out, packPlan(tensors, DEFAULT_RECIPE, quant), {}, 1);
        const packed = readPackedHeader(out).tensors.filter((t) => t.type === "q8" || t.type === "q4");
        expect(packed.some((t) => t.type === quant && Math.ceil(t.cols / 32) % 2 === 1)).toBe(true);
        const got = new Map(inventory(config(dir)).tensors.map((t) => [t.name, t.bytes]));
        for (const t of packed) expect({ name: t.name, bytes: got.get(t.name)![t.type as "q8" | "q4"] }).toEqual({ name: t.name, bytes: t.rows * t.row_bytes });
      });
    }
  }

  test("MLX affine: packed bits plus a bf16 scale and bias per 64; a row MLX cannot group stays bf16", () => {
    for (const t of inventory(config(tiny)).tensors) {
      const cols = t.shape.at(-1)!;
      const rows = t.shape.reduce((a, b) => a * b, 1) / cols;
      const mlx = (bits: number) => (cols % 64 ? t.bytes.bf16 : rows * ((cols * bits) / 8 + (cols / 64) * 4));
      expect({ name: t.name, m4: t.bytes["mlx-affine-4"], m8: t.bytes["mlx-affine-8"] }).toEqual({ name: t.name, m4: mlx(4), m8: mlx(8) });
    }
  });
});

// The K/V bytes per token a loaded model's pages hold in each KV type, and its slot bytes: what a load sizes.
function loadedState(model: Model): { kvBytesPerToken: Record<KvType, number>; slotBytes: number } {
  const kv = {} as Record<KvType, number>;
  for (const type of KV_TYPES) {
    model.setKvType(type);
    kv[type] = model.pageBytes(64) / 64; // pages of 64 tokens need no padding
  }
  return { kvBytesPerToken: kv, slotBytes: model.slotBytes };
}

async function loaded(dir: string, drafter?: DrafterOptions): Promise<ReturnType<typeof loadedState>> {
  const model = await Model.load(dir, { threads: 1, ...(drafter ? { drafter } : {}) });
  try {
    return loadedState(model);
  } finally {
    model.free();
  }
}

// What attaching a drafter adds to the target's state.
const added = (withDrafter: ReturnType<typeof loadedState>, target: ReturnType<typeof loadedState>): ReturnType<typeof loadedState> => ({
  kvBytesPerToken: Object.fromEntries(KV_TYPES.map((t) => [t, withDrafter.kvBytesPerToken[t] - target.kvBytesPerToken[t]])) as Record<KvType, number>,
  slotBytes: withDrafter.slotBytes - target.slotBytes,
});

test("the sequence state is what a load of the config sizes, the MTP layer's what attaching it adds", async () => {
  for (const dir of [join(fixtures, "qwen35-dense-tiny"), join(fixtures, "qwen35-moe-tiny-fused"), join(fixtures, "qwen35-dense-rope50")]) {
    const { state } = inventory(config(dir));
    const target = await loaded(dir);
    expect({ dir, kvBytesPerToken: state.kvBytesPerToken, slotBytes: state.slotBytes }).toEqual({ dir, ...target });
    const mtp = Boolean((config(dir).text_config as JsonObject | undefined)?.mtp_num_hidden_layers);
    const none = { kvBytesPerToken: { f32: 0, f16: 0, int8: 0 }, slotBytes: 0 };
    expect({ dir, drafter: state.drafter }).toEqual({ dir, drafter: mtp ? added(await loaded(dir, { kind: "mtp" }), target) : none });
  }
});

test("a DFlash drafter's sequence state is what attaching it adds", async () => {
  const dir = join(fixtures, "qwen35-dense-tiny");
  const target = await loaded(dir);
  for (const [name, kind] of [["qwen35-dense-tiny-dflash", "dflash"], ["qwen35-dense-tiny-dflash2", "dflash2"]] as const) {
    const drafter = join(fixtures, name);
    const { state } = inventory(config(dir), { kind, config: config(drafter) });
    expect({ name, drafter: state.drafter }).toEqual({ name, drafter: added(await loaded(dir, { kind, dir: drafter }), target) });
  }
});

test("a config the loader refuses is refused by name", () => {
  expect(() => inventory({ ...config(tiny), model_type: "llama" })).toThrow(NativeError);
  expect(() => inventory({ ...config(tiny), model_type: "llama" })).toThrow(/model_type "llama" is not a Qwen3.5-family model/);
  const text = config(tiny).text_config as JsonObject;
  expect(() => inventory({ ...config(tiny), text_config: { ...text, hidden_size: "wide" } })).toThrow(/hidden_size: expected an integer/);
});
