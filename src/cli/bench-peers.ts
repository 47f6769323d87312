// `splash bench peers`: Splash against llama.cpp (node-llama-cpp 3.21.1, its CPU build) on the same weights, same
// thread count, same pre-tokenized prompts, alternating repetitions; medians and ratios for prefill, decode at a
// short and a long context, time to first token on a reused prefix, and total decode over 4 concurrent streams,
// plus each side's decode as a fraction of the memory-bandwidth roofline (weight bytes per token ÷ this machine's
// read bandwidth, measured in the same run). The workloads are src/bench/peers.ts; llama.cpp runs under Node
// from a development checkout, node-llama-cpp installed into build/ on first use (src/bench/node-llama-cpp.ts: not a
// dependency, so the npm registry is needed once). Ends with one JSON line.
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { LlamaPeer } from "../bench/peers-client.ts";
import { measurePeers, median, memoryBandwidth, peerModels, prepareModel, type PeerResult, type PeersReport, type Timing } from "../bench/peers.ts";
import { installNodeLlamaCpp, NODE_LLAMA_CPP_VERSION } from "../bench/node-llama-cpp.ts";
import { log } from "../log.ts";
import { command, intOption, parseOption, UsageError } from "./_command.ts";
import { loadFlags, parseQuants, parseThreads, quantsFlag } from "./_load-flags.ts";

const root = join(import.meta.dir, "../..");

function fmt(x: number, unit: string): string {
  return unit === "s" ? `${x.toFixed(3)} s` : x >= 100 ? x.toFixed(0) : x.toFixed(2);
}

function table(r: PeerResult, bandwidth: Timing): string[] {
  const lines = [`${r.model}, Splash ${r.quant} vs llama.cpp ${r.ggufType.toUpperCase()} (wall | cpu-time medians)`];
  lines.push("metric | Splash wall | Splash cpu | llama.cpp wall | llama.cpp cpu | Splash ÷ llama.cpp wall | cpu");
  for (const row of r.rows) {
    const s = { wall: median(row.splash.map((t) => t.wall)), cpu: median(row.splash.map((t) => t.cpu)) };
    const l = { wall: median(row.llama.map((t) => t.wall)), cpu: median(row.llama.map((t) => t.cpu)) };
    // for a time, less is better: the ratio is llama.cpp's time over Splash's, so > 1 means Splash is ahead
    const ratio = (k: "wall" | "cpu") => (row.unit === "s" ? l[k] / s[k] : s[k] / l[k]);
    lines.push(
      `${row.metric} (${row.unit}) | ${fmt(s.wall, row.unit)} | ${fmt(s.cpu, row.unit)} | ${fmt(l.wall, row.unit)} | ${fmt(l.cpu, row.unit)} | ` +
        `${ratio("wall").toFixed(2)}× | ${ratio("cpu").toFixed(2)}×`,
    );
  }
  const short = r.rows.find((x) => x.metric.includes("(short)"))!;
  const roof = (bytes: number, k: "wall" | "cpu", xs: Timing[]) => (median(xs.map((t) => t[k])) * bytes) / 1e9 / bandwidth[k];
  lines.push(
    `roofline: Splash reads ${(r.splashBytesPerToken / 1e6).toFixed(1)} MB/token, decode at ${(100 * roof(r.splashBytesPerToken, "wall", short.splash)).toFixed(0)}% | ` +
      `${(100 * roof(r.splashBytesPerToken, "cpu", short.splash)).toFixed(0)}% of bandwidth; llama.cpp reads ${(r.llamaBytesPerToken / 1e6).toFixed(1)} MB/token, ` +
      `${(100 * roof(r.llamaBytesPerToken, "wall", short.llama)).toFixed(0)}% | ${(100 * roof(r.llamaBytesPerToken, "cpu", short.llama)).toFixed(0)}%`,
  );
  return lines;
}

export default command({
  meta: { name: "peers", description: "Splash vs llama.cpp (node-llama-cpp, CPU) on the same weights: prefill, decode, TTFT, 4 streams" },
  args: {
    model: { type: "string", description: "Comma-separated: splash-tiny, qwen3.8-27b-shapes (default both)" },
    quant: quantsFlag(["q8", "q4"], ["q8", "q4"]), // against llama.cpp's Q8_0 and Q4_0
    reps: { type: "string", description: "Repetitions, alternating engines (default 3)" },
    threads: { ...loadFlags.threads, description: `${loadFlags.threads.description}, for both engines` },
    layers: { type: "string", description: "Layers of the Qwen3.8-27B-shaped model (default 4)" },
    node: { type: "string", description: "Node ≥ 20 to run llama.cpp under (default: node on PATH)" },
  },
  async run({ args }) {
    const layers = args.layers === undefined ? 4 : parseOption("bench peers", "layers", intOption(4, 64), args.layers);
    const all = peerModels(root, layers);
    const names = (args.model ?? "splash-tiny,qwen3.8-27b-shapes").split(",");
    for (const n of names) if (!all[n]) throw new UsageError(`--model ${n}: expected ${Object.keys(all).join(" and/or ")}`, "bench peers");
    const quants = parseQuants("bench peers", args.quant, ["q8", "q4"] as const, ["q8", "q4"]);
    const reps = args.reps === undefined ? 3 : parseOption("bench peers", "reps", intOption(1, 100), args.reps);
    const threads = parseThreads("bench peers", args.threads) ?? navigator.hardwareConcurrency;

    // before any measurement: a first run installs it
    const modules = await installNodeLlamaCpp(false);
    log.info(`llama.cpp: node-llama-cpp ${NODE_LLAMA_CPP_VERSION} and its CPU build in ${modules}`);
    const load0 = loadavg()[0]!;
    const bandwidth = await memoryBandwidth(threads);
    log.info(`memory read bandwidth: ${bandwidth.wall.toFixed(1)} GB/s (cpu ${bandwidth.cpu.toFixed(1)} GB/s)`);
    const peer = await LlamaPeer.start({ node: args.node });
    const results: PeerResult[] = [];
    let info;
    try {
      info = await peer.info();
      for (const n of names) {
        const m = all[n]!;
        prepareModel(m, layers);
        for (const q of quants) results.push(await measurePeers(m, q, { threads, reps }, peer));
      }
    } finally {
      await peer.close();
    }
    const machine = `${cpus()[0]?.model ?? "unknown CPU"}, ${navigator.hardwareConcurrency} cores`;
    console.log(
      `${machine}; ${threads} threads both sides; llama.cpp ${info.llamaCppRelease.release} via node-llama-cpp ${info.nodeLlamaCpp} (${info.buildType}, gpu ${info.gpu}) on Node ${info.node}; ` +
        `memory read bandwidth ${bandwidth.wall.toFixed(1)} | ${bandwidth.cpu.toFixed(1)} GB/s (wall | cpu); ${reps} repetitions; load average ${load0.toFixed(1)} → ${loadavg()[0]!.toFixed(1)}`,
    );
    for (const r of results) console.log(`\n${table(r, bandwidth).join("\n")}`);
    const report: PeersReport = { machine, threads, bandwidthGBs: bandwidth, llama: info, results };
    console.log(JSON.stringify({ bench: "peers", ...report }));
  },
});
