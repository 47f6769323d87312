// Splash against llama.cpp on the same weights: the workloads of `splash bench peers`. Each model is
// exported once to GGUF (Q8_0 for Splash's q8, Q4_0 for its q4), both engines load it with the same thread count,
// and every measurement runs Splash then llama.cpp, repetition after repetition, on the same pre-tokenized prompts
// (seeded random ids); medians are reported with their ratio. No speculation on either side. llama.cpp runs in a
// Node process through node-llama-cpp (peers-llama.mjs) as its users drive it; Splash runs in this
// process through its native step (prefill, decode) and its engine (prefix cache, concurrent streams).
//
// Timings come twice: wall clock, and CPU time of the engine's process ÷ threads (this machine is shared: wall time
// also measures the neighbours; CPU time is what the engine got while it held the cores).
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { ensure27bShapes } from "./random-model.ts";
import { createEngine } from "../engine/engine.ts";
import { nativeStepModel } from "../engine/native-runner.ts";
import { decodeStreams, randomTokens } from "../engine/serve-bench.ts";
import type { EngineEvent, Sampling } from "../engine/types.ts";
import { exportGguf, ggufDecodeBytes } from "../gguf/export.ts";
import { log } from "../log.ts";
import { check } from "../native/errors.ts";
import { native } from "../native/library.ts";
import { Model, type Cache, type Quant } from "../native/model.ts";
import { cacheDir } from "../paths.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { LlamaPeer, type PeerInfo } from "./peers-client.ts";

export type PeerModel = {
  name: string;
  dir: string;
  prefill: number;
  shortContext: number;
  longContext: number;
  decodeTokens: number;
  prefix: number;
  suffix: number;
  drafter?: string; // the embedded model's DFlash drafter: adds a speculative-decoding row on a real chat prompt
};

// The embedded model, and the real Qwen3.8-27B layer shapes with `layers` layers (bench decode's random checkpoint).
export function peerModels(root: string, layers: number): Record<string, PeerModel> {
  const big = join(cacheDir(), "bench", `decode-qwen3.8-27b-shapes-${layers}l`);
  return {
    "splash-tiny": { name: "splash-tiny", dir: join(root, "models/splash-tiny"), prefill: 512, shortContext: 16, longContext: 2048, decodeTokens: 64, prefix: 2048, suffix: 64, drafter: join(root, "models/splash-tiny/dflash") },
    "qwen3.8-27b-shapes": { name: `qwen3.8-27b-shapes-${layers}l`, dir: big, prefill: 64, shortContext: 16, longContext: 256, decodeTokens: 8, prefix: 256, suffix: 32 },
  };
}

export function prepareModel(m: PeerModel, layers: number): void {
  if (m.name.startsWith("qwen3.8-27b-shapes")) ensure27bShapes(m.dir, layers);
}

const GGUF_TYPE = { q8: "q8_0", q4: "q4_0" } as const;

// The GGUF of a model, written once into the cache directory.
export function ggufFor(m: PeerModel, quant: "q8" | "q4"): string {
  const dir = join(cacheDir(), "bench", "peers");
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${m.name}-${GGUF_TYPE[quant]}.gguf`);
  if (!existsSync(path) || statSync(path).mtimeMs < statSync(join(m.dir, "config.json")).mtimeMs) {
    log.info(`exporting ${m.name} to ${path}`);
    exportGguf(m.dir, path, GGUF_TYPE[quant], { name: m.name });
  }
  return path;
}

export type Timing = { wall: number; cpu: number }; // seconds; cpu = process CPU seconds ÷ threads
export type Row = { metric: string; unit: string; splash: Timing[]; llama: Timing[]; splashNote?: string; llamaNote?: string };

const GREEDY: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

// Splash's side: one model, one cache of a few slots, the native step.
class SplashSide {
  private readonly cache: Cache;
  private readonly pages: Int32Array[];
  constructor(
    readonly model: Model,
    readonly threads: number,
    maxContext: number,
  ) {
    const perSeq = Math.ceil(maxContext / 16);
    this.cache = model.createCache({ pageTokens: 16, nPages: 4 * perSeq, nSlots: 4 });
    this.pages = [0, 1, 2, 3].map((k) => Int32Array.from({ length: perSeq }, (_, i) => k * perSeq + i));
  }

  private timed<T>(f: () => T): [T, Timing] {
    const t0 = performance.now();
    const c0 = cpuNow();
    const r = f();
    return [r, { wall: (performance.now() - t0) / 1000, cpu: (cpuNow() - c0) / this.threads }];
  }

  // Prompt of n tokens on a fresh sequence, in steps of the model's largest; returns the sampled next token.
  private prompt(tokens: Int32Array): number {
    this.cache.clearSlot(0);
    const step = this.model.info.maxStepTokens;
    let next = 0;
    for (let i = 0; i < tokens.length; i += step) {
      const chunk = tokens.subarray(i, Math.min(tokens.length, i + step));
      const last = i + chunk.length === tokens.length;
      const out = this.cache.step([{ slot: 0, nPast: i, tokens: chunk, pages: this.pages[0]!, sample: last ? { sampling: GREEDY } : undefined }]);
      if (last) next = out[0]!.token;
    }
    return next;
  }

  prefill(tokens: Int32Array): Timing {
    return this.timed(() => this.prompt(tokens))[1];
  }

  // Prompt (untimed), then `n` greedy tokens; times the n − 1 steps after the first token.
  decode(prompt: Int32Array, n: number): Timing {
    let next = this.prompt(prompt);
    let past = prompt.length;
    return this.timed(() => {
      for (let i = 1; i < n; i++) {
        next = this.cache.step([{ slot: 0, nPast: past, tokens: Int32Array.of(next), pages: this.pages[0]!, sample: { sampling: GREEDY } }])[0]!.token;
        past++;
      }
    })[1];
  }

  free(): void {
    this.cache.free();
  }
}

async function firstToken(stream: AsyncIterable<EngineEvent>): Promise<number> {
  let cached = 0;
  for await (const ev of stream) {
    if (ev.type === "admitted") cached = ev.cachedPromptTokens;
    if (ev.type === "tokens") break;
  }
  return cached;
}

function concat(a: Int32Array, b: Int32Array): Int32Array {
  const out = new Int32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

// Time to first token of prefix + suffix B after prefix + suffix A was served (the prefix cache hit a user of
// `splash serve` gets on the next turn), on a fresh engine.
async function splashTtft(model: Model, threads: number, prefix: Int32Array, suffixes: Int32Array[]): Promise<[Timing, number]> {
  const engine = createEngine(nativeStepModel(model), { pageTokens: 64, maxSeqs: 4, kvBudget: 256 * 2 ** 20, prefixCache: true });
  try {
    const ask = (suffix: Int32Array) =>
      firstToken(engine.generate({ prompt: concat(prefix, suffix), maxTokens: 1, sampling: GREEDY, stopTokens: [], signal: new AbortController().signal, snapshotAt: [prefix.length] }));
    await ask(suffixes[0]!);
    const t0 = performance.now();
    const c0 = cpuNow();
    const cached = await ask(suffixes[1]!);
    return [{ wall: (performance.now() - t0) / 1000, cpu: (cpuNow() - c0) / threads }, cached];
  } finally {
    await engine.close();
  }
}

// A coding request as the chat template renders it: speculation pays on real text, not on random ids.
const CHAT_PROMPT =
  "<|im_start|>user\nWrite a Python function `merge_intervals(intervals)` that merges overlapping intervals and returns them sorted. " +
  "Include a docstring.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

// Greedy decode of `n` tokens after the prompt through the engine with the drafter attached (speculation on):
// tokens/s over the tokens after the first, and the share of drafts accepted.
async function splashSpeculative(model: Model, threads: number, prompt: Int32Array, n: number): Promise<[Timing, string]> {
  const engine = createEngine(nativeStepModel(model), { pageTokens: 64, maxSeqs: 4, kvBudget: 128 * 2 ** 20, prefixCache: false });
  try {
    let t0 = 0;
    let c0 = 0;
    let got = 0;
    let note = "";
    for await (const ev of engine.generate({ prompt, maxTokens: n, sampling: GREEDY, stopTokens: [], signal: new AbortController().signal, draft: "auto" })) {
      if (ev.type === "tokens") {
        if (got === 0) [t0, c0] = [performance.now(), cpuNow()];
        got += ev.tokens.length;
      } else if (ev.type === "done" && "speculation" in ev && ev.speculation) {
        const sp = ev.speculation as { drafted: number; accepted: number; cycles: number };
        note = `${sp.accepted} of ${sp.drafted} drafts accepted over ${sp.cycles} cycles`;
      }
    }
    // the first event's tokens came with the prompt: time the rest
    return [{ wall: (performance.now() - t0) / 1000 / (got - 1), cpu: (cpuNow() - c0) / threads / (got - 1) }, note];
  } finally {
    await engine.close();
  }
}

export type PeerResult = { model: string; quant: Quant; ggufType: string; splashBytesPerToken: number; llamaBytesPerToken: number; rows: Row[] };

export type PeersOptions = { threads: number; reps: number; node?: string };

export async function measurePeers(m: PeerModel, quant: "q8" | "q4", o: PeersOptions, peer: LlamaPeer): Promise<PeerResult> {
  const gguf = ggufFor(m, quant);
  const maxContext = Math.max(m.longContext, m.prefix + m.suffix, m.prefill) + m.decodeTokens + 16;
  const model = await Model.load(m.dir, { quant, threads: o.threads, maxStepTokens: Math.max(512, m.prefill) });
  const side = new SplashSide(model, o.threads, maxContext);
  await peer.load({ model: gguf, threads: o.threads, contextSize: 4 * maxContext, sequences: 4, batchSize: Math.max(512, m.prefill) });
  const V = model.info.vocabSize;
  const rows: Row[] = [];
  const row = (metric: string, unit: string): Row => {
    let r = rows.find((x) => x.metric === metric);
    if (!r) rows.push((r = { metric, unit, splash: [], llama: [] }));
    return r;
  };
  type LlamaTiming = { seconds: number; cpuSeconds: number };
  const lt = (r: LlamaTiming): Timing => ({ wall: r.seconds, cpu: r.cpuSeconds / o.threads });
  const specModel = m.drafter ? await Model.load(m.dir, { quant, threads: o.threads, drafter: { kind: "dflash", dir: m.drafter } }) : undefined;
  const chat = m.drafter ? (await Tokenizer.load(m.dir)).encodeTemplate(CHAT_PROMPT) : undefined;
  try {
    for (let rep = 0; rep < o.reps; rep++) {
      log.info(`${m.name} ${quant}: repetition ${rep + 1} of ${o.reps}`);
      const prompt = randomTokens(m.prefill, 1000 + rep, V);
      row(`prefill ${m.prefill} tokens`, "tokens/s").splash.push(side.prefill(prompt));
      row(`prefill ${m.prefill} tokens`, "tokens/s").llama.push(lt(await peer.request<LlamaTiming>({ op: "prefill", tokens: Array.from(prompt) })));
      for (const [label, context] of [["short", m.shortContext], ["long", m.longContext]] as const) {
        const p = randomTokens(context, 2000 + rep, V);
        const metric = `decode at ${context} tokens of context (${label})`;
        row(metric, "tokens/s").splash.push(side.decode(p, m.decodeTokens));
        row(metric, "tokens/s").llama.push(lt(await peer.request<LlamaTiming>({ op: "decode", prompt: Array.from(p), tokens: m.decodeTokens })));
      }
      const prefix = randomTokens(m.prefix, 3000 + rep, V);
      const suffixes = [randomTokens(m.suffix, 4000 + rep, V), randomTokens(m.suffix, 5000 + rep, V)];
      const ttft = row(`time to first token, ${m.prefix}-token prefix reused + ${m.suffix} new`, "s");
      const [st, cached] = await splashTtft(model, o.threads, prefix, suffixes);
      ttft.splash.push(st);
      ttft.splashNote = `${cached} prompt tokens from the prefix cache`;
      const lr = await peer.request<{ seconds: number[]; cpuSeconds: number[]; reused: number[] }>({ op: "ttft", prefix: Array.from(prefix), suffixes: suffixes.map((s) => Array.from(s)) });
      ttft.llama.push({ wall: lr.seconds[1]!, cpu: lr.cpuSeconds[1]! / o.threads });
      ttft.llamaNote = `${lr.reused[1]} prompt tokens reused (checkpoint)`;
      if (specModel && chat) {
        const spec = row(`decode ${m.decodeTokens * 2} tokens after a chat prompt, Splash with the DFlash drafter`, "tokens/s");
        const [t, note] = await splashSpeculative(specModel, o.threads, chat, m.decodeTokens * 2);
        spec.splash.push(t);
        spec.splashNote = note;
        const lr = await peer.request<LlamaTiming>({ op: "decode", prompt: Array.from(chat), tokens: m.decodeTokens * 2 });
        spec.llama.push({ wall: lr.seconds / (m.decodeTokens * 2 - 1), cpu: lr.cpuSeconds / o.threads / (m.decodeTokens * 2 - 1) });
        spec.llamaNote = "no speculation";
      }
      const streams = row(`total decode, 4 concurrent streams`, "tokens/s");
      const sr = await decodeStreams(nativeStepModel(model), { pageTokens: 16, maxSeqs: 4, kvBudget: 128 * 2 ** 20 }, 4, m.shortContext, m.decodeTokens);
      // decodeStreams times wall clock only: CPU time of the same window is not separable, so both sides report
      // tokens over wall seconds here, and cpu = wall
      streams.splash.push({ wall: sr.seconds / sr.tokens, cpu: sr.seconds / sr.tokens });
      const prompts = [0, 1, 2, 3].map((k) => Array.from(randomTokens(m.shortContext, 7 + k, V)));
      const lsr = await peer.request<{ tokens: number; seconds: number; cpuSeconds: number }>({ op: "streams", prompts, tokens: m.decodeTokens });
      streams.llama.push({ wall: lsr.seconds / lsr.tokens, cpu: lsr.seconds / lsr.tokens });
    }
  } finally {
    side.free();
    model.free();
    specModel?.free();
  }
  // per-token rows store seconds per token; turn every rate row into tokens per time unit
  for (const r of rows) {
    if (r.unit !== "tokens/s") continue;
    const n = r.metric.startsWith("prefill") ? m.prefill : r.metric.startsWith("decode at") ? m.decodeTokens - 1 : 1; // others hold s/token
    const rate = (t: Timing): Timing => ({ wall: n / t.wall, cpu: n / t.cpu });
    r.splash = r.splash.map(rate);
    r.llama = r.llama.map(rate);
  }
  return { model: m.name, quant, ggufType: GGUF_TYPE[quant], splashBytesPerToken: model.info.decodeBytesPerToken, llamaBytesPerToken: ggufDecodeBytes(m.dir, GGUF_TYPE[quant]), rows };
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

export async function memoryBandwidth(threads: number): Promise<Timing> {
  const lib = native();
  const gbs = new Float64Array(2);
  check(lib, "splash_bench_memory_bandwidth", lib.splash_bench_memory_bandwidth(threads, 1n << 30n, 5, gbs.subarray(0, 1), gbs.subarray(1, 2)));
  return { wall: gbs[0]!, cpu: gbs[1]! };
}

export type PeersReport = { machine: string; threads: number; bandwidthGBs: Timing; llama: PeerInfo; results: PeerResult[] };
