// The NEON matmul kernels (native/backends/cpu/matmul_neon.c) on an emulated arm64: cross-compiles native/core, the
// CPU matmul and its C test with aarch64-linux-gnu-gcc, then runs it under qemu-aarch64 (a CPU with dotprod: the
// NEON kernels are checked; a Cortex-A72 without it: the scalar fallback is chosen). Skipped when the cross
// compiler or qemu is not installed (apt: gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user).
import { expect, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { failures, root, run, summary } from "../programs.ts";

const cc = Bun.which("aarch64-linux-gnu-gcc");
const qemu = Bun.which("qemu-aarch64");
const out = join(root, "build", "arm64");

async function crossBuild(): Promise<string> {
  mkdirSync(out, { recursive: true });
  const flags = ["-std=c11", "-O2", "-pthread", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-DSPLASH_BUILD",
    "-D_GNU_SOURCE", '-DSPLASH_VERSION_STRING="arm64-test"', `-I${join(root, "native/include")}`, `-I${join(root, "native")}`];
  // x86 kernels (*_avx2.c, *_avxvnni.c, *_avx512.c) are not built for arm64, as scripts/build/native.ts leaves them out.
  const core = [...new Bun.Glob("native/core/*.c").scanSync({ cwd: root })].filter((f) => !/_avx(2|vnni|512)\.c$/.test(f));
  const sources = [...core, "native/backends/cpu/matmul.c",
    "native/backends/cpu/matmul_neon.c", "native/tests/matmul_test.c"];
  const objects = await Promise.all(sources.map(async (src) => {
    const obj = join(out, src.replaceAll("/", "_").replace(/\.c$/, ".o"));
    const isa = src.endsWith("_neon.c") ? ["-march=armv8.2-a+dotprod+fp16"] : [];
    const r = await run([cc!, ...flags, ...isa, "-c", join(root, src), "-o", obj]);
    if (r.code !== 0) throw new Error(`aarch64 compile of ${src} failed:\n${r.stderr}`);
    return obj;
  }));
  const exe = join(out, "matmul_test");
  const r = await run([cc!, "-static", "-o", exe, ...objects, "-lm", "-pthread"]);
  if (r.code !== 0) throw new Error(`aarch64 link failed:\n${r.stderr}`);
  return exe;
}

test.skipIf(!cc || !qemu)("NEON kernels under qemu-aarch64, and the scalar fallback without dotprod", async () => {
  const exe = await crossBuild();
  const neon = await run([qemu!, "-cpu", "max", exe, "--only", "neon"]);
  expect(failures(neon.stdout)).toEqual([]);
  expect(neon.code).toBe(0);
  expect(neon.stdout).toContain("best ISA neon");
  expect(neon.stdout).toMatch(/OK +neon: x quantizer bit-identical/);
  for (const type of ["f32", "bf16", "f16", "q8", "q4", "mlx4", "mlx8"]) {
    expect(neon.stdout).toMatch(new RegExp(`OK +neon ${type} +vs float64 reference`));
    expect(neon.stdout).toMatch(new RegExp(`OK +neon ${type} +exact on small integers`));
    expect(neon.stdout).toMatch(new RegExp(`OK +neon ${type} +bit-identical alone vs batched`));
  }
  expect(summary("matmul_test", neon.stdout)?.failed).toBe(0);

  const a72 = await run([qemu!, "-cpu", "cortex-a72", exe, "--only", "neon"]);
  expect(a72.code).toBe(0);
  expect(a72.stdout).toContain("best ISA scalar");
  expect(a72.stdout).toMatch(/OK +neon: not available here, and refused/);
}, 120_000);
