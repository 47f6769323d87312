// llama.cpp, driven through node-llama-cpp as one of its users would, behind a JSON-lines protocol on stdin/stdout:
// the peer side of the GGUF parity tests and of `splash bench peers`. It runs under Node (node-llama-cpp ships a
// Node addon; Bun does not load it), so Splash's Bun process spawns it (src/bench/peers-client.ts):
//
//   node src/bench/peers-llama.mjs --modules DIR [--gpu false|vulkan|cuda]
//
// DIR holds node_modules/node-llama-cpp and its prebuilt build for --gpu: installNodeLlamaCpp (src/bench/
// node-llama-cpp.ts) installs them on first use and returns it. node-llama-cpp is not a dependency of the project.
//
// Requests, one JSON object per line; each gets one JSON line back ({ok: true, ...} or {ok: false, error}):
//   {op: "load", model, threads, contextSize, sequences, batchSize, exact}
//       exact: flash attention off and an F32 KV cache (llama.cpp's most exact settings, for parity)
//   {op: "logprobs", tokens, vocab}     log-probabilities after every position, teacher-forced, on a fresh sequence:
//                                       {vocab, logprobs: base64 f32 [n][vocab]} (−Infinity where llama.cpp gives 0)
//   {op: "prefill", tokens}             seconds to evaluate the tokens on a fresh sequence
//                                       (every timing also comes as cpuSeconds: this process's CPU time)
//   {op: "decode", prompt, tokens}      prefill prompt (untimed), then greedy-generate `tokens` tokens: seconds
//                                       for all but the first, the tokens produced
//   {op: "ttft", prefix, suffixes}      prefix evaluated once and checkpointed (what LlamaChatSession does at the
//                                       start of a chat sequence), then for each suffix: adapt the sequence to
//                                       prefix + suffix (reusing the prefix state) and time until the first
//                                       generated token: {seconds: [...], reused: [...]}
//   {op: "streams", prompts, tokens}    one sequence per prompt in the same context, generating concurrently
//                                       (node-llama-cpp batches their tokens into one llama_decode):
//                                       {tokens, seconds} while all streams were decoding
//   {op: "tokenize", text}              llama.cpp's tokens of plain text (added-token strings stay text)
//   {op: "info"}                        versions and build
// Logs go to stderr.
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const arg = (name) => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const gpuArg = arg("--gpu") ?? "false";
const gpu = gpuArg === "false" ? false : gpuArg;
const modules = arg("--modules");
if (!modules) throw new Error("--modules DIR: the node-llama-cpp install to use (installNodeLlamaCpp in src/bench/node-llama-cpp.ts)");
// resolved from DIR as if a module there imported it
const entry = createRequire(join(modules, "package.json")).resolve("node-llama-cpp");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

const llama = await getLlama({ gpu, build: "never", logLevel: LlamaLogLevel.error });
let model = null;
let context = null;

const now = () => performance.now() / 1000;
// CPU seconds of this process (every thread): on a shared machine, wall time measures the neighbours too
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

function freshSequence() {
  return context.getSequence();
}

async function load(req) {
  if (context) await context.dispose();
  if (model) await model.dispose();
  model = await llama.loadModel({ modelPath: req.model, gpuLayers: gpu === false ? 0 : "max", useMmap: true });
  const exact = req.exact === true;
  context = await model.createContext({
    contextSize: req.contextSize ?? 4096,
    sequences: req.sequences ?? 1,
    batchSize: req.batchSize ?? 512,
    threads: req.threads ?? 0,
    flashAttention: exact ? false : "auto",
    ...(exact ? { experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" } : {}),
  });
  return { trainContextSize: model.trainContextSize, contextSize: context.contextSize };
}

async function logprobs(req) {
  const seq = freshSequence();
  try {
    const input = req.tokens.map((t) => [t, { generateNext: { probabilities: true } }]);
    const outs = await seq.controlledEvaluate(input);
    const vocab = req.vocab;
    const out = new Float32Array(req.tokens.length * vocab).fill(-Infinity);
    outs.forEach((o, i) => {
      for (const [tok, p] of o.next.probabilities) out[i * vocab + tok] = Math.log(p);
    });
    return { vocab, logprobs: Buffer.from(out.buffer).toString("base64") };
  } finally {
    seq.dispose();
  }
}

async function prefill(req) {
  const seq = freshSequence();
  try {
    const t0 = now();
    const c0 = cpu();
    await seq.evaluateWithoutGeneratingNewTokens(req.tokens);
    return { seconds: now() - t0, cpuSeconds: cpu() - c0 };
  } finally {
    seq.dispose();
  }
}

async function decode(req) {
  const seq = freshSequence();
  try {
    if (req.prompt.length > 1) await seq.evaluateWithoutGeneratingNewTokens(req.prompt.slice(0, -1));
    const produced = [];
    let t1 = 0;
    let c1 = 0;
    for await (const token of seq.evaluate(req.prompt.slice(-1), { temperature: 0 })) {
      produced.push(token);
      if (produced.length === 1) [t1, c1] = [now(), cpu()];
      if (produced.length >= req.tokens) break;
    }
    return { seconds: now() - t1, cpuSeconds: cpu() - c1, tokens: produced };
  } finally {
    seq.dispose();
  }
}

async function ttft(req) {
  const seq = freshSequence();
  try {
    await seq.evaluateWithoutGeneratingNewTokens(req.prefix);
    await seq.takeCheckpoint();
    const seconds = [];
    const cpuSeconds = [];
    const reused = [];
    for (const suffix of req.suffixes) {
      const prompt = [...req.prefix, ...suffix];
      const t0 = now();
      const c0 = cpu();
      await seq.adaptStateToTokens(prompt, false);
      reused.push(seq.nextTokenIndex);
      const rest = prompt.slice(seq.nextTokenIndex);
      for await (const token of seq.evaluate(rest, { temperature: 0 })) {
        void token;
        break;
      }
      seconds.push(now() - t0);
      cpuSeconds.push(cpu() - c0);
    }
    return { seconds, cpuSeconds, reused };
  } finally {
    seq.dispose();
  }
}

async function streams(req) {
  const seqs = req.prompts.map(() => context.getSequence());
  try {
    const at = req.prompts.map(() => []);
    const cpuAt = req.prompts.map(() => []);
    await Promise.all(
      seqs.map(async (seq, i) => {
        for await (const token of seq.evaluate(req.prompts[i], { temperature: 0 })) {
          void token;
          at[i].push(now());
          cpuAt[i].push(cpu());
          if (at[i].length >= req.tokens) break;
        }
      }),
    );
    const first = at.map((a) => a[0]);
    const start = Math.max(...first);
    const end = Math.min(...at.map((a) => a.at(-1)));
    const tokens = at.reduce((n, a) => n + a.filter((t) => t > start && t <= end).length, 0);
    const cpuStart = cpuAt[first.indexOf(start)][0];
    const last = at.map((a) => a.at(-1));
    const cpuEnd = cpuAt[last.indexOf(end)].at(-1);
    return { tokens, seconds: end - start, cpuSeconds: cpuEnd - cpuStart };
  } finally {
    for (const s of seqs) s.dispose();
  }
}

function tokenize(req) {
  return { tokens: Array.from(model.tokenize(req.text, false)) };
}

function info() {
  const pkg = JSON.parse(readFileSync(join(modules, "node_modules", "node-llama-cpp", "package.json"), "utf8"));
  return {
    nodeLlamaCpp: pkg.version,
    llamaCppRelease: llama.llamaCppRelease,
    gpu: llama.gpu,
    buildType: llama.buildType,
    node: process.version,
    cpuMathCores: llama.cpuMathCores,
  };
}

const ops = { load, logprobs, prefill, decode, ttft, streams, tokenize, info };

const rl = createInterface({ input: process.stdin });
for await (const line of rl) {
  if (!line.trim()) continue;
  let reply;
  try {
    const req = JSON.parse(line);
    const op = ops[req.op];
    if (!op) throw new Error(`unknown op ${req.op}`);
    reply = { ok: true, ...(await op(req)) };
  } catch (e) {
    reply = { ok: false, error: String(e?.stack ?? e) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
if (context) await context.dispose();
if (model) await model.dispose();
await llama.dispose();
