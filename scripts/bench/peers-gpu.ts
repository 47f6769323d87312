// llama.cpp's GPU builds (node-llama-cpp's Vulkan or CUDA prebuilt) on the Qwen3.8-27B layer shapes (random
// weights, bench decode's checkpoint) in the GGUF types the GPU comparison uses (Q4_0 and BF16): prefill tokens/s, decode
// tokens/s at 1K and 32K context, total decode over 4 and 16 streams, and decode as a fraction of the roofline
// (weight bytes per token ÷ a bandwidth given with --bandwidth-gbs, the H200's measured HBM figure). Run by
// scripts/bench/peers-h200.sh; `--gpu false` runs the same on the CPU build (to try it here).
//   bun scripts/bench/peers-gpu.ts --gpu vulkan|cuda|false [--layers 8] [--types q4_0,bf16] [--bandwidth-gbs 4300]
import { parseArgs } from "node:util";
import { join } from "node:path";
import { mkdirSync, existsSync } from "node:fs";
import { ensure27bShapes } from "../../src/bench/random-model.ts";
import { randomTokens } from "../../src/engine/serve-bench.ts";
import { exportGguf, ggufDecodeBytes, type ExportType } from "../../src/gguf/export.ts";
import { cacheDir } from "../../src/paths.ts";
import { LlamaPeer } from "../../src/bench/peers-client.ts";

const { values } = parseArgs({
  options: {
    gpu: { type: "string", default: "vulkan" },
    layers: { type: "string", default: "8" },
    types: { type: "string", default: "q4_0,bf16" },
    "bandwidth-gbs": { type: "string", default: "4300" },
    long: { type: "string", default: "32768" },
  },
});
const gpu = values.gpu === "false" ? false : (values.gpu as "vulkan" | "cuda");
const layers = Number(values.layers);
const long = Number(values.long);
const bandwidth = Number(values["bandwidth-gbs"]);
const dir = join(cacheDir(), "bench", `decode-qwen3.8-27b-shapes-${layers}l`);
ensure27bShapes(dir, layers);
const V = 248320;

const peer = await LlamaPeer.start({ gpu });
const info = await peer.info();
console.log(`llama.cpp ${info.llamaCppRelease.release} via node-llama-cpp ${info.nodeLlamaCpp}, build ${info.gpu || "cpu"} (${info.buildType}), Node ${info.node}; ${layers} layers of Qwen3.8-27B shapes`);
const rows: Record<string, unknown>[] = [];
for (const type of values.types!.split(",") as ExportType[]) {
  mkdirSync(join(cacheDir(), "bench", "peers"), { recursive: true });
  const gguf = join(cacheDir(), "bench", "peers", `qwen3.8-27b-shapes-${layers}l-${type}.gguf`);
  if (!existsSync(gguf)) exportGguf(dir, gguf, type);
  await peer.load({ model: gguf, contextSize: 16 * 1024 + long + 1024, sequences: 16, batchSize: 1024 });
  type T = { seconds: number; tokens?: number[] };
  const pre = await peer.request<T>({ op: "prefill", tokens: Array.from(randomTokens(1024, 1, V)) });
  const d1k = await peer.request<T>({ op: "decode", prompt: Array.from(randomTokens(1024, 2, V)), tokens: 33 });
  const dLong = await peer.request<T>({ op: "decode", prompt: Array.from(randomTokens(long, 3, V)), tokens: 33 });
  const streams = async (n: number) => {
    const r = await peer.request<{ tokens: number; seconds: number }>({ op: "streams", prompts: Array.from({ length: n }, (_, k) => Array.from(randomTokens(64, 10 + k, V))), tokens: 33 });
    return r.tokens / r.seconds;
  };
  const bytes = ggufDecodeBytes(dir, type);
  const row = {
    type,
    prefill1kTokensPerSecond: 1024 / pre.seconds,
    decode1kTokensPerSecond: 32 / d1k.seconds,
    decodeLongTokensPerSecond: 32 / dLong.seconds,
    streams4TokensPerSecond: await streams(4),
    streams16TokensPerSecond: await streams(16),
    bytesPerToken: bytes,
  };
  const roof = (row.decode1kTokensPerSecond * bytes) / 1e9 / bandwidth;
  console.log(
    `${type}: prefill ${row.prefill1kTokensPerSecond.toFixed(0)} tok/s; decode ${row.decode1kTokensPerSecond.toFixed(1)} tok/s at 1K, ${row.decodeLongTokensPerSecond.toFixed(1)} at ${long}; ` +
      `4 streams ${row.streams4TokensPerSecond.toFixed(1)}, 16 streams ${row.streams16TokensPerSecond.toFixed(1)} tok/s; ${(bytes / 1e9).toFixed(2)} GB/token = ${(100 * roof).toFixed(0)}% of ${bandwidth} GB/s`,
  );
  rows.push({ ...row, rooflineFraction: roof });
}
await peer.close();
console.log(JSON.stringify({ bench: "peers-gpu", gpu: gpu || "cpu", layers, long, bandwidthGBs: bandwidth, llama: info, rows }));
