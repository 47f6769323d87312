// CPU matmul and quantized formats (native/core/quant.c, native/backends/cpu/matmul*.c): the C test in the
// sanitizer build checks conversions, quantizers, and every type on every ISA this machine runs (against a float64
// reference, exactly on small integers, bit-identical across batch sizes, thread counts and row views); the lab
// harness's check mode compares each fast kernel with the scalar one at odd shapes in the release build.
import { beforeAll, expect, test } from "bun:test";
import { buildNative, failures, runProgram, summary } from "../programs.ts";

beforeAll(async () => {
  await buildNative(true);
  await buildNative(false);
}, 60_000);

test("matmul_test: formats and kernels on every available ISA", async () => {
  const r = await runProgram(true, "tests", "matmul_test");
  expect(failures(r.stdout)).toEqual([]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(summary("matmul_test", r.stdout)?.checks).toBeGreaterThanOrEqual(31);
  const best = /best ISA (\w+)/.exec(r.stdout)?.[1];
  expect(best).toBeDefined();
  for (const type of ["f32", "bf16", "f16", "q8", "q4"]) {
    // Each type is checked on the scalar reference and on the best ISA, exactly and batch-invariantly.
    for (const isa of new Set(["scalar", best!])) {
      expect(r.stdout).toMatch(new RegExp(`OK +${isa} ${type} +exact on small integers`));
      expect(r.stdout).toMatch(new RegExp(`OK +${isa} ${type} +bit-identical alone vs batched`));
    }
  }
  console.log(r.stdout.split("\n").filter((l) => l.includes("output error")).join("\n"));
}, 60_000);

test("matmul_lab --check-only --quick: every fast kernel agrees with the scalar one", async () => {
  const r = await runProgram(false, "tools", "matmul_lab", ["--check-only", "--quick"]);
  expect(r.stdout).toContain("checks: all within 1e-4");
  expect(r.stdout).not.toContain("FAIL");
  expect(r.code).toBe(0);
}, 60_000);
