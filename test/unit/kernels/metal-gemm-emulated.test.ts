// The Metal GEMM on simdgroup matrices (kernels/matmul_simdgroup.metal) run on the CPU: its text compiled as C++
// against an emulated <metal_stdlib> (test/fixtures/metal/emulate: threads, barriers and threadgroup memory of one
// threadgroup at a time, simdgroup matrices with the semantics of Apple's specification) and run as ops_matmul.c
// dispatches it, for every weight type it takes, at shapes cut at every edge of its tiles and at whole tiles, against
// the exact product of the f16 operands (weights made and dequantized by native/core/quant.c, linked from the native
// build). It checks the kernel's own logic here — tiles, edges, transposes, the decoder of each weight type — where
// no Apple GPU is; whether Apple's compiler and hardware do what the specification says, only the macOS workflow
// (metal_host_test on a Mac) shows.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SIMDGROUP_GEMM, WEIGHT_TYPES } from "../../../kernels/generate.ts";

const root = join(import.meta.dir, "../../..");
const emulate = join(root, "test/fixtures/metal/emulate");
const objs = ["quant", "quant_avx2", "error", "threadpool", "cpu", "safetensors", "json"].map((o) => join(root, "build/obj/native/core", `${o}.o`));
const kernelText = readFileSync(join(root, "kernels/matmul_simdgroup.metal"), "utf8");
// F16C converts f16 on x86 (Linux on x86-64, where the native build's objects are)
const able = process.platform === "linux" && process.arch === "x64" && !!Bun.which("clang++") && readFileSync("/proc/cpuinfo", "utf8").includes(" f16c");

// Function constants become the values given with -D (FC<id>), <metal_stdlib> the emulation's (the driver includes it).
function asCpp(text: string): string {
  return text
    .replace(/^constant\s+(\w+)\s+(\w+)\s*\[\[\s*function_constant\s*\(\s*(\d+)\s*\)\s*\]\];$/gm, "constant $1 $2 = FC$3;")
    .replace("#include <metal_stdlib>", "");
}

// Builds the driver for weight type `wt` over kernel text `text`, runs it at `shapes`; its exit code and output.
function run(dir: string, text: string, wt: number, shapes: number[][]): { code: number; out: string } {
  const kernel = join(dir, `kernel_${wt}.cpp`);
  writeFileSync(kernel, asCpp(text));
  const exe = join(dir, `drv_${wt}`);
  const build = Bun.spawnSync(["clang++", "-std=c++20", "-O1", "-mf16c", "-pthread", "-Wno-unknown-attributes", `-DFC0=${SIMDGROUP_GEMM.threads}`,
    `-DFC1=${wt}`, `-DKERNEL="${kernel}"`, `-I${emulate}`, `-I${join(root, "native")}`, `-I${join(root, "native/include")}`,
    join(emulate, "gemm_driver.cpp"), ...objs, "-lm", "-o", exe]);
  if (build.exitCode !== 0) throw new Error(`building the emulated GEMM (${WEIGHT_TYPES[wt]}):\n${build.stderr.toString()}`);
  const r = Bun.spawnSync([exe, ...shapes.flat().map(String)]);
  return { code: r.exitCode ?? -1, out: r.stdout.toString() + r.stderr.toString() };
}

// rows, cols, x rows: tiles cut in every direction (260 columns end inside a group of 8 and make an odd number of q4 and
// q8 groups), whole tiles, one row and one column group; MLX weights come in groups of 64 columns
const SHAPES: Record<string, number[][]> = {
  plain: [[131, 260, 45], [128, 256, 64], [1, 36, 1], [67, 100, 5]],
  mlx: [[95, 320, 33], [128, 256, 64], [1, 64, 1]],
};

describe.skipIf(!able)("the simdgroup GEMM, emulated on the CPU", () => {
  test("the native build's objects are there", () => {
    for (const o of objs) expect(existsSync(o), o).toBe(true);
  });

  for (const t of ["bf16", "f16", "q8", "q4", "mlx4", "mlx8"] as const)
    test(`${t}: the exact product of its f16 operands at odd shapes and whole tiles`, () => {
      const dir = mkdtempSync(join(tmpdir(), "splash-sgemm-"));
      try {
        const shapes = t.startsWith("mlx") ? SHAPES.mlx! : SHAPES.plain!;
        const r = run(dir, kernelText, WEIGHT_TYPES.indexOf(t), shapes);
        expect(r.out.split("\n").filter((l) => l.startsWith("OK")).length, r.out).toBe(shapes.length);
        expect(r.code, r.out).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }, 120_000);

  test("a wrong kernel fails: weights not transposed, an edge tile's rows bounded by the wrong count", () => {
    const wrong = [
      kernelText.replace("(wb + j * 8u) * SK + kk, SK, ulong2(0, 0), true)", "(wb + j * 8u) * SK + kk, SK, ulong2(0, 0), false)"),
      kernelText.replace("if (j < p.n && r < p.rows) y[", "if (j < p.n && r < p.rows + 1u) y["),
    ];
    const dir = mkdtempSync(join(tmpdir(), "splash-sgemm-"));
    try {
      for (const text of wrong) {
        expect(text).not.toBe(kernelText);
        expect(run(dir, text, WEIGHT_TYPES.indexOf("f16"), [[131, 260, 45]]).code).toBe(1);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
