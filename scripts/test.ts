// The whole test suite, as the README's test command and CI run it:
//   installs the system packages the tests need, builds libsplash (release, the sanitizer build the native tests use,
//   and the CPU-only build), runs `bun test` with a JUnit report, and ends with one line `N passed, N failed, N skipped`
//   (CI reads it; bun's own summary is not machine-readable). Exits non-zero if anything failed.
//   Extra arguments go to `bun test` (e.g. a path filter).
import { $ } from "bun";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ensureAptPackages } from "./setup/apt.ts";

const root = join(import.meta.dir, "..");
// System packages the tests need (GPU backends add theirs here).
const APT_PACKAGES: string[] = [
  // Vulkan backend: glslang compiles the kernels at build time; lavapipe (mesa-vulkan-drivers) is the test device
  "glslang-tools",
  "spirv-tools",
  "libvulkan-dev",
  "mesa-vulkan-drivers",
  // Metal backend: the kernels' MSL translation is checked against a fresh one (test/unit/kernels/metal-translate.test.ts)
  "spirv-cross",
  // … and parses under clang (C++ for OpenCL with a stand-in metal_stdlib), as does the Objective-C device layer; the
  // hand-written GEMM on simdgroup matrices also runs, as C++ against an emulated one (metal-gemm-emulated.test.ts)
  "clang",
  // NEON kernels: cross-compiled for arm64 and run under user-mode emulation (test/unit/native/core/neon.test.ts);
  // the arm64 C library headers are only a recommendation of the cross compiler, which --no-install-recommends skips
  "gcc-aarch64-linux-gnu",
  "libc6-dev-arm64-cross",
  "qemu-user",
  // The built-in page runs in headless Chromium, driven by playwright-core (test/integration/web-page.test.ts)
  "chromium",
];

// Setup failures (packages, the native builds) still end with the closing line CI reads.
try {
  await ensureAptPackages(APT_PACKAGES);
  await $`bun ${join(root, "scripts/build/native.ts")}`;
  await $`bun ${join(root, "scripts/build/native.ts")} --debug`;
  // What a machine without the Vulkan headers builds (test/integration/cpu-only-build.test.ts serves with it).
  await $`bun ${join(root, "scripts/build/native.ts")} --cpu-only`;
} catch (e) {
  console.error(e instanceof Error ? e.message : String(e));
  console.log("0 passed, 1 failed");
  process.exit(1);
}

const report = join(root, "build", "test-results.xml");
rmSync(report, { force: true });
// The run's temporary files go under one folder of the build, emptied before and removed after: nothing piles up in
// the machine's /tmp from run to run, and a small /tmp (a tmpfs) does not fail the suite.
const tmp = join(root, "build", "test-tmp");
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
// A test that sets no timeout of its own gets 120 s, not bun's 5: integration tests load models and start servers,
// which a loaded 2-core machine can take longer than 5 s to do (bunfig.toml has no key for it).
const run = await $`bun test --timeout 120000 --reporter=junit --reporter-outfile=${report} ${process.argv.slice(2)}`
  .cwd(root)
  .env({ ...process.env, TMPDIR: tmp })
  .nothrow();
rmSync(tmp, { recursive: true, force: true });

// Counts from the JUnit report: a <testcase> with a <failure>/<error> failed, with <skipped> was skipped.
let passed = 0;
let failed = 0;
let skipped = 0;
if (existsSync(report)) {
  const xml = readFileSync(report, "utf8");
  for (const m of xml.matchAll(/<testcase\b[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[2] ?? "";
    if (/<(failure|error)\b/.test(body)) failed++;
    else if (/<skipped\b/.test(body)) skipped++;
    else passed++;
  }
}
// A crash outside any test (a file that fails to load) shows only in the exit code: count it as a failure.
if (run.exitCode !== 0 && failed === 0) failed = 1;
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 ? 1 : 0);
