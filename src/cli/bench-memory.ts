// `splash bench memory [MODEL]`: what the memory tiers buy (src/engine/memory-bench.ts), on the model as `serve`
// loads it (its auto KV type and drafter):
//   restart     time to first token after a restart, the long prefix read from the disk tier, vs computed cold
//   subagents   4 requests arriving together with one cold shared prefix: prompt tokens computed and time to first
//               token, the prefix computed once vs by each
//   admission   16 concurrent requests under a budget that holds all of them with an int8 KV cache: how many run at
//               once and complete with int8, and with f32 (a quarter of the pages)
// The prefix is the mixed agent conversation of `bench tokenize`; suffixes and admission prompts are seeded random
// token ids. Ends with one JSON line.
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { admissionByKv, restartTtft, subagents } from "../engine/memory-bench.ts";
import { nativeStepModel } from "../engine/native-runner.ts";
import { randomTokens } from "../engine/serve-bench.ts";
import { formatBytes } from "../format.ts";
import { log } from "../log.ts";
import { backendKind, chooseDrafter } from "../models/drafter.ts";
import { applyKvType, type KvType } from "../models/kv-type.ts";
import { resolveModel } from "../models/resolve.ts";
import { Model } from "../native/model.ts";
import { cacheDir } from "../paths.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { command, intOption, parseOption } from "./_command.ts";
import { loadFlags, parseLoadFlags } from "./_load-flags.ts";
import { mixedPrompt } from "./bench-tokenize.ts";

const { backend, threads } = loadFlags;

export default command({
  meta: { name: "memory", description: "Disk-tier TTFT after a restart, one prefill for sub-agents, admission with int8 vs f32 KV" },
  args: {
    model: { type: "positional", required: false, description: "A model id or checkpoint directory with a tokenizer (default: the embedded model)" },
    prefix: { type: "string", default: "8192", description: "Tokens of the shared prefix (restart and sub-agents)" },
    context: { type: "string", default: "8192", description: "Prompt tokens of each admission request" },
    requests: { type: "string", default: "16", description: "Concurrent admission requests" },
    backend,
    threads,
  },
  async run({ args }) {
    const name = "bench memory";
    const prefixTokens = parseOption(name, "prefix", intOption(64, 1 << 20), args.prefix);
    const context = parseOption(name, "context", intOption(64, 1 << 20), args.context);
    const requests = parseOption(name, "requests", intOption(1, 256), args.requests);
    const flags = parseLoadFlags(name, args);
    const resolved = resolveModel(args.model);
    const load = async (kv: "auto" | KvType) => {
      const m = await Model.load(resolved.dir, { ...(flags.backend ? { backend: flags.backend } : {}), ...(flags.threads ? { threads: flags.threads } : {}) });
      const drafter = chooseDrafter(resolved, "auto", m.info.hasMtp, backendKind(m.info.backend));
      if (drafter) m.attachDrafter(drafter);
      applyKvType(m, kv, resolved.spec?.cache?.kv);
      return m;
    };
    const tok = await Tokenizer.load(resolved.dir);
    const prefix = tok.encodeTemplate(mixedPrompt(tok, prefixTokens)).slice(0, prefixTokens);
    tok.free();
    mkdirSync(cacheDir(), { recursive: true });
    const disk = mkdtempSync(join(cacheDir(), "bench-prefix-"));
    const model = await load("auto");
    let restart, agents;
    try {
      const step = nativeStepModel(model);
      const V = model.info.vocabSize;
      const info = `${model.info.kvType} KV${model.drafter ? `, ${model.drafter.kind} drafter` : ""}, ${model.info.threads} threads on ${model.info.backend}`;
      log.info(`restart: ${prefixTokens}-token prefix + 64 tokens; ${info}`);
      restart = await restartTtft(step, { pageTokens: 64, diskCache: { dir: disk, budget: 8 * 2 ** 30 } }, prefix, [randomTokens(64, 1, V), randomTokens(64, 2, V)], 8);
      log.info(`  TTFT ${restart.coldTtftMs.toFixed(0)} ms cold, ${restart.diskTtftMs.toFixed(0)} ms from disk after a restart (${restart.speedup.toFixed(1)}×; ${restart.cachedTokens} tokens, ${formatBytes(restart.diskReadBytes)} read); same output: ${restart.outputsMatch}`);
      log.info(`subagents: 4 requests of the ${prefixTokens}-token prefix + 64 tokens each, at once`);
      agents = await subagents(step, { pageTokens: 64 }, prefix, [3, 4, 5, 6].map((s) => randomTokens(64, s, V)), 8);
      for (const [label, r] of [["shared", agents.shared], ["independent", agents.independent]] as const) {
        log.info(`  ${label}: ${r.promptTokensComputed} prompt tokens computed; TTFT ${r.ttftMs.map((t) => t.toFixed(0)).join(" / ")} ms; ${r.seconds.toFixed(1)} s in all`);
      }
    } finally {
      model.free();
      rmSync(disk, { recursive: true, force: true });
    }
    log.info(`admission: ${requests} requests of ${context} tokens + 16 at once, under a budget for ${requests} int8 contexts`);
    const int8 = await load("int8");
    const f32 = await load("f32");
    let admission;
    try {
      const pages = Math.ceil((context + 15) / 64);
      const budget = requests * pages * int8.pageBytes(64) + 2 * requests * int8.slotBytes;
      admission = { budget, runs: await admissionByKv([{ kvType: "int8", model: nativeStepModel(int8) }, { kvType: "f32", model: nativeStepModel(f32) }], { pageTokens: 64 }, budget, requests, context, 16) };
      for (const r of admission.runs) log.info(`  ${r.kvType}: ${r.nPages} pages of ${formatBytes(r.pageBytes)}; ${r.peakRunning} at once, ${r.completed}/${requests} completed in ${r.seconds.toFixed(0)} s`);
    } finally {
      int8.free();
      f32.free();
    }
    console.log(JSON.stringify({ bench: "memory", model: resolved.id, restart, subagents: agents, admission }));
  },
});
