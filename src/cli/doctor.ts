// `splash doctor`: what this machine is and what Splash can do on it.
import { native } from "../native/library.ts";
import { machine, macRequirements } from "../machine.ts";
import { command } from "./_command.ts";
import { formatBytes } from "../format.ts";
import { describeDefaultBudget, memoryForModels } from "../engine/memory-plan.ts";
import { describeModelFit, modelFit } from "../models/fit.ts";

export default command({
  meta: { name: "doctor", description: "Show what this machine is and which models it can run" },
  args: { json: { type: "boolean", description: "Print the report as JSON" } },
  async run({ args }) {
    const m = machine();
    const lib = await native();
    const report = {
      os: m.os,
      arch: m.arch,
      cpu: m.cpuModel,
      cores: m.cores,
      cpuFeatures: String(lib.splash_cpu_features()),
      totalMemory: m.totalMemory,
      availableMemory: m.availableMemory,
      memoryForModels: memoryForModels(m),
      models: modelFit(m),
      library: { version: String(lib.splash_version()), abi: lib.splash_abi_version() },
      mac: m.mac ? { ...m.mac, requirements: macRequirements(m) } : undefined,
    };
    if (args.json) {
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    const lines = [
      `system     ${m.os} ${m.arch}`,
      `cpu        ${m.cpuModel}, ${m.cores} cores (${report.cpuFeatures || "no SIMD extensions detected"})`,
      `memory     ${formatBytes(m.totalMemory)} total, ${formatBytes(m.availableMemory)} available`,
      `kv budget  ${describeDefaultBudget(m)}; --kv-budget caps it`,
      `library    libsplash ${report.library.version} (ABI ${report.library.abi})`,
    ];
    for (const r of report.mac?.requirements ?? []) lines.push(`${r.what.padEnd(10)} ${r.ok ? "ok  " : "FAIL"} ${r.detail}`);
    lines.push(...describeModelFit(report.models));
    console.log(lines.join("\n"));
  },
});
