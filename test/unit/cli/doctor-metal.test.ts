// `splash doctor` and the memory plan on a Mac, from injected machine facts (this runs on Linux): chip generation,
// Metal GPU family, macOS version and unified memory against the published minimum (M3+, macOS 26.4+, 36 GB; 48 GB
// recommended), and the GPU's working set and wired limit as the bound of memory for models. Linux output unchanged.
import { describe, expect, test } from "bun:test";
import { doctorLines, doctorReport } from "../../../src/cli/doctor.ts";
import { describeDefaultBudget, memoryForModels } from "../../../src/engine/memory-plan.ts";
import { type Machine, macRequirements } from "../../../src/machine.ts";
import type { MetalInfo } from "../../../src/native/metal.ts";

const GB = 1e9;
const lib = { version: "0.1.0", abi: 7, cpuFeatures: "neon dotprod fp16", backend: { asked: "auto" as const, runsOn: "metal: Apple M3 Pro", why: "" } };

function mac(chip: string, macos: string, memory: number, metal?: Partial<MetalInfo> | null): Machine {
  const gen = /Apple M(\d+)/.exec(chip);
  const m: Machine = {
    os: "darwin",
    arch: "arm64",
    cpuModel: chip,
    cores: 12,
    totalMemory: memory,
    availableMemory: memory / 2,
    mac: { chip, generation: gen ? Number(gen[1]) : null, macosVersion: macos },
  };
  if (metal !== null)
    m.metal = { appleFamily: 9, metal3: true, usable: true, recommendedWorkingSet: 0.75 * memory, maxBuffer: memory / 2, wiredLimit: 0, ...metal };
  return m;
}

const byWhat = (m: Machine) => Object.fromEntries(macRequirements(m).map((r) => [r.what, r]));

describe("requirements", () => {
  test("an M3 Pro with 36 GB on macOS 26.4 meets every one", () => {
    const r = byWhat(mac("Apple M3 Pro", "26.4", 36 * 2 ** 30));
    expect(Object.keys(r)).toEqual(["chip", "macOS", "unified memory", "GPU"]);
    for (const x of Object.values(r)) expect(x.ok, x.what).toBe(true);
    expect(r.GPU!.detail).toContain("Apple9");
    expect(r["unified memory"]!.detail).not.toContain("met");
  });

  test("an M5 Max with 128 GB on macOS 27: newer family, recommended memory met", () => {
    const r = byWhat(mac("Apple M5 Max", "27.0.1", 128 * 2 ** 30, { appleFamily: 10 }));
    for (const x of Object.values(r)) expect(x.ok, x.what).toBe(true);
    expect(r.GPU!.detail).toContain("Apple10");
    expect(r["unified memory"]!.detail).toContain("48 GB recommended, met");
  });

  test("an M2 on macOS 26.3 with 24 GB fails chip, macOS, memory and GPU family", () => {
    const r = byWhat(mac("Apple M2", "26.3", 24 * 2 ** 30, { appleFamily: 8 }));
    expect([r.chip!.ok, r.macOS!.ok, r["unified memory"]!.ok, r.GPU!.ok]).toEqual([false, false, false, false]);
    expect(r.GPU!.detail).toContain("Apple8");
    expect(r.GPU!.detail).toContain("needs Apple9");
  });

  test("a virtual machine's paravirtual GPU (no Metal 3) cannot run the kernels", () => {
    const r = byWhat(mac("Apple M1 (Virtual)", "26.4", 64 * 2 ** 30, { appleFamily: 5, metal3: false, usable: false }));
    expect(r.GPU!.ok).toBe(false);
    expect(r.GPU!.detail).toContain("cannot run the Metal kernels");
  });

  test("no Metal report (no GPU, or a library without the Metal backend) is a failure that says so", () => {
    const r = byWhat(mac("Apple M4", "26.4", 48 * 2 ** 30, null));
    expect(r.GPU!.ok).toBe(false);
    expect(r.GPU!.detail).toContain("no Metal backend");
  });
});

describe("memory for models", () => {
  test("Metal's recommended working set bounds it, and a lower wired limit bounds that", () => {
    const m = mac("Apple M3 Max", "26.4", 48 * 2 ** 30, { recommendedWorkingSet: 38 * GB });
    expect(memoryForModels(m)).toBe(38 * GB);
    expect(describeDefaultBudget(m)).toContain("recommended working set");
    const wired = mac("Apple M3 Max", "26.4", 48 * 2 ** 30, { recommendedWorkingSet: 38 * GB, wiredLimit: 30 * 2 ** 30 });
    expect(memoryForModels(wired)).toBe(30 * 2 ** 30);
    expect(describeDefaultBudget(wired)).toContain("wired limit");
  });

  test("before the library reports the GPU: three quarters of unified memory", () => {
    const m = mac("Apple M3 Max", "26.4", 48 * 2 ** 30, null);
    expect(memoryForModels(m)).toBe(Math.floor(0.75 * 48 * 2 ** 30));
    expect(describeDefaultBudget(m)).toContain("75% of");
  });
});

describe("doctor output", () => {
  test("a Mac gets its four requirement lines after the library line, then the backend", () => {
    const m = mac("Apple M3 Pro", "26.4", 36 * 2 ** 30);
    const lines = doctorLines(m, doctorReport(m, lib));
    const i = lines.findIndex((l) => l.startsWith("library"));
    expect(lines.slice(i + 1, i + 5).map((l) => l.slice(0, 16))).toEqual(["chip       ok   ", "macOS      ok   ", "unified memory o", "GPU        ok   "]);
    expect(lines.join("\n")).toContain("Metal GPU family Apple9, Metal 3 yes");
    expect(lines[i + 5]).toMatch(/^backend {4}metal: Apple M3 Pro \((--backend|SPLASH_BACKEND=)/);
  });

  test("Linux prints no Mac lines", () => {
    const m: Machine = { os: "linux", arch: "x64", cpuModel: "AMD EPYC", cores: 2, totalMemory: 24 * GB, availableMemory: 18 * GB };
    const report = doctorReport(m, { ...lib, cpuFeatures: "avx2 fma f16c", backend: { asked: "auto", runsOn: "cpu", why: "vulkan: no Vulkan loader (libvulkan.so.1) on this machine" } });
    const lines = doctorLines(m, report);
    expect(report.mac).toBeUndefined();
    expect(report.metal).toBeUndefined();
    expect(lines.slice(0, 6).map((l) => l.split(" ")[0])).toEqual(["system", "cpu", "memory", "kv", "library", "backend"]);
    expect(lines[5]).toContain("cpu, no GPU: vulkan: no Vulkan loader (libvulkan.so.1) on this machine");
    expect(lines[6]).toStartWith("models");
  });
});
