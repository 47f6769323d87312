// `splash doctor`: what this machine is and what Splash can do on it.
import { native } from "../native/library.ts";
import { type BackendProbe, probeBackend } from "../native/model.ts";
import { type Machine, machine, macRequirements, recordMetal } from "../machine.ts";
import { metalInfo } from "../native/metal.ts";
import { command } from "./_command.ts";
import { formatBytes } from "../format.ts";
import { describeDefaultBudget, memoryForModels } from "../engine/memory-plan.ts";
import { describeModelFit, modelFit } from "../models/fit.ts";

type Library = { version: string; abi: number; cpuFeatures: string; backend: BackendProbe };

// The report from the machine's facts and the library's: a function of them only, so tests can inject a Mac.
export function doctorReport(m: Machine, lib: Library) {
  return {
    os: m.os,
    arch: m.arch,
    cpu: m.cpuModel,
    cores: m.cores,
    cpuFeatures: lib.cpuFeatures,
    totalMemory: m.totalMemory,
    availableMemory: m.availableMemory,
    memoryForModels: memoryForModels(m),
    models: modelFit(m),
    library: { version: lib.version, abi: lib.abi },
    backend: lib.backend,
    mac: m.mac ? { ...m.mac, requirements: macRequirements(m) } : undefined,
    metal: m.metal,
  };
}

// Which backend `serve` and `run` would take, and why not a GPU when they would not.
function describeBackend(b: BackendProbe): string {
  const asked = process.env.SPLASH_BACKEND ? `SPLASH_BACKEND=${b.asked}` : `--backend ${b.asked}`;
  if (!b.runsOn) return `none: ${b.why} (${asked})`;
  if (b.runsOn !== "cpu") return `${b.runsOn} (${asked})`;
  return b.why ? `cpu, no GPU: ${b.why} (${asked})` : `cpu (${asked})`;
}

export function doctorLines(m: Machine, report: ReturnType<typeof doctorReport>): string[] {
  const lines = [
    `system     ${m.os} ${m.arch}`,
    `cpu        ${m.cpuModel}, ${m.cores} cores (${report.cpuFeatures || "no SIMD extensions detected"})`,
    `memory     ${formatBytes(m.totalMemory)} total, ${formatBytes(m.availableMemory)} available`,
    `kv budget  ${describeDefaultBudget(m)}; --kv-budget caps it`,
    `library    libsplash ${report.library.version} (ABI ${report.library.abi})`,
  ];
  for (const r of report.mac?.requirements ?? []) lines.push(`${r.what.padEnd(10)} ${r.ok ? "ok  " : "FAIL"} ${r.detail}`);
  lines.push(`backend    ${describeBackend(report.backend)}`);
  lines.push(...describeModelFit(report.models));
  return lines;
}

export default command({
  meta: { name: "doctor", description: "Show what this machine is and which models it can run" },
  args: { json: { type: "boolean", description: "Print the report as JSON" } },
  async run({ args }) {
    const lib = native();
    const m = machine();
    if (m.os === "darwin") recordMetal(metalInfo(lib)); // GPU family and working set, through the Metal backend
    const report = doctorReport(m, {
      version: String(lib.splash_version()),
      abi: lib.splash_abi_version(),
      cpuFeatures: String(lib.splash_cpu_features()),
      backend: probeBackend(undefined, lib),
    });
    console.log(args.json ? JSON.stringify(report, null, 2) : doctorLines(m, report).join("\n"));
  },
});
