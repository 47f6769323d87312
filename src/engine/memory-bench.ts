// The workloads of `splash bench memory` (src/cli/bench-memory.ts): what the memory tiers buy, over any StepModel
// (the native engine; the toy in tests). Each builds its own engines and returns plain numbers.
//   restart     time to first token of a prompt whose long prefix an earlier server computed: served from the disk
//               tier by a fresh engine (a restart) vs computed cold; the outputs must match
//   subagents   n requests arriving together with one cold shared prefix: prompt tokens computed and their time to
//               first token, with the prefix cache (the prefix computed once) and without it (n times)
//   admission   n concurrent requests under one budget, for each of two models (an int8 and an f32 KV cache): how
//               many ran at once and how many completed
import { createEngine, type EngineOptions } from "./engine.ts";
import type { StepModel } from "./runner.ts";
import { concat, randomTokens, request, timed, type Run } from "./serve-bench.ts";

export type RestartResult = { prefixTokens: number; promptTokens: number; coldTtftMs: number; diskTtftMs: number; speedup: number; cachedTokens: number; diskReadBytes: number; outputsMatch: boolean };

// `prefix` then `suffix`: the first engine computes prefix + another suffix (writing the disk tier), a second engine
// on the same disk directory answers prefix + suffix from it; a third, without any cache, answers it cold. The end
// of the prefix is a snapshot hint, as the chat layer gives one at the end of a shared system prompt.
export async function restartTtft(model: StepModel, engineOptions: EngineOptions & { diskCache: { dir: string; budget: number } }, prefix: Int32Array, suffixes: [Int32Array, Int32Array], outputTokens: number): Promise<RestartResult> {
  const first = createEngine(model, engineOptions);
  try {
    await timed(first.generate({ ...request(concat(prefix, suffixes[0]), outputTokens), snapshotAt: [prefix.length] }));
  } finally {
    await first.close(); // writes flushed
  }
  const prompt = concat(prefix, suffixes[1]);
  const restarted = createEngine(model, engineOptions);
  let hit: Run;
  let readBytes = 0;
  try {
    hit = await timed(restarted.generate(request(prompt, outputTokens)));
    readBytes = restarted.stats().prefixCacheTiers?.disk?.readBytes ?? 0;
  } finally {
    await restarted.close();
  }
  const cold = createEngine(model, { ...engineOptions, prefixCache: false });
  let miss: Run;
  try {
    miss = await timed(cold.generate(request(prompt, outputTokens)));
  } finally {
    await cold.close();
  }
  return {
    prefixTokens: prefix.length,
    promptTokens: prompt.length,
    coldTtftMs: miss.ttftMs,
    diskTtftMs: hit.ttftMs,
    speedup: miss.ttftMs / hit.ttftMs,
    cachedTokens: hit.cached,
    diskReadBytes: readBytes,
    outputsMatch: miss.tokens.join() === hit.tokens.join(),
  };
}

export type SubagentRun = { promptTokensComputed: number; ttftMs: number[]; cached: number[]; seconds: number };
export type SubagentsResult = { requests: number; prefixTokens: number; suffixTokens: number; shared: SubagentRun; independent: SubagentRun; outputsMatch: boolean };

// n requests of prefix + their own suffix, all at once, on an engine with the prefix cache (cold) and on one without.
export async function subagents(model: StepModel, engineOptions: EngineOptions, prefix: Int32Array, suffixes: Int32Array[], outputTokens: number): Promise<SubagentsResult> {
  const prompts = suffixes.map((s) => concat(prefix, s));
  const run = async (options: EngineOptions): Promise<SubagentRun & { tokens: string[] }> => {
    const engine = createEngine(model, options);
    try {
      const t0 = performance.now();
      const runs = await Promise.all(prompts.map((p) => timed(engine.generate(request(p, outputTokens)))));
      return {
        promptTokensComputed: engine.stats().promptTokensComputed,
        ttftMs: runs.map((r) => r.ttftMs),
        cached: runs.map((r) => r.cached),
        seconds: (performance.now() - t0) / 1000,
        tokens: runs.map((r) => r.tokens.join()),
      };
    } finally {
      await engine.close();
    }
  };
  const { tokens: a, ...shared } = await run(engineOptions);
  const { tokens: b, ...independent } = await run({ ...engineOptions, prefixCache: false });
  return { requests: prompts.length, prefixTokens: prefix.length, suffixTokens: suffixes[0]!.length, shared, independent, outputsMatch: a.join("|") === b.join("|") };
}

export type AdmissionRun = { kvType: string; pageBytes: number; nPages: number; peakRunning: number; completed: number; seconds: number };

// n concurrent requests of `promptTokens` + `outputTokens` under `budget` bytes of sequence state, on each model.
export async function admissionByKv(models: { kvType: string; model: StepModel }[], engineOptions: EngineOptions, budget: number, n: number, promptTokens: number, outputTokens: number): Promise<AdmissionRun[]> {
  const out: AdmissionRun[] = [];
  for (const { kvType, model } of models) {
    const engine = createEngine(model, { ...engineOptions, kvBudget: budget, maxSeqs: n, prefixCache: false });
    try {
      let peak = 0;
      const t0 = performance.now();
      const runs = await Promise.all(
        Array.from({ length: n }, (_, i) => timed(engine.generate(request(randomTokens(promptTokens, 500 + i, model.vocabSize), outputTokens)), () => (peak = Math.max(peak, engine.stats().running)))),
      );
      out.push({ kvType, pageBytes: engine.plan.pageBytes, nPages: engine.plan.nPages, peakRunning: peak, completed: runs.filter((r) => r.reason === "length").length, seconds: (performance.now() - t0) / 1000 });
    } finally {
      await engine.close();
    }
  }
  return out;
}
