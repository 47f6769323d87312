// The Metal backend's host code op by op against the CPU backend (native/tests/metal_host_test.c): memory behind
// fake addresses, padded and unpadded weight rows, pipelines by function constants, every op's push constants and
// dispatch shape, indirect MoE dispatches, barriers only where memory is shared, device and host sampling; on a Mac the
// GEMMs of every weight type but f32 run on simdgroup matrices (kernels/matmul_simdgroup.metal: no SPIR-V, so over
// Vulkan the tiled GEMM takes the same shapes).
//
// On Linux the portable host runs over the Vulkan device (lavapipe), which runs the SPIR-V the MSL was translated
// from, and each dispatch is checked against what Metal needs (threads per threadgroup = function constant 0, push
// constants at buffer 0, the kernel tables in the same order), at lavapipe's native subgroup size and at 32 (Apple's
// SIMD width); the sanitizer build is used when it exists. On macOS
// the same checks run on the Mac's GPU through device.m, when the machine has one that can run the kernels (Metal 3,
// Apple family 7+); SPLASH_BACKEND=metal makes a missing GPU a failure instead of a skip (the macOS workflow).
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";

const build = join(import.meta.dir, "../../../../build");
const linux = process.platform === "linux";
const mac = process.platform === "darwin";
const debug = join(build, "debug/tests/metal_host_test");
const exe = linux && existsSync(debug) ? debug : join(build, "tests/metal_host_test");
const env = { ...process.env, ASAN_OPTIONS: "detect_leaks=0" }; // lavapipe keeps allocations until exit

function run(args: string[], extra: Record<string, string> = {}) {
  const r = Bun.spawnSync([exe, ...args], { env: { ...env, ...extra } });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

const required = linux || process.env.SPLASH_BACKEND === "metal";
const probe = mac && existsSync(exe) ? run(["--probe"]) : null;
const available = linux || probe?.code === 0;
if (mac && !available) console.log(`metal host test skipped: ${probe?.out.trim() || "build/tests/metal_host_test was not built"}`);

test.skipIf(!linux && !mac)("built with the Metal host", () => {
  expect(existsSync(exe)).toBe(true);
});

test.skipIf(!available && !required)("every op matches the CPU backend", () => {
  const r = run([]);
  console.log(r.out.trim());
  expect(r.err).not.toContain("ERROR: AddressSanitizer");
  expect(r.out).toContain("moe_experts q8 8 experts top 3, H 128 I 64, 9 tokens");
  // the GEMMs at odd shapes: on a Mac on simdgroup matrices (kernels/matmul_simdgroup.metal), over Vulkan the tiled one
  const gemm = r.out.split("\n").filter((l) => /matmul q4 131x260 n=45/.test(l));
  expect(gemm.length).toBe(1);
  expect(gemm[0]!.includes("(simdgroup matrices)")).toBe(mac);
  expect(r.out).toMatch(/metal_host_test: \d+ checks, 0 failed/);
  expect(r.code).toBe(0);
}, 300_000);

// Apple GPUs run SIMD-groups of 32: lavapipe at 1024-bit vectors has subgroups of 32 too.
test.skipIf(!linux)("every op matches at the Apple GPUs' SIMD width (lavapipe subgroups of 32)", () => {
  const r = run([], { LP_NATIVE_VECTOR_WIDTH: "1024" });
  expect(r.out).toMatch(/metal_host_test: \d+ checks, 0 failed/);
  expect(r.code).toBe(0);
}, 300_000);
