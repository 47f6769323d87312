// The Vulkan kernels op by op against the CPU backend (native/tests/vulkan_ops_test.c): every op on random inputs of
// the real Qwen3.8-27B / Qwen3.6-35B-A3B shapes and of odd ones, NMSE tolerances per dtype (stated in the C file).
// Runs on lavapipe (CI installs mesa-vulkan-drivers), first at its native subgroup size, then the quick set again
// at subgroup sizes 4 and 16 (LP_NATIVE_VECTOR_WIDTH 128 and 512): the kernels must not depend on it.
// lavapipe compiles each pipeline on first use (seconds each on 2 cores, cached on disk by Mesa afterwards).
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";

const exe = join(import.meta.dir, "../../../../build/tests/vulkan_ops_test");
const linux = process.platform === "linux";

function run(args: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync([exe, ...args], { env: { ...process.env, ...env } });
  const out = r.stdout.toString();
  console.log(out.trim());
  return { code: r.exitCode, out, err: r.stderr.toString() };
}

test.skipIf(!linux)("built with the Vulkan backend", () => {
  expect(existsSync(exe)).toBe(true);
});

test.skipIf(!linux)("every op matches the CPU backend, odd and real shapes", () => {
  const r = run([]);
  expect(r.out).toContain("matmul q4 17408x5120 n=1 (int8 dot)"); // lavapipe has Vulkan 1.3's integer dot products
  expect(r.out).toContain("matmul q4 5120x6144 n=16 (int8 dot)");
  expect(r.out).toContain("gdn by token 16/48 heads, dk 128 dv 128");
  expect(r.out).toContain("gdn chunked 16/48 heads, dk 128 dv 128, 1024 tokens");
  expect(r.out).toMatch(/vulkan_ops_test: \d+ checks, 0 failed/);
  expect(r.code).toBe(0);
}, 600_000);

for (const width of ["128", "512"])
  test.skipIf(!linux)(`the quick set at LP_NATIVE_VECTOR_WIDTH=${width} (subgroup ${Number(width) / 32})`, () => {
    const r = run(["--quick"], { LP_NATIVE_VECTOR_WIDTH: width });
    expect(r.out).toContain(`subgroup size ${Number(width) / 32}`);
    expect(r.out).toMatch(/vulkan_ops_test: \d+ checks, 0 failed/);
    expect(r.code).toBe(0);
  }, 600_000);

// Attention over every decode and verify-block shape attention.comp's split kernel serves (rows, n_past at page, tile
// and chunk edges, head dims, groups, KV types, gate, page sizes), at a subgroup size other than the native one.
test.skipIf(!linux)("every attention decode shape at subgroup size 4 (--attention)", () => {
  const r = run(["--attention"], { LP_NATIVE_VECTOR_WIDTH: "128" });
  expect(r.out).toContain("subgroup size 4");
  expect(r.out).toContain("heads x 256, 5000 past + 16 new, pages of 64, int8 KV");
  expect(r.out).toMatch(/vulkan_ops_test: \d+ checks, 0 failed/);
  expect(r.code).toBe(0);
}, 600_000);

// The float GEMV for Q4/Q8 (what Metal and devices without integer dot products run).
test.skipIf(!linux)("the quick set on the float GEMV (SPLASH_VULKAN_INT_DOT=0)", () => {
  const r = run(["--quick"], { SPLASH_VULKAN_INT_DOT: "0" });
  expect(r.out).toContain("matmul q4 67x168 n=12 vs cpu");
  expect(r.out).not.toContain("(int8 dot)");
  expect(r.out).toMatch(/vulkan_ops_test: \d+ checks, 0 failed/);
  expect(r.code).toBe(0);
}, 600_000);
