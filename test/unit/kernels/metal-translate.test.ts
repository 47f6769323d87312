// The Metal kernels (kernels/msl/, made by scripts/build/msl.ts): that every kernel translates, that the committed
// MSL is what kernels/ translates to now (golden text and hashes), that each kernel's interface (push block, buffer
// index, function constants, threadgroup size and memory) is what the manifest and so the host's table say, and
// that the MSL parses and type-checks as far as a Linux machine can tell.
//
// What is and is not checked here. Checked: SPIRV-Cross reports no error; its MSL agrees with the SPIR-V's own
// reflection (push offsets, specialization ids and defaults, workgroup size); no construct the toolchain notes
// list as broken (shared arrays sized by constants, float atomics, extra bindings); shared memory ≤ 32 KiB; the
// text parses and type-checks under clang's C++ for OpenCL mode with a stand-in <metal_stdlib>
// (test/fixtures/metal/include), which catches syntax, undeclared names, address-space and vector-type errors.
// The hand-written kernels (kernels/*.metal: the GEMM on simdgroup matrices) are held to the same interface rules and
// the same syntax check, and their interface is compared with what the op layer binds.
// Not checked here: Apple's compiler and Metal's own rules (its stdlib overloads, what Apple GPUs accept); that
// runs where `xcrun metal` exists (the macOS workflow), and the kernels' results on a Mac are checked only there.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kernelIdent, SIMDGROUP_GEMM, type Variant, writeTables } from "../../../kernels/generate.ts";
import { compare, cTable, embed, entryName, handWritten, MSL_DIR, readManifest, readMsl, sha256, spirvCrossVersion, staleKernels, THREADGROUP_MEMORY, translateAll } from "../../../scripts/build/msl.ts";

const manifest = readManifest();
const texts = new Map(manifest.kernels.map((k) => [k.name, readFileSync(join(MSL_DIR, `${k.name}.metal`), "utf8")]));
const tools = ["glslangValidator", "spirv-val", "spirv-cross"].every((t) => Bun.which(t));
const include = join(import.meta.dir, "../../fixtures/metal/include");
const root = join(import.meta.dir, "../../..");
// the kernels written in MSL by hand (kernels/*.metal, metalOnly in the generator)
const hand = (() => {
  const dir = mkdtempSync(join(tmpdir(), "splash-mtlhand-"));
  try {
    return handWritten(writeTables(dir).variants);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
})();

describe("translation", () => {
  test.skipIf(!tools)("every kernel translates, and kernels/msl/ is what kernels/ translates to now", async () => {
    const installed = await spirvCrossVersion();
    // the goldens are the output of one SPIRV-Cross version: another one writes other (valid) text
    expect(installed, "kernels/msl/ was made with another spirv-cross: install that one or regenerate").toBe(manifest.spirvCross);
    const t = await translateAll(); // throws, naming each kernel and problem, when one does not translate cleanly
    expect(t.manifest.kernels.map((k) => k.name)).toEqual(manifest.kernels.map((k) => k.name));
    const diffs = compare(t);
    expect(diffs, `kernels/msl/ is stale; run: bun scripts/build/msl.ts\n${diffs.join("\n")}`).toEqual([]);
  }, 120_000);
});

describe("committed kernels", () => {
  test("hashes match the manifest", () => {
    for (const k of manifest.kernels) expect(sha256(texts.get(k.name)!), k.name).toBe(k.sha256);
  });

  test("each kernel's MSL interface is the manifest's: push buffer 0, uint function constants, literal shared arrays", () => {
    for (const k of manifest.kernels) {
      const m = readMsl(texts.get(k.name)!, entryName(k.name));
      expect(m.problems, k.name).toEqual([]);
      expect(m.push, k.name).toEqual(k.push);
      expect(m.push!.index, k.name).toBe(0);
      expect(m.constants.map((c) => [c.id, c.type, c.default]), k.name).toEqual(k.constants.map((c) => [c.id, c.type, c.default]));
      if (m.threadgroupSize) expect(m.threadgroupSize, k.name).toEqual(k.threadgroupSize);
      expect(m.threadgroupMemory, k.name).toBe(k.threadgroupMemory);
      expect(k.threadgroupMemory, k.name).toBeLessThanOrEqual(THREADGROUP_MEMORY);
      // the host dispatches spec[0] threads (ops.c): the size must come from function constant 0, in x only
      expect(k.threadgroupSize, k.name).toEqual([{ constant: 0 }, 1, 1]);
      expect(k.constants.some((c) => c.id === 0), k.name).toBe(true);
      expect(Math.max(...k.constants.map((c) => c.id)), k.name).toBeLessThan(4); // the host passes spec[0..3]
    }
  });

  test("the C table holds every kernel under the shared kernel id (gpu_kernels.h) with its interface", () => {
    const { c, h } = cTable(manifest, texts);
    expect(h).toContain('#include "gpu_kernels.h"');
    expect(h).toContain("extern const sp_mtl_kernel sp_mtl_kernels[SP_GPU_KERNEL_COUNT];");
    for (const k of manifest.kernels) {
      const mask = k.constants.reduce((a, x) => a | (1 << x.id), 0);
      expect(c).toContain(`[${kernelIdent(k.name)}] = {"${k.name}", "${k.entry}", msl_${k.name}, ${k.push.size}, 0, 0x${mask.toString(16)}u, {0, -1, -1}, {0, 1, 1}, ${k.threadgroupMemory}},`);
    }
  });

  test("the ids are the generator's kernels in its order, and a manifest that lists others does not embed", () => {
    const dir = mkdtempSync(join(tmpdir(), "splash-mtlids-"));
    try {
      const { header, variants } = writeTables(dir);
      // every kernel but the cooperative-matrix and integer-dot ones (SPIRV-Cross cannot translate them; Metal never
      // selects them) and the int8 quantizers of x that only the integer-dot GEMV reads
      expect(variants.filter((v) => !v.vulkanOnly && !v.metalOnly).map((v) => v.name)).toEqual(manifest.kernels.map((k) => k.name));
      // hand-written: exactly the kernels whose source is MSL
      for (const v of variants) expect(!!v.metalOnly, v.name).toBe(v.file.endsWith(".metal"));
      const coop = (file: string) => readFileSync(join(root, "kernels", file), "utf8").includes("GL_KHR_cooperative_matrix");
      const intDot = (v: Variant) => v.defines.DOT === 1 || v.defines.QUANT === 1 || v.file === "quantize.comp";
      for (const v of variants) expect(!!v.vulkanOnly, v.name).toBe(coop(v.file) || intDot(v));
      const ids = readFileSync(header, "utf8");
      manifest.kernels.forEach((k) => expect(ids).toContain(`${kernelIdent(k.name)} = ${variants.findIndex((v) => v.name === k.name)},`));
      expect(staleKernels({ ...manifest, kernels: manifest.kernels.slice(1) }, variants)).not.toEqual([]);
      expect(staleKernels(manifest, variants)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the checks catch what they are for", () => {
  const base = texts.get("rmsnorm")!;
  const entry = entryName("rmsnorm");
  test("a spec-sized shared array, a float atomic, a second buffer and oversized shared memory are reported", () => {
    const cases: [string, RegExp][] = [
      [base.replace("threadgroup float wg_red[256];", "threadgroup float wg_red[SPIRV_CROSS_CONSTANT_ID_0];"), /not sized by literals|forbidden/],
      [base.replace("threadgroup float wg_red[256];", "threadgroup float wg_red[256];\n    device atomic_float* f;"), /float atomic/],
      [base.replace("constant P& p [[buffer(0)]]", "constant P& p [[buffer(0)]], device float* q [[buffer(1)]]"), /more than one buffer/],
      [base.replace("threadgroup float wg_red[256];", "threadgroup float wg_red[9000];"), /threadgroup memory/],
      [base.replace("constant P& p [[buffer(0)]]", "constant P& p [[buffer(3)]]"), /./],
    ];
    for (const [text, why] of cases) {
      const m = readMsl(text, entry);
      const found = m.problems.join("\n") || (m.push?.index !== 0 ? "push index moved" : "");
      expect(found).toMatch(why);
    }
  });
});

// The GEMM on simdgroup matrices (kernels/matmul_simdgroup.metal), written by hand: its interface is what the op layer
// binds (ops_matmul.c: the tiled GEMM's push block, function constant 0 = SP_GPU_SIMDGROUP_THREADS, 1 = the weight
// type, the grid in tiles of SP_GPU_SIMDGROUP_BN x rows × SP_GPU_SIMDGROUP_BM weight rows).
describe("the hand-written GEMM", () => {
  const sg = hand.find((h) => h.kernel.name === "gemm_simdgroup");
  const text = sg?.text ?? "";
  test("is the one hand-written kernel, beside its GLSL twin, naming it", () => {
    expect(hand.map((h) => h.kernel.source)).toEqual(["kernels/matmul_simdgroup.metal"]);
    expect(text).toContain("kernels/matmul_coopmat.comp");
  });

  test("push block at buffer 0 is the tiled GEMM's (ops_matmul.c fills one struct for both)", () => {
    const tiled = manifest.kernels.find((k) => k.name.startsWith("gemm_q4_"))!;
    expect(sg!.kernel.push.index).toBe(0);
    expect(sg!.kernel.push.size).toBe(tiled.push.size);
    expect(sg!.kernel.push.fields).toEqual(tiled.push.fields);
  });

  test("function constants: 0 the threads (the generator's count), 1 the weight type; threadgroup memory within 32 KiB", () => {
    expect(sg!.kernel.constants.map((c) => [c.id, c.name, c.default])).toEqual([[0, "threads", SIMDGROUP_GEMM.threads], [1, "wt", 2]]);
    expect(sg!.kernel.threadgroupSize).toEqual([{ constant: 0 }, 1, 1]);
    expect(sg!.kernel.threadgroupMemory).toBeGreaterThan(0);
    expect(sg!.kernel.threadgroupMemory).toBeLessThanOrEqual(THREADGROUP_MEMORY);
  });

  test("its tile defines are the generator's (the op layer's grid and threads)", () => {
    const def = (name: string) => Number(new RegExp(`^#define ${name} (\\d+)$`, "m").exec(text)?.[1]);
    expect({ bm: def("BM"), bn: def("BN"), bk: def("BK"), threads: def("THREADS") }).toEqual(SIMDGROUP_GEMM);
    // 4 SIMD-groups of 32, each 16 x rows × 32 weight rows of the tile
    expect((SIMDGROUP_GEMM.bm / 32) * (SIMDGROUP_GEMM.bn / 16) * 32).toBe(SIMDGROUP_GEMM.threads);
  });

  test("the C table holds it under its kernel id with its interface, and no translation does", () => {
    const { c } = cTable({ ...manifest, kernels: [...manifest.kernels, sg!.kernel] }, new Map([...texts, [sg!.kernel.name, text]]));
    expect(c).toContain(`[${kernelIdent("gemm_simdgroup")}] = {"gemm_simdgroup", "splash_gemm_simdgroup", msl_gemm_simdgroup, 48, 0, 0x3u, {0, -1, -1}, {0, 1, 1}, ${sg!.kernel.threadgroupMemory}},`);
    expect(manifest.kernels.some((k) => k.name === "gemm_simdgroup")).toBe(false);
  });

  test("a hand-written kernel that breaks the host's rules does not embed", () => {
    const cases: [string, RegExp][] = [
      [text.replace("constant P& p [[buffer(0)]]", "constant P& p [[buffer(1)]]"), /./],
      [text.replace("threadgroup float Ys[2048];", "threadgroup float Ys[8192];"), /threadgroup memory/],
    ];
    for (const [t, why] of cases) {
      const m = readMsl(t, "splash_gemm_simdgroup");
      expect(m.problems.join("\n") || (m.push?.index !== 0 ? "push index moved" : "")).toMatch(why);
    }
  });
});

// clang's C++ for OpenCL mode over the MSL with a stand-in <metal_stdlib>: program-scope `constant` variables
// become constexpr (OpenCL needs constant initializers there; function constants get their default).
function forClang(text: string): string {
  return text
    .replace(/^constant\s+(\w+)\s+(\w+)\s*\[\[\s*function_constant\s*\(\s*\d+\s*\)\s*\]\];$/gm, "constexpr constant $1 $2 = 0;")
    .replace(/^constant /gm, "constexpr constant ");
}

const clangOk = (() => {
  if (process.platform !== "linux" || !Bun.which("clang")) return false;
  const r = Bun.spawnSync(["clang", "-x", "cl", "-cl-std=clc++2021", "-fsyntax-only", "-"], { stdin: new TextEncoder().encode("__kernel void k() {}\n") });
  return r.exitCode === 0;
})();

async function clangCheck(files: { name: string; text: string }[]): Promise<Map<string, string>> {
  const dir = mkdtempSync(join(tmpdir(), "splash-msl-"));
  const errors = new Map<string, string>();
  try {
    let next = 0;
    const worker = async () => {
      while (next < files.length) {
        const f = files[next++]!;
        const path = join(dir, `${f.name}.clcpp`);
        writeFileSync(path, forClang(f.text));
        const p = Bun.spawn(["clang", "-x", "cl", "-cl-std=clc++2021", "-cl-single-precision-constant", "-fsyntax-only", "-Werror",
          "-Wno-unknown-attributes", `-I${include}`, path], { stdout: "pipe", stderr: "pipe" });
        const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
        if (code !== 0 || err.trim()) errors.set(f.name, err.trim().split("\n").slice(0, 6).join("\n"));
      }
    };
    await Promise.all(Array.from({ length: 4 }, worker));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return errors;
}

describe("syntax", () => {
  test.skipIf(!clangOk)("every kernel parses and type-checks (clang, C++ for OpenCL, stand-in metal_stdlib)", async () => {
    const errors = await clangCheck([...manifest.kernels.map((k) => ({ name: k.name, text: texts.get(k.name)! })), ...hand.map((h) => ({ name: h.kernel.name, text: h.text }))]);
    expect([...errors].map(([n, e]) => `${n}:\n${e}`)).toEqual([]);
  }, 60_000);

  test.skipIf(!clangOk)("the syntax check fails on a broken kernel", async () => {
    const base = texts.get("rmsnorm")!;
    const broken = [
      { name: "undeclared", text: base.replace("threadgroup_barrier(mem_flags::mem_threadgroup);", "threadgroup_barrer(mem_flags::mem_threadgroup);") },
      { name: "address_space", text: base.replace(/(device Floats\* \w+ = )reinterpret_cast<device Floats\*>/, "$1(threadgroup Floats*)") },
    ];
    // a half matrix loaded from f32 threadgroup memory: the stand-in simdgroup_matrix declarations type-check it
    const gemm = hand.find((h) => h.kernel.name === "gemm_simdgroup")!.text;
    broken.push({ name: "simdgroup_type", text: gemm.replace("simdgroup_load(a[i], Xs +", "simdgroup_load(a[i], Ys +") });
    for (const b of broken) expect(b.text, b.name).not.toBe(b.name === "simdgroup_type" ? gemm : base);
    const errors = await clangCheck(broken);
    expect([...errors.keys()].sort()).toEqual(["address_space", "simdgroup_type", "undeclared"]);
  }, 30_000);

  const metal = process.platform === "darwin" && Bun.spawnSync(["xcrun", "-sdk", "macosx", "-f", "metal"]).exitCode === 0;
  test.skipIf(!metal)("Apple's compiler accepts every kernel (xcrun metal -std=metal3.0)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "splash-metal-"));
    const failed: string[] = [];
    try {
      const files = [...manifest.kernels.map((k) => ({ name: k.name, path: join(MSL_DIR, `${k.name}.metal`) })), ...hand.map((h) => ({ name: h.kernel.name, path: join(root, h.kernel.source) }))];
      for (const k of files) {
        const r = Bun.spawnSync(["xcrun", "-sdk", "macosx", "metal", "-std=metal3.0", "-c", k.path, "-o", join(dir, `${k.name}.air`)]);
        if (r.exitCode !== 0) failed.push(`${k.name}:\n${r.stderr.toString().trim()}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(failed).toEqual([]);
  }, 300_000);
});

// The host side on Linux: the embedded table is the committed MSL byte for byte, and device.m (built only on macOS)
// parses and type-checks against stand-in Foundation/Metal headers (test/fixtures/metal/objc: the Metal calls it
// makes, declared as Apple's headers declare them). Apple's real headers and linker check it in the macOS workflow.
describe("host sources", () => {
  const cc = Bun.which("cc") ? "cc" : null;
  test.skipIf(!cc)("the C table holds every kernel's MSL byte for byte", () => {
    const dir = mkdtempSync(join(tmpdir(), "splash-mtltable-"));
    try {
      const { source } = embed(dir);
      writeFileSync(join(dir, "dump.c"), `#include <stdio.h>
#include "metal_kernels.h"
int main(void) {
    for (int i = 0; i < SP_GPU_KERNEL_COUNT; i++) /* Vulkan-only kernels have no entry */
        if (sp_mtl_kernels[i].name) printf("%s%c%s%c", sp_mtl_kernels[i].name, 0, sp_mtl_kernels[i].source, 0);
    return 0;
}
`);
      const exe = join(dir, "dump");
      const build = Bun.spawnSync([cc!, "-std=c11", "-Wall", "-Wextra", "-Werror", `-I${dir}`, "-o", exe, source, join(dir, "dump.c")]);
      expect(build.stderr.toString()).toBe("");
      const parts = Bun.spawnSync([exe]).stdout.toString().split("\0");
      const got = new Map<string, string>();
      for (let i = 0; i + 1 < parts.length; i += 2) got.set(parts[i]!, parts[i + 1]!);
      expect([...got.keys()]).toEqual([...manifest.kernels, ...hand.map((h) => h.kernel)].map((k) => k.name));
      for (const k of manifest.kernels) expect(got.get(k.name) === texts.get(k.name), k.name).toBe(true);
      for (const h of hand) expect(got.get(h.kernel.name) === h.text, h.kernel.name).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  const objc = (() => {
    if (process.platform !== "linux" || !Bun.which("clang")) return false;
    const r = Bun.spawnSync(["clang", "-x", "objective-c", "-fobjc-arc", "-fobjc-runtime=macosx-15.0", "-fsyntax-only", "-"], {
      stdin: new TextEncoder().encode("void f(void) { @autoreleasepool {} }\n"),
    });
    return r.exitCode === 0;
  })();
  test.skipIf(!objc)("device.m parses and type-checks against stand-in Foundation and Metal headers", () => {
    const dir = mkdtempSync(join(tmpdir(), "splash-mtlobjc-"));
    try {
      embed(dir);
      const r = Bun.spawnSync(["clang", "-x", "objective-c", "-fobjc-arc", "-fobjc-runtime=macosx-15.0", "-fblocks", "-fsyntax-only",
        "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-D_GNU_SOURCE", `-I${join(import.meta.dir, "../../fixtures/metal/objc")}`,
        `-I${join(root, "native/include")}`, `-I${join(root, "native")}`, `-I${dir}`, join(root, "native/backends/metal/device.m")]);
      expect(r.stderr.toString()).toBe("");
      expect(r.exitCode).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
