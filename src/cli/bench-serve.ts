// `splash bench serve`: what the engine loop and its caches buy an agent workload, on the native engine:
//   agent      time to first token of a growing agent conversation (a long system prompt + tools, then turns that
//              add tool results), resumed from the prefix cache (hit) vs computed from scratch (miss);
//   stall      how much a long new prompt slows running streams (prefill chunked under the step budget);
//   streams    total decode throughput of 4 concurrent streams ÷ 1 stream;
//   admission  16 concurrent long requests under a KV budget where reserving the full context for each would run
//              only 9 at once: all complete; peak memory in use against the budget.
// Ends with one JSON line. MODEL is a directory, a model id under models/, or random:small / random:medium (a
// random-weight checkpoint of the family, written once into the cache directory).
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { nativeStepModel } from "../engine/native-runner.ts";
import { agentTurns, decodeStall, decodeStreams, tightBudget } from "../engine/serve-bench.ts";
import { writeRandomCheckpoint } from "../bench/random-checkpoint.ts";
import { RANDOM_SIZES, randomModelConfig } from "../bench/random-model.ts";
import { formatBytes } from "../format.ts";
import { log } from "../log.ts";
import { machine } from "../machine.ts";
import { Model, NATIVE_QUANT } from "../native/model.ts";
import { modelRecipe } from "../models/packed.ts";
import type { Quant } from "../models/spec.ts";
import { cacheDir } from "../paths.ts";
import { applyKvType } from "../models/kv-type.ts";
import { findSpec } from "../models/registry.ts";
import { CliError, command, intOption, parseOption } from "./_command.ts";
import { loadFlags, parseLoadFlags, parseQuant, quantFlag, type LoadFlags } from "./_load-flags.ts";

const modelsDir = join(import.meta.dir, "..", "..", "models");

// The checkpoint directory MODEL names; random ones are written on first use.
function resolveModel(spec: string): string {
  const random = /^random:(\w+)$/.exec(spec);
  if (random) {
    const size = RANDOM_SIZES[random[1]!];
    if (!size) throw new CliError(`no random model size ${random[1]}`, `use one of ${Object.keys(RANDOM_SIZES).map((s) => `random:${s}`).join(", ")}`);
    const dir = join(cacheDir(), "bench", `serve-random-${random[1]}`);
    writeRandomCheckpoint(dir, randomModelConfig(size), { seed: 1, producer: "splash bench serve (random weights)" });
    return dir;
  }
  for (const dir of [resolve(spec), join(modelsDir, spec)]) if (existsSync(join(dir, "config.json")) && statSync(dir).isDirectory()) return dir;
  throw new CliError(`no model directory ${spec}`, "MODEL is a checkpoint directory, a model id under models/, or random:small / random:medium");
}

// Loads MODEL with the load flags; auto picks the KV type its spec records (random checkpoints have none: f32).
async function load(spec: string, quant: Quant, flags: LoadFlags): Promise<{ model: Model; name: string }> {
  const model = await Model.load(resolveModel(spec), { quant: NATIVE_QUANT[quant], recipe: modelRecipe(findSpec(spec)), threads: flags.threads ?? 0, maxStepTokens: 512, ...(flags.backend ? { backend: flags.backend } : {}) });
  try {
    applyKvType(model, flags.kvType, findSpec(spec)?.cache?.kv);
  } catch (e) {
    model.free();
    throw e;
  }
  return { model, name: spec };
}

const RUNS = ["agent", "stall", "streams", "admission"] as const;
const runsOption = z
  .string()
  .transform((s) => s.split(",").map((r) => r.trim()))
  .pipe(z.array(z.enum(RUNS, { error: `expected a comma-separated list of ${RUNS.join(", ")}` })).min(1));

export default command({
  meta: { name: "serve", description: "Prefix-cache TTFT, decode stall, concurrent decode and admission under a tight KV budget" },
  args: {
    model: { type: "string", description: "Model for the agent, stall and admission runs (default: splash-tiny if installed, else random:small)" },
    decodeModel: { type: "string", description: "Model for the concurrent-decode run (default random:medium: its weights outgrow the CPU caches)" },
    quant: quantFlag("bf16"),
    ...loadFlags,
    system: { type: "string", description: "System prompt + tools tokens of the agent conversation (default 4096)" },
    turn: { type: "string", description: "Tokens each agent turn adds (default 512)" },
    target: { type: "string", description: "Shared prefix the agent conversation grows to (default 8192)" },
    context: { type: "string", description: "Served context of the admission run (default 2048)" },
    runs: { type: "string", description: "Comma-separated runs to do: agent, stall, streams, admission (default all)" },
  },
  async run({ args }) {
    const name = "bench serve";
    const quant = parseQuant(name, args.quant) ?? "bf16";
    const flags = parseLoadFlags(name, args);
    const threads = flags.threads ?? 0;
    const system = args.system === undefined ? 4096 : parseOption(name, "system", intOption(64, 1 << 20), args.system);
    const turn = args.turn === undefined ? 512 : parseOption(name, "turn", intOption(1, 1 << 20), args.turn);
    const target = args.target === undefined ? 8192 : parseOption(name, "target", intOption(1, 1 << 20), args.target);
    const context = args.context === undefined ? 2048 : parseOption(name, "context", intOption(256, 1 << 20), args.context);
    const mainSpec = args.model ?? (existsSync(join(modelsDir, "splash-tiny", "config.json")) ? "splash-tiny" : "random:small");
    const decodeSpec = args.decodeModel ?? "random:medium";
    const engineOptions = { pageTokens: 64, kvBudget: 512 * 2 ** 20 };
    const runs = new Set(args.runs === undefined ? RUNS : parseOption(name, "runs", runsOption, args.runs));

    const kvTypes: Record<string, string> = {};
    let agent, stall, admission, streams;
    if (runs.has("agent") || runs.has("stall") || runs.has("admission")) {
      const main = await load(mainSpec, quant, flags);
      kvTypes.main = main.model.info.kvType;
      try {
        const step = nativeStepModel(main.model);
        if (runs.has("agent")) {
          log.info(`agent: ${system}-token system prompt, +${turn} tokens a turn, until ${target} tokens are cached`);
          const turns = await agentTurns(step, engineOptions, { systemTokens: system, turnTokens: turn, outputTokens: 32, targetPrefix: target, missTurns: "first-and-last" });
          for (const t of turns) log.info(`  turn ${t.turn}: ${t.promptTokens} tokens, ${t.cachedTokens} cached, TTFT ${t.hitMs.toFixed(0)} ms${t.missMs === undefined ? "" : ` vs ${t.missMs.toFixed(0)} ms uncached (${t.speedup!.toFixed(1)}×)`}`);
          agent = { turns, speedupAtTarget: turns.at(-1)!.speedup };
        }
        if (runs.has("stall")) {
          log.info("stall: 2 streams decoding while a 2048-token prompt arrives, with the 200 ms step target and without it");
          stall = { target200ms: await decodeStall(step, engineOptions, 2, 2048), budgetOnly: await decodeStall(step, { ...engineOptions, stallTargetMs: Infinity }, 2, 2048) };
          for (const [policy, r] of Object.entries(stall)) {
            log.info(`  ${policy}: gap between tokens ${r.baselineGapMs.toFixed(0)} ms before, ${r.medianGapDuringPrefillMs.toFixed(0)} ms median / ${r.maxGapDuringPrefillMs.toFixed(0)} ms max during its ${r.prefillMs.toFixed(0)} ms prefill`);
          }
        }
        if (runs.has("admission")) {
          log.info(`admission: 16 requests, context ${context}, budget for 9 full contexts`);
          admission = await tightBudget(step, { pageTokens: 64 }, { requests: 16, contextTokens: context, reserveAdmits: 9, outputTokens: 16 });
          log.info(`  ${admission.completed}/16 completed, ${admission.peakRunning} at once; peak ${formatBytes(admission.peakSequenceBytes)} held of ${formatBytes(admission.budgetBytes)}`);
        }
      } finally {
        main.model.free();
      }
    }

    if (runs.has("streams")) {
      const dec = await load(decodeSpec, quant, flags);
      kvTypes.decode = dec.model.info.kvType;
      try {
        const step = nativeStepModel(dec.model);
        const one = await decodeStreams(step, engineOptions, 1, 16, 48);
        const four = await decodeStreams(step, engineOptions, 4, 16, 48);
        log.info(`streams: ${one.tokensPerSecond.toFixed(1)} tokens/s alone, ${four.tokensPerSecond.toFixed(1)} in all with 4 (${(four.tokensPerSecond / one.tokensPerSecond).toFixed(2)}×); CPU per token ${one.cpuMsPerToken.toFixed(1)} ms alone, ${four.cpuMsPerToken.toFixed(1)} ms with 4`);
        streams = { one, four, ratio: four.tokensPerSecond / one.tokensPerSecond };
      } finally {
        dec.model.free();
      }
    }

    const m = machine();
    console.log(
      JSON.stringify({
        bench: "serve",
        machine: { cpu: m.cpuModel, cores: m.cores, memory: m.totalMemory },
        models: { main: mainSpec, decode: decodeSpec, quant, threads: threads || m.cores, kvType: kvTypes },
        agent,
        stall,
        streams,
        admission,
      }),
    );
  },
});
