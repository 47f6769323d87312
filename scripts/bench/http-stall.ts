// What one request's heavy work does to everyone else, through the HTTP API: while stream A decodes, request B
// prefills a long prompt and request C compiles a grammar no request used before; meanwhile /health is polled.
// Reports A's gaps between SSE chunks (before B and C, and while they run), /health latency, the longest engine
// step (A's own pace while B's prompt runs beside it: the engine's decode-stall target), B's and C's time to their
// answers, with the process's CPU time. A never ends on its own (its end-of-turn tokens are banned by logit_bias).
//   bun scripts/bench/http-stall.ts [MODEL] [--prompt-tokens 32768] [--rounds 3]
// The clients run in a worker thread, as a separate program would. Ends with one JSON line per round.
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

type Job = { round: number; promptWords: number; endOfTurn: number[] };
type Observed = {
  gapsBefore: number[]; // A's gaps before B and C start
  gapsDuring: number[]; // A's gaps from B's and C's start until both have their first output
  health: number[]; // /health latencies in that window
  bDoneMs: number; // B's time to its answer (one token: its prefill)
  cDoneMs: number; // C's time to its whole answer (compile included)
};

const post = (url: string, body: unknown, signal?: AbortSignal) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body), signal });

// Reads an SSE response, calling onContent at each frame that carries output.
async function readStream(res: Response, onContent: () => void): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let nl = buffer.indexOf("\n\n"); nl >= 0; nl = buffer.indexOf("\n\n")) {
      const event = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 2);
      if (/"content":"[^"]/.test(event)) onContent();
    }
  }
}

function words(n: number, seed: number): string {
  const vocabulary = ["river", "stone", "maple", "copper", "lantern", "orbit", "velvet", "harbor", "quartz", "meadow", "signal", "thunder"];
  let s = seed;
  return Array.from({ length: n }, () => vocabulary[(s = (s * 1103515245 + 12345) % 2 ** 31) % vocabulary.length]).join(" ");
}

// ---- the clients (worker thread) ----

async function round(url: string, model: string, job: Job): Promise<Observed> {
  const chat = `${url}/v1/chat/completions`;
  const o: Observed = { gapsBefore: [], gapsDuring: [], health: [], bDoneMs: NaN, cDoneMs: NaN };
  let phase: "before" | "during" | "after" = "before";
  let last = 0;
  let aChunks = 0;
  const endA = new AbortController();
  const a = post(chat, { model, messages: [{ role: "user", content: "Write a long story about a lighthouse keeper." }], max_tokens: 100_000, temperature: 1, seed: job.round, stream: true, reasoning_effort: "none", logit_bias: Object.fromEntries(job.endOfTurn.map((t) => [t, -100])) }, endA.signal).then((res) =>
    readStream(res, () => {
      const t = performance.now();
      if (last > 0 && phase !== "after") (phase === "before" ? o.gapsBefore : o.gapsDuring).push(t - last);
      last = t;
      aChunks++;
    }),
  );
  while (aChunks < 40) await Bun.sleep(5);
  phase = "during";
  const t0 = performance.now();
  const b = post(chat, { model, messages: [{ role: "user", content: words(job.promptWords, 1000 + job.round) }], max_tokens: 1 })
    .then((res) => res.json())
    .then(() => (o.bDoneMs = performance.now() - t0));
  // a schema no request sent before: its grammar compiles cold
  const key = `field_${job.round}_${Math.random().toString(36).slice(2, 8)}`;
  const schema = { type: "object", properties: { [key]: { type: "array", items: { type: "object", properties: { name: { type: "string" }, size: { type: "integer" }, tags: { type: "array", items: { enum: ["a", "b", "c"] } } }, required: ["name", "size"] } } }, required: [key] };
  const c = post(chat, { model, messages: [{ role: "user", content: "List some files." }], max_tokens: 40, response_format: { type: "json_schema", json_schema: { name: "files", schema } } })
    .then((res) => res.json())
    .then(() => (o.cDoneMs = performance.now() - t0));
  let bcDone = false;
  void Promise.all([b, c]).then(() => (bcDone = true));
  while (!bcDone) {
    const t = performance.now();
    await fetch(`${url}/health`);
    o.health.push(performance.now() - t);
    await Bun.sleep(10);
  }
  phase = "after";
  endA.abort();
  await a.catch(() => {});
  return o;
}

if (!isMainThread) {
  const { url, model } = workerData as { url: string; model: string };
  parentPort!.on("message", async (job: Job) => parentPort!.postMessage(await round(url, model, job)));
} else {
  const { loadModel } = await import("../../src/models/load.ts");
  const { resolveModel } = await import("../../src/models/resolve.ts");
  const { createServer } = await import("../../src/server/server.ts");
  const { values, positionals } = parseArgs({ options: { "prompt-tokens": { type: "string", default: "32768" }, rounds: { type: "string", default: "3" } }, allowPositionals: true });
  const promptTokens = Number(values["prompt-tokens"]);
  const rounds = Number(values.rounds);
  const loaded = await loadModel(resolveModel(positionals[0] ?? "splash-tiny"));
  const server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat] });
  // the longest step of each round, from the engine's runner (the bench's view into the engine)
  const runner = (loaded.engine as unknown as { runner: { step: (b: unknown) => Promise<unknown> } }).runner;
  const step = runner.step.bind(runner);
  let longestStep = 0;
  runner.step = async (batch) => {
    const t = performance.now();
    try {
      return await step(batch);
    } finally {
      longestStep = Math.max(longestStep, performance.now() - t);
    }
  };
  // about 2.6 tokens per word of the generated text with Qwen's tokenizer
  const promptWords = Math.round(promptTokens / 2.6);
  const clients = new Worker(new URL(import.meta.url), { workerData: { url: server.url, model: loaded.chat.id } });
  const q = (xs: number[], p: number) => (xs.length ? [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(p * xs.length))]! : NaN);
  try {
    for (let r = 0; r < rounds; r++) {
      longestStep = 0;
      const cpu = process.cpuUsage();
      const t = performance.now();
      const load = loadavg()[0]!;
      const o = await new Promise<Observed>((resolve) => {
        clients.once("message", resolve);
        clients.postMessage({ round: r, promptWords, endOfTurn: [...loaded.chat.tokenizer.encodeWithAddedTokens("<|im_end|><|endoftext|>")] } satisfies Job);
      });
      const used = process.cpuUsage(cpu);
      const figures = {
        bench: "http-stall",
        model: loaded.chat.id,
        round: r + 1,
        load_average: +load.toFixed(2),
        prompt_words: promptWords,
        a_gap_p50_before_ms: +q(o.gapsBefore, 0.5).toFixed(1),
        a_gap_p50_during_ms: +q(o.gapsDuring, 0.5).toFixed(1),
        a_gap_max_during_ms: +Math.max(...o.gapsDuring).toFixed(1),
        longest_step_ms: +longestStep.toFixed(1),
        health_p50_ms: +q(o.health, 0.5).toFixed(2),
        health_p99_ms: +q(o.health, 0.99).toFixed(2),
        health_max_ms: +Math.max(...o.health).toFixed(2),
        health_polls: o.health.length,
        b_answer_ms: +o.bDoneMs.toFixed(0),
        c_answer_ms: +o.cDoneMs.toFixed(0),
        wall_s: +((performance.now() - t) / 1000).toFixed(1),
        cpu_s: +((used.user + used.system) / 1e6).toFixed(1),
      };
      console.log(
        `round ${r + 1}: A's gaps p50 ${figures.a_gap_p50_before_ms} ms before, ${figures.a_gap_p50_during_ms} ms during, longest ${figures.a_gap_max_during_ms} ms (longest step ${figures.longest_step_ms} ms); ` +
          `/health p50 ${figures.health_p50_ms} p99 ${figures.health_p99_ms} max ${figures.health_max_ms} ms (${figures.health_polls} polls); B answered ${figures.b_answer_ms} ms, C answered ${figures.c_answer_ms} ms; ${figures.cpu_s} CPU s in ${figures.wall_s} s`,
      );
      console.log(JSON.stringify(figures));
    }
  } finally {
    await clients.terminate();
    await server.stop();
    await loaded.close();
  }
}
