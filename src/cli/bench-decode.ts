// `splash bench decode`: prefill and decode speed of the native engine on a model with the real Qwen3.8-27B layer
// shapes (hidden 5120, 24 q / 4 kv heads × 256, GDN 16 key / 48 value heads × 128, SwiGLU 17408, vocab 248320) but
// only a few layers (default 4: three GDN, one full attention), with random weights quantized at load (q8, q4).
// Reports prefill tokens/s, decode tokens/s at 1 and 4 sequences, and the weight bytes one decode token reads ÷ the
// decode time as a fraction of this machine's memory read bandwidth measured in the same run. Ends with one JSON line.
// Every time is the best single step (prefill: of two), given twice: wall time, and the process's CPU time ÷ threads
// ("cpu"), which is what the engine gets while it holds the cores: on a machine shared with other work the wall
// figures measure the neighbours too. The bandwidth is measured right before the decode steps it is compared with.
//
// The checkpoint (bf16, official layout) is written once into the cache directory and loaded through the ordinary
// loader, so what is measured is exactly what `splash serve` would run.
import { loadavg } from "node:os";
import { ensure27bShapes, RANDOM_SIZES } from "../bench/random-model.ts";
import { join } from "node:path";
import type { Sampling } from "../engine/types.ts";
import { check } from "../native/errors.ts";
import { native } from "../native/library.ts";
import { Model, type Quant } from "../native/model.ts";
import { cacheDir } from "../paths.ts";
import { log } from "../log.ts";
import { command, intOption, parseOption } from "./_command.ts";
import { loadFlags, parseQuants, parseThreads, quantsFlag } from "./_load-flags.ts";

const VOCAB = RANDOM_SIZES["qwen3.8-27b-shapes"]!.vocab;

const GREEDY: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };

// A figure over wall time and over CPU time ÷ threads.
type Both = { wall: number; cpu: number };

type QuantFigures = {
  quant: Quant;
  loadSeconds: number;
  bandwidth: Both; // GB/s, measured right before the decode steps
  prefillTokensPerSecond: Both;
  decode1TokensPerSecond: Both;
  decode4TokensPerSecond: Both;
  decodeBytesPerToken: number;
  bandwidthFraction: Both;
};

// Runs fn and returns its wall and CPU seconds (process user + system, divided by the threads that ran it).
function timed(threads: number, fn: () => void): Both {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { wall, cpu: (c.user + c.system) / 1e6 / threads };
}

// The best of several timings, wall and CPU each: what the engine does when the machine lets it run.
const best = (ts: Both[]): Both => ({ wall: Math.min(...ts.map((t) => t.wall)), cpu: Math.min(...ts.map((t) => t.cpu)) });
const per = (n: number, t: Both): Both => ({ wall: n / t.wall, cpu: n / t.cpu });

function measure(model: Model, quant: Quant, loadSeconds: number, prefill: number, steps: number, bandwidth: () => Both): QuantFigures {
  const threads = model.info.threads;
  const pageTokens = 16;
  const perSeq = Math.ceil((prefill + 2 * steps + 2) / pageTokens); // warm-up and timed steps at batch 1, then at 4
  const cache = model.createCache({ pageTokens, nPages: 4 * perSeq, nSlots: 4 });
  try {
    const pages = [0, 1, 2, 3].map((k) => Int32Array.from({ length: perSeq }, (_, i) => k * perSeq + i));
    const prompt = (k: number, n: number) => Int32Array.from({ length: n }, (_, i) => (1000 + 7919 * (i + 31 * k)) % VOCAB);
    const next: number[] = [0, 0, 0, 0];
    const past: number[] = [0, 0, 0, 0];
    // prefill: the whole prompt in one step, twice (sequences 1 and 0; the second one stays)
    const prefillTimes = [1, 0].map((k) =>
      timed(threads, () => {
        next[k] = cache.step([{ slot: k, nPast: 0, tokens: prompt(0, prefill), pages: pages[k]!, sample: { sampling: GREEDY } }])[0]!.token;
      }),
    );
    past[0] = prefill;
    // the other three sequences get short prompts: decode speed barely depends on a context this short
    const others = cache.step([1, 2, 3].map((k) => ({ slot: k, nPast: 0, tokens: prompt(k, 8), pages: pages[k]!, sample: { sampling: GREEDY } })));
    others.forEach((o, i) => ((next[i + 1] = o!.token), (past[i + 1] = 8)));
    const decode = (seqs: number[]) => {
      const outs = cache.step(seqs.map((k) => ({ slot: k, nPast: past[k]!, tokens: Int32Array.of(next[k]!), pages: pages[k]!, sample: { sampling: GREEDY } })));
      seqs.forEach((k, i) => ((next[k] = outs[i]!.token), past[k]!++));
    };
    decode([0]); // warm: first touch of the decode path
    const bw = bandwidth(); // right before the steps it is compared with
    const decode1 = best(Array.from({ length: steps }, () => timed(threads, () => decode([0]))));
    decode([0, 1, 2, 3]);
    const decode4 = best(Array.from({ length: steps }, () => timed(threads, () => decode([0, 1, 2, 3]))));
    const bytes = model.info.decodeBytesPerToken;
    const tokens1 = per(1, decode1);
    return {
      quant,
      loadSeconds,
      bandwidth: bw,
      prefillTokensPerSecond: per(prefill, best(prefillTimes)),
      decode1TokensPerSecond: tokens1,
      decode4TokensPerSecond: per(4, decode4),
      decodeBytesPerToken: bytes,
      bandwidthFraction: { wall: (bytes * tokens1.wall) / 1e9 / bw.wall, cpu: (bytes * tokens1.cpu) / 1e9 / bw.cpu },
    };
  } finally {
    cache.free();
  }
}

export default command({
  meta: { name: "decode", description: "Prefill and decode speed on the real Qwen3.8-27B layer shapes (few layers, random weights)" },
  args: {
    quant: quantsFlag(["q8", "q4"], ["q8", "q4"]),
    layers: { type: "string", description: "Decoder layers, every fourth full attention (default 4)" },
    prefill: { type: "string", description: "Prompt tokens prefilled in one step (default 64)" },
    steps: { type: "string", description: "Timed decode steps per batch size (default 8)" },
    threads: loadFlags.threads,
  },
  async run({ args }) {
    const quants = parseQuants("bench decode", args.quant, ["q8", "q4"] as const, ["q8", "q4"]);
    const layers = args.layers === undefined ? 4 : parseOption("bench decode", "layers", intOption(4, 64), args.layers);
    const prefill = args.prefill === undefined ? 64 : parseOption("bench decode", "prefill", intOption(1, 4096), args.prefill);
    const steps = args.steps === undefined ? 8 : parseOption("bench decode", "steps", intOption(1, 1000), args.steps);
    const threads = parseThreads("bench decode", args.threads) ?? 0;

    const dir = join(cacheDir(), "bench", `decode-qwen3.8-27b-shapes-${layers}l`);
    ensure27bShapes(dir, layers);
    const lib = native();
    const bandwidth = (): Both => {
      const gbs = new Float64Array(2);
      check(lib, "splash_bench_memory_bandwidth", lib.splash_bench_memory_bandwidth(threads, 1n << 30n, 3, gbs.subarray(0, 1), gbs.subarray(1, 2)));
      return { wall: gbs[0]!, cpu: gbs[1]! };
    };
    const load0 = loadavg()[0]!;
    const results: QuantFigures[] = [];
    for (const quant of quants) {
      const t0 = performance.now();
      const model = await Model.load(dir, { quant, threads, maxStepTokens: Math.max(prefill, 32) });
      const loadSeconds = (performance.now() - t0) / 1000;
      try {
        results.push(measure(model, quant, loadSeconds, prefill, steps, bandwidth));
      } finally {
        model.free();
      }
    }
    const threadsUsed = threads || navigator.hardwareConcurrency;
    const load = [load0, loadavg()[0]!].map((x) => Number(x.toFixed(2)));
    const f = (b: Both, digits: number) => `${b.wall.toFixed(digits)} | ${b.cpu.toFixed(digits)}`;
    console.log(`model: ${layers} layers of Qwen3.8-27B shapes, vocab ${VOCAB}; ${threadsUsed} threads; load average ${load[0]} → ${load[1]}`);
    console.log("each figure: wall | cpu (process CPU time ÷ threads); best single step; bandwidth measured right before the decode steps");
    console.log("quant  load s  bandwidth GB/s  prefill tok/s  decode tok/s (1)  decode tok/s (4)       4 vs 1  GB/token  of bandwidth");
    for (const r of results)
      console.log(
        `${r.quant.padEnd(5)}  ${r.loadSeconds.toFixed(1).padStart(6)}  ${f(r.bandwidth, 1).padStart(14)}  ${f(r.prefillTokensPerSecond, 2).padStart(13)}  ` +
          `${f(r.decode1TokensPerSecond, 2).padStart(16)}  ${f(r.decode4TokensPerSecond, 2).padStart(16)}  ` +
          `${f({ wall: r.decode4TokensPerSecond.wall / r.decode1TokensPerSecond.wall, cpu: r.decode4TokensPerSecond.cpu / r.decode1TokensPerSecond.cpu }, 2).padStart(11)}  ` +
          `${(r.decodeBytesPerToken / 1e9).toFixed(3).padStart(8)}  ${(100 * r.bandwidthFraction.wall).toFixed(1)}% | ${(100 * r.bandwidthFraction.cpu).toFixed(1)}%`,
      );
    const round = (b: Both, digits = 3) => ({ wall: Number(b.wall.toFixed(digits)), cpu: Number(b.cpu.toFixed(digits)) });
    console.log(
      JSON.stringify({
        bench: "decode",
        layers,
        vocab: VOCAB,
        threads: threadsUsed,
        prefillTokens: prefill,
        steps,
        loadAverage: load,
        results: results.map((r) => ({
          quant: r.quant,
          loadSeconds: Number(r.loadSeconds.toFixed(2)),
          bandwidthGBs: round(r.bandwidth, 2),
          prefillTokensPerSecond: round(r.prefillTokensPerSecond),
          decode1TokensPerSecond: round(r.decode1TokensPerSecond),
          decode4TokensPerSecond: round(r.decode4TokensPerSecond),
          decode4Over1: round({ wall: r.decode4TokensPerSecond.wall / r.decode1TokensPerSecond.wall, cpu: r.decode4TokensPerSecond.cpu / r.decode1TokensPerSecond.cpu }),
          decodeBytesPerToken: r.decodeBytesPerToken,
          bandwidthFraction: round(r.bandwidthFraction, 4),
        })),
      }),
    );
  },
});
