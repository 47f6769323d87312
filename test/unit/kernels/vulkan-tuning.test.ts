// The per-model GPU tuning files (models/<id>/vulkan.json) parse with the generator's schema, name only weight types
// the kernels decode, and reach the generated C tables (kernels/generate.ts).
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_TILES, generate, Tuning, tunings, writeTables } from "../../../kernels/generate.ts";

test("every models/<id>/vulkan.json parses and covers a supported model", () => {
  const all = tunings();
  expect([...all.keys()].sort()).toEqual(["qwen3.6-35b-a3b", "qwen3.8-27b"]);
  for (const [id, t] of all) {
    expect(existsSync(join(import.meta.dir, "../../../models", id, "spec.json"))).toBe(true);
    for (const g of t.gemv) expect(g.rows * g.cols).toBeGreaterThan(0);
  }
});

test("the schema refuses launches the kernels cannot take", () => {
  const base = { measured: null, gemv: [{ type: "q4", rows: 8, cols: 64, workgroup: 64, rowsPerGroup: 2 }] };
  expect(Tuning.safeParse(base).success).toBe(true);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], workgroup: 256 }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], rowsPerGroup: 8 }] }).success).toBe(true);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], rowsPerGroup: 9 }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], batch: 4, rowsPerGroup: 4 }] }).success).toBe(true);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], batch: 16, rowsPerGroup: 4 }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], batch: 2 }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], workgroup: 128, groups: 4 }] }).success).toBe(true);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], workgroup: 128, groups: 16 }] }).success).toBe(true); // 8 lanes
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], workgroup: 64, groups: 16 }] }).success).toBe(false); // 4 lanes
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], workgroup: 128, groups: 3 }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemv: [{ ...base.gemv[0], type: "q5" }] }).success).toBe(false);
  const coop = { type: "q4", rows: 12288, cols: 5120, tile: { bm: 128, bn: 256, bk: 32, wm: 64, wn: 64 } };
  expect(Tuning.safeParse({ ...base, gemmCoopmat: [coop] }).success).toBe(true);
  expect(Tuning.safeParse({ ...base, gemmCoopmat: [{ ...coop, tile: { ...coop.tile, async: true } }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, gemmCoopmat: [{ ...coop, type: "f32" }] }).success).toBe(false);
  expect(Tuning.safeParse({ ...base, prefillChunk: 2048 }).success).toBe(true);
  expect(Tuning.safeParse({ ...base, prefillChunk: 32 }).success).toBe(false); // below a KV page's 64 tokens
  expect(Tuning.safeParse({ ...base, prefillChunk: 1000.5 }).success).toBe(false);
});

test("a measured prefill chunk reaches the C table under the model's text width and depth", () => {
  const dir = mkdtempSync(join(tmpdir(), "splash-tables-"));
  try {
    const c = readFileSync(writeTables(dir).source, "utf8");
    const rows = [...c.matchAll(/^    \{(\d+), (\d+), (\d+)\}, \/\* ([\w.-]+) \*\/$/gm)].filter((m) => c.lastIndexOf("sp_gpu_step_tunings", m.index) > c.lastIndexOf("sp_gpu_gemm_coop_tunings", m.index));
    const measured = [...tunings()].filter(([, t]) => t.prefillChunk);
    expect(measured.length).toBeGreaterThan(0);
    for (const [id, t] of measured) {
      const text = JSON.parse(readFileSync(join(import.meta.dir, "../../../models", id, "spec.json"), "utf8")).config.text;
      expect(rows.find((m) => m[4] === id)?.slice(1, 4).map(Number)).toEqual([text.hidden_size, text.num_hidden_layers, t.prefillChunk!]);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The build's own output directory: up to date after scripts/build/native.ts, so this only reads it back.
test.skipIf(!Bun.which("glslangValidator"))("the generator embeds every kernel and the default GEMM tiles", async () => {
  const g = await generate(join(import.meta.dir, "../../../build/gen"));
  expect(g).not.toBeNull();
  const c = readFileSync(g!.source, "utf8");
  const ids = readFileSync(join(g!.tables, "../gpu_kernels.h"), "utf8");
  for (const k of ["matmul_q4", "matmul4_bf16", "moe_gate_up_q8", "attend", "gdn", "moe_plan", "sample_stats", "stream"]) {
    expect(ids).toContain(`SP_GPU_${k.toUpperCase()} =`);
    expect(c).toContain(`[SP_GPU_${k.toUpperCase()}] = {spv_${k}, `);
  }
  expect(ids).toContain(`#define SP_GPU_TILE_COUNT ${DEFAULT_TILES.length}`);
  expect(c).toMatch(/static const uint32_t spv_matmul_q4\[\d+\] = \{\n    0x07230203u/); // the SPIR-V magic
}, 240_000);
