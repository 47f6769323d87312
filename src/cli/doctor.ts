// `splash doctor`: what this machine is and what Splash can do on it. `--plan MODEL` answers how many sequences of a
// context fit beside the model's weights, drafter and runtime reserve, on this machine or in `--memory`.
import { z } from "zod";
import { native } from "../native/library.ts";
import { type BackendProbe, probeBackend } from "../native/model.ts";
import { type Machine, machine, macRequirements, recordMetal } from "../machine.ts";
import { metalInfo } from "../native/metal.ts";
import { CliError, command, parseOption, sizeOption, UsageError } from "./_command.ts";
import { loadFlags } from "./_load-flags.ts";
import { formatBytes } from "../format.ts";
import { describeDefaultBudget, memoryForModels, memoryRule } from "../engine/memory-plan.ts";
import { describeModelFit, describeSequencePlan, modelFit, planSequences, type PlanOptions } from "../models/fit.ts";
import { DRAFT_CHOICES } from "../models/drafter.ts";
import { KV_CHOICES } from "../models/kv-type.ts";
import { findSpec, hubSpecs } from "../models/registry.ts";
import { FORMATS, isHubSpec, QUANTS } from "../models/spec.ts";

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

// A token count such as 32768, 32K or 1M (binary: 32K = 32768).
const tokensOption = z.string().transform((s, ctx) => {
  const m = /^\s*(\d+)\s*([kKmM]?)\s*$/.exec(s);
  const n = m ? Number(m[1]) * (m[2] === "" ? 1 : /k/i.test(m[2]!) ? 1024 : 1024 * 1024) : 0;
  if (!m || n < 1) {
    ctx.addIssue({ code: "custom", message: "expected a token count such as 32768 or 32K" });
    return z.NEVER;
  }
  return n;
});

const LEVELS = [...QUANTS, ...FORMATS.filter((f) => f !== "bf16")] as const;

type PlanArgs = { plan: string; memory?: string; context: string; kvType?: string; weights?: string; draft?: string };

// `--plan MODEL`: the plan and how it was asked for.
function sequencePlan(m: Machine, args: PlanArgs) {
  const spec = findSpec(args.plan);
  if (!spec || !isHubSpec(spec)) {
    throw new CliError(`--plan ${args.plan}: no supported model by that name has a memory plan`, `use one of ${hubSpecs().map((s) => s.id).join(", ")}`, 2);
  }
  const memory = args.memory === undefined ? memoryForModels(m) : parseOption("doctor", "memory", sizeOption, args.memory);
  const context = parseOption("doctor", "context", tokensOption, args.context);
  const kv = parseOption("doctor", "kv-type", z.enum(KV_CHOICES), args.kvType ?? "auto");
  const level = parseOption("doctor", "weights", z.enum(LEVELS), args.weights ?? spec.quantization.default);
  const choice = parseOption("doctor", "draft", z.enum(DRAFT_CHOICES), args.draft ?? "auto");
  // auto: the spec's default drafter where the weights carry it (MLX checkpoints have no MTP layer), else none
  const fixed = spec.memory!.fixed[level];
  const preferred = spec.draft.default ?? "none";
  const draft: PlanOptions["draft"] = choice !== "auto" ? choice : preferred !== "none" && fixed[preferred] !== null ? preferred : "none";
  const options: PlanOptions = { memory, context, kvType: kv === "auto" ? spec.cache.kv : kv, level, draft };
  return {
    plan: planSequences(spec, options),
    f32: planSequences(spec, { ...options, kvType: "f32" }).sequences,
    memorySource: args.memory === undefined ? `this machine: ${memoryRule(m)}` : "--memory",
  };
}

export default command({
  meta: { name: "doctor", description: "Show what this machine is and which models it can run" },
  args: {
    json: { type: "boolean", description: "Print the report as JSON" },
    plan: { type: "string", description: "A supported model: how many sequences of --context fit beside its weights, drafter and runtime reserve" },
    memory: { type: "string", description: "With --plan: memory for models, e.g. 48G (default: this machine's, as doctor reports it)" },
    context: { type: "string", default: "32K", description: "With --plan: tokens of each sequence (prompt + output), e.g. 32K" },
    kvType: loadFlags.kvType,
    weights: { type: "enum", options: [...LEVELS], description: "With --plan: the weights (default: the model's quantization recipe)" },
    draft: { type: "enum", options: [...DRAFT_CHOICES], default: "auto", description: "With --plan: the drafter (auto: the model's default where the weights carry it)" },
  },
  async run({ args }) {
    const m = machine();
    if (args.plan === undefined) {
      for (const flag of ["memory", "weights"] as const) if (args[flag] !== undefined) throw new UsageError(`--${flag} goes with --plan MODEL`, "doctor");
    } else {
      const { plan, f32, memorySource } = sequencePlan(m, { ...args, plan: args.plan });
      console.log(args.json ? JSON.stringify({ ...plan, sequencesWithF32Kv: f32 }, null, 2) : describeSequencePlan(plan, memorySource, f32).join("\n"));
      return;
    }
    const lib = native();
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
