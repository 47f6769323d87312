// What this machine is: OS, CPU, memory and (on macOS) the Apple chip, read once per process. The memory planner
// derives the default KV budget from it and `splash doctor` reports it.
import { existsSync, readFileSync } from "node:fs";
import { cpus, totalmem, freemem } from "node:os";
import type { MetalInfo } from "./native/metal.ts";

export type Machine = {
  os: "linux" | "darwin" | string;
  arch: string;
  cpuModel: string;
  cores: number;
  totalMemory: number; // bytes the OS reports, capped by a cgroup limit when one is set
  availableMemory: number; // bytes that can be allocated now without swapping
  mac?: { chip: string; generation: number | null; macosVersion: string };
  metal?: MetalInfo; // the Mac's GPU as the native library's Metal backend reports it, once the library is loaded
};

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

// Linux: MemAvailable (what the kernel says can be allocated without swapping), and a cgroup v2/v1 limit if lower.
function linuxMemory(): { total: number; available: number } {
  const info = readText("/proc/meminfo") ?? "";
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(info)?.[1] ?? NaN) * 1024;
  let total = kb("MemTotal");
  let available = kb("MemAvailable");
  if (!Number.isFinite(total)) total = totalmem();
  if (!Number.isFinite(available)) available = freemem();
  for (const p of ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]) {
    const limit = Number(readText(p)?.trim());
    if (Number.isFinite(limit) && limit > 0 && limit < total) {
      const usage = Number(readText(p.replace(/memory\.max$|memory\.limit_in_bytes$/, (m) => (m === "memory.max" ? "memory.current" : "memory.usage_in_bytes")))?.trim());
      total = limit;
      if (Number.isFinite(usage)) available = Math.min(available, limit - usage);
    }
  }
  return { total, available };
}

function sysctl(name: string): string {
  const r = Bun.spawnSync(["sysctl", "-n", name]);
  return r.success ? r.stdout.toString().trim() : "";
}

function macInfo(): NonNullable<Machine["mac"]> {
  const chip = sysctl("machdep.cpu.brand_string") || "unknown";
  const gen = /Apple M(\d+)/.exec(chip);
  const sw = Bun.spawnSync(["sw_vers", "-productVersion"]);
  return { chip, generation: gen ? Number(gen[1]) : null, macosVersion: sw.success ? sw.stdout.toString().trim() : "unknown" };
}

let cached: Machine | undefined;

export function machine(): Machine {
  if (cached) return cached;
  const os = process.platform;
  const cpuList = cpus();
  if (os === "darwin") {
    const mac = macInfo();
    const total = Number(sysctl("hw.memsize")) || totalmem();
    cached = { os, arch: process.arch, cpuModel: mac.chip, cores: cpuList.length, totalMemory: total, availableMemory: freemem(), mac };
  } else {
    const mem = existsSync("/proc/meminfo") ? linuxMemory() : { total: totalmem(), available: freemem() };
    cached = { os, arch: process.arch, cpuModel: cpuList[0]?.model ?? "unknown", cores: cpuList.length, totalMemory: mem.total, availableMemory: mem.available };
  }
  return cached;
}

// The GPU facts only the native library can read (splash_metal_query); whoever has it loaded records them here, so
// the memory plan and `splash doctor` see them. A library without the Metal backend reports nothing.
export function recordMetal(info: MetalInfo | null): void {
  if (info) machine().metal = info;
}

// The published minimum for the Mac build (PRODUCT.md): M3 or newer, macOS 26.4+, 36 GB (48 GB recommended). The
// M3 and M4 GPUs are Metal's Apple family 9 (MTLGPUFamilyApple9).
export const MAC_MINIMUM = { generation: 3, appleFamily: 9, macos: [26, 4] as const, memory: 36e9, recommendedMemory: 48e9 };

export type Requirement = { what: string; ok: boolean; detail: string };

export function macRequirements(m: Machine): Requirement[] {
  if (!m.mac) return [];
  const [major = 0, minor = 0] = m.mac.macosVersion.split(".").map(Number);
  const osOk = major > MAC_MINIMUM.macos[0] || (major === MAC_MINIMUM.macos[0] && minor >= MAC_MINIMUM.macos[1]);
  const gb = (b: number) => `${(b / 1e9).toFixed(0)} GB`;
  return [
    { what: "chip", ok: (m.mac.generation ?? 0) >= MAC_MINIMUM.generation, detail: `${m.mac.chip} (needs M3 or newer)` },
    { what: "macOS", ok: osOk, detail: `${m.mac.macosVersion} (needs 26.4 or newer)` },
    {
      what: "unified memory",
      ok: m.totalMemory >= MAC_MINIMUM.memory,
      detail: `${gb(m.totalMemory)} (needs 36 GB; 48 GB recommended${m.totalMemory >= MAC_MINIMUM.recommendedMemory ? ", met" : ""})`,
    },
    gpuRequirement(m.metal),
  ];
}

// The GPU through Metal: its Apple family (M3/M4 = 9) and whether the Metal backend can run on it (Metal 3).
function gpuRequirement(g: MetalInfo | undefined): Requirement {
  if (!g) return { what: "GPU", ok: false, detail: "Metal reports no GPU, or this build of libsplash has no Metal backend" };
  const family = g.appleFamily ? `Apple${g.appleFamily}` : "no Apple family";
  const ok = g.usable && g.appleFamily >= MAC_MINIMUM.appleFamily;
  const why = g.usable ? "" : ", cannot run the Metal kernels (they need Metal 3 and Apple7 or newer)";
  return { what: "GPU", ok, detail: `Metal GPU family ${family}, Metal 3 ${g.metal3 ? "yes" : "no"}${why} (needs Apple${MAC_MINIMUM.appleFamily}: M3 or newer)` };
}
