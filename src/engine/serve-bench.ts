// The workloads of `splash bench serve` (src/cli/bench-serve.ts), over any StepModel, so the same code runs on the
// native engine and, in the tests, on the toy. Each builds its own engines (one cache at a time) and returns plain
// numbers; prompts are seeded random token ids, so runs are repeatable.
import { createEngine, type EngineOptions } from "./engine.ts";
import type { StepModel } from "./runner.ts";
import type { EngineEvent, GenerateRequest, Sampling } from "./types.ts";

const GREEDY: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };

export function randomTokens(n: number, seed: number, vocab: number): Int32Array {
  const out = new Int32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = 10 + ((s >>> 0) % (vocab - 20)); // away from the special ids at both ends
  }
  return out;
}

export function concat(...parts: Int32Array[]): Int32Array {
  const out = new Int32Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export type Run = { tokens: number[]; at: number[]; ttftMs: number; cached: number; reason: string };

// Runs one request to the end, noting when each token arrived (performance.now()).
export async function timed(stream: AsyncIterable<EngineEvent>, onToken?: (n: number) => void): Promise<Run> {
  const t0 = performance.now();
  const run: Run = { tokens: [], at: [], ttftMs: NaN, cached: 0, reason: "" };
  for await (const ev of stream) {
    if (ev.type === "admitted") run.cached = ev.cachedPromptTokens;
    else if (ev.type === "tokens") {
      const t = performance.now();
      for (const tok of ev.tokens) {
        run.tokens.push(tok.id);
        run.at.push(t);
      }
      if (Number.isNaN(run.ttftMs)) run.ttftMs = t - t0;
      onToken?.(run.tokens.length);
    } else run.reason = ev.reason;
  }
  return run;
}

export function request(prompt: Int32Array, maxTokens: number, signal = new AbortController().signal): GenerateRequest {
  return { prompt, maxTokens, sampling: GREEDY, stopTokens: [], signal };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export type AgentOptions = {
  systemTokens: number;
  turnTokens: number;
  outputTokens: number;
  targetPrefix: number;
  missTurns: "all" | "first-and-last"; // which turns also run uncached (each costs a full prefill)
};
export type AgentTurn = { turn: number; promptTokens: number; cachedTokens: number; hitMs: number; missMs?: number; speedup?: number };

// An agent-like conversation: a long system prompt (instructions + tools), then turns that each add a user or tool
// message, the previous answer staying in the history. Every turn runs on an engine with the prefix cache (hit);
// the chosen turns run again on a fresh engine without it (miss), until the cached prefix reaches targetPrefix.
// A miss must produce the same tokens as the hit (the cache changes time, never output).
export async function agentTurns(model: StepModel, engineOptions: EngineOptions, o: AgentOptions): Promise<AgentTurn[]> {
  const warm = createEngine(model, engineOptions);
  const turns: AgentTurn[] = [];
  try {
    let history = randomTokens(o.systemTokens, 1, model.vocabSize);
    for (let turn = 1; ; turn++) {
      const prompt = concat(history, randomTokens(o.turnTokens, 100 + turn, model.vocabSize));
      const hit = await timed(warm.generate(request(prompt, o.outputTokens)));
      const last = hit.cached >= o.targetPrefix;
      const row: AgentTurn = { turn, promptTokens: prompt.length, cachedTokens: hit.cached, hitMs: hit.ttftMs };
      if (o.missTurns === "all" || turn === 1 || last) {
        const cold = createEngine(model, { ...engineOptions, prefixCache: false });
        try {
          const miss = await timed(cold.generate(request(prompt, o.outputTokens)));
          if (miss.tokens.join() !== hit.tokens.join()) throw new Error(`turn ${turn}: the output resumed from the prefix cache differs from the one computed from scratch`);
          row.missMs = miss.ttftMs;
          row.speedup = miss.ttftMs / hit.ttftMs;
        } finally {
          await cold.close();
        }
      }
      turns.push(row);
      history = concat(prompt, Int32Array.from(hit.tokens));
      if (last) break;
    }
  } finally {
    await warm.close();
  }
  return turns;
}

// cpuMsPerToken: the process's CPU time over the whole run (prompts included) per token generated; on a machine
// shared with other work it moves less than the wall-time rate.
export type StreamsResult = { streams: number; tokens: number; seconds: number; tokensPerSecond: number; cpuMsPerToken: number };

// Total decode throughput of n concurrent streams: the tokens produced while all of them were decoding, over that
// time (from the last stream's first token to the last token).
export async function decodeStreams(model: StepModel, engineOptions: EngineOptions, n: number, promptTokens: number, outputTokens: number): Promise<StreamsResult> {
  const engine = createEngine(model, { ...engineOptions, prefixCache: false });
  try {
    const cpu = process.cpuUsage();
    const runs = await Promise.all(Array.from({ length: n }, (_, i) => timed(engine.generate(request(randomTokens(promptTokens, 7 + i, model.vocabSize), outputTokens)))));
    const used = process.cpuUsage(cpu);
    const generated = runs.reduce((acc, r) => acc + r.tokens.length, 0);
    const start = Math.max(...runs.map((r) => r.at[0]!));
    const end = Math.min(...runs.map((r) => r.at.at(-1)!));
    const tokens = runs.reduce((acc, r) => acc + r.at.filter((t) => t > start && t <= end).length, 0);
    const seconds = (end - start) / 1000;
    return { streams: n, tokens, seconds, tokensPerSecond: tokens / seconds, cpuMsPerToken: (used.user + used.system) / 1000 / generated };
  } finally {
    await engine.close();
  }
}

export type StallResult = { streams: number; promptTokens: number; maxStepTokens: number; baselineGapMs: number; medianGapDuringPrefillMs: number; maxGapDuringPrefillMs: number; prefillMs: number };

// How much a long new prompt delays running streams: the gaps between their tokens before it arrives, and while
// it is prefilled (in chunks under the step budget) next to them.
export async function decodeStall(model: StepModel, engineOptions: EngineOptions, streams: number, promptTokens: number): Promise<StallResult> {
  const engine = createEngine(model, { ...engineOptions, prefixCache: false });
  const stop = new AbortController();
  try {
    let warmedUp = 0;
    let ready: () => void = () => {};
    const warmed = new Promise<void>((r) => (ready = r));
    const runs = Array.from({ length: streams }, (_, i) =>
      timed(engine.generate(request(randomTokens(16, 50 + i, model.vocabSize), 1_000_000, stop.signal)), (k) => {
        if (k === 8 && ++warmedUp === streams) ready();
      }),
    );
    await warmed;
    const t0 = performance.now();
    await timed(engine.generate(request(randomTokens(promptTokens, 99, model.vocabSize), 1)));
    const t1 = performance.now();
    stop.abort();
    const before: number[] = [];
    const during: number[] = [];
    for (const r of await Promise.all(runs)) {
      for (let i = 2; i < r.at.length; i++) {
        const gap = r.at[i]! - r.at[i - 1]!;
        if (r.at[i]! <= t0) before.push(gap);
        else if (r.at[i - 1]! >= t0 && r.at[i]! <= t1) during.push(gap);
      }
    }
    return {
      streams,
      promptTokens,
      maxStepTokens: engine.scheduler.options.maxStepTokens,
      baselineGapMs: median(before),
      medianGapDuringPrefillMs: median(during),
      maxGapDuringPrefillMs: Math.max(...during),
      prefillMs: t1 - t0,
    };
  } finally {
    await engine.close();
  }
}

export type AdmissionOptions = { requests: number; contextTokens: number; reserveAdmits: number; outputTokens: number };
export type AdmissionResult = {
  requests: number;
  completed: number;
  failed: number;
  promptTokens: number;
  outputTokens: number;
  contextTokens: number;
  budgetBytes: number;
  reserveAdmits: number; // what reserving the full context for every request would run at once
  peakRunning: number;
  peakSequenceBytes: number;
  peakStateBytes: number;
  seconds: number;
};

// Many concurrent long requests under a budget where reserving the full context for each would run only
// `reserveAdmits` of them at once. Prompts fill what the budget can hold for all of them together (distinct
// prompts: no sharing helps), so admission must rely on allocating as tokens arrive.
export async function tightBudget(model: StepModel, engineOptions: EngineOptions, o: AdmissionOptions): Promise<AdmissionResult> {
  const pageTokens = engineOptions.pageTokens ?? 64;
  const pageBytes = model.pageBytes(pageTokens);
  const perContext = Math.ceil(o.contextTokens / pageTokens) * pageBytes + model.slotBytes;
  const budget = Math.floor((o.reserveAdmits + 0.5) * perContext);
  const engine = createEngine(model, { ...engineOptions, kvBudget: budget, maxSeqs: o.requests, prefixCache: false });
  try {
    const perRequestPages = Math.floor(engine.plan.nPages / o.requests);
    const promptTokens = perRequestPages * pageTokens - o.outputTokens;
    if (promptTokens < 1) throw new Error(`a budget of ${budget} bytes leaves no room for ${o.requests} prompts`);
    let peakRunning = 0;
    let peakState = 0;
    const t0 = performance.now();
    const runs = await Promise.all(
      Array.from({ length: o.requests }, (_, i) =>
        timed(engine.generate(request(randomTokens(promptTokens, 1000 + i, model.vocabSize), o.outputTokens)), () => {
          const s = engine.stats();
          peakRunning = Math.max(peakRunning, s.running);
          peakState = Math.max(peakState, s.stateBytesInUse);
        }).catch(() => undefined),
      ),
    );
    const stats = engine.stats();
    return {
      requests: o.requests,
      completed: runs.filter((r) => r?.reason === "length").length,
      failed: runs.filter((r) => r?.reason !== "length").length,
      promptTokens,
      outputTokens: o.outputTokens,
      contextTokens: o.contextTokens,
      budgetBytes: engine.plan.stateBytes,
      reserveAdmits: Math.floor(engine.plan.stateBytes / perContext),
      peakRunning,
      peakSequenceBytes: stats.peakSequenceStateBytes ?? 0,
      peakStateBytes: peakState,
      seconds: (performance.now() - t0) / 1000,
    };
  } finally {
    await engine.close();
  }
}
