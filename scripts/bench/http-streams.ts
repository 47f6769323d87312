// Concurrent streams through the HTTP API: tokens per second of 1 streaming chat completion, then of N at once, on
// a model served in this process as `splash serve` serves it (SSE over a loopback socket), and the ratio.
//   bun scripts/bench/http-streams.ts [MODEL] [--streams 4] [--tokens 200] [--rounds 3] [--threads N] [--draft auto] [--seeded]
// Each request asks for --tokens tokens at temperature 1 (with --seeded, each with its own seed: a seeded sequence
// speculates by its own acceptance only, src/engine/speculation.ts), its end-of-turn tokens biased out
// (logit_bias -100), so every stream writes all of them and N streams decode together from start to end (a stream
// that ended early would leave the others to finish alone, and the round would time fewer streams than asked). The clients run in a worker thread, as a separate program would: the server's thread
// does only the server's work. Beside each rate, CPU time per 1000 tokens: the process's (every thread: the step's,
// the server's, the clients') and the server thread's alone; a machine shared with other work changes them less
// than wall time. Ends with one JSON line.
import { loadavg } from "node:os";
import { parseArgs } from "node:util";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";

type Round = { streams: number; seed: number };
type ClientResult = { tokens: number; ms: number };

// ---- the clients (worker thread) ----

// One streamed completion: its completion tokens.
async function stream(url: string, model: string, maxTokens: number, seed: number | undefined, logitBias: Record<string, number>): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: maxTokens,
      temperature: 1,
      ...(seed !== undefined && { seed }),
      logit_bias: logitBias,
      reasoning_effort: "none",
      messages: [{ role: "user", content: "Write a Python module with ten small utility functions, each with a docstring." }],
    }),
  });
  let tokens = 0;
  let buffer = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    buffer += decoder.decode(chunk, { stream: true });
    for (let nl = buffer.indexOf("\n\n"); nl >= 0; nl = buffer.indexOf("\n\n")) {
      const event = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 2);
      const data = event.startsWith("data: ") ? event.slice(6) : "";
      if (data && data !== "[DONE]") tokens = (JSON.parse(data) as { usage?: { completion_tokens: number } }).usage?.completion_tokens ?? tokens;
    }
  }
  return tokens;
}

if (!isMainThread) {
  const { url, model, maxTokens, endTokens, seeded } = workerData as { url: string; model: string; maxTokens: number; endTokens: number[]; seeded: boolean };
  const logitBias = Object.fromEntries(endTokens.map((t) => [String(t), -100]));
  parentPort!.on("message", async (r: Round) => {
    const t = performance.now();
    const counts = await Promise.all(Array.from({ length: r.streams }, (_, i) => stream(url, model, maxTokens, seeded ? r.seed + i : undefined, logitBias)));
    parentPort!.postMessage({ tokens: counts.reduce((a, b) => a + b, 0), ms: performance.now() - t } satisfies ClientResult);
  });
} else {
  const { loadModel } = await import("../../src/models/load.ts");
  const { resolveModel } = await import("../../src/models/resolve.ts");
  const { createServer } = await import("../../src/server/server.ts");
  const { DRAFT_CHOICES } = await import("../../src/models/drafter.ts");
  const { END_OF_TURN } = await import("../../src/chat/generate.ts");

  const { values, positionals } = parseArgs({ options: { streams: { type: "string", default: "4" }, tokens: { type: "string", default: "200" }, rounds: { type: "string", default: "3" }, threads: { type: "string", default: "0" }, draft: { type: "string", default: "auto" }, seeded: { type: "boolean", default: false } }, allowPositionals: true });
  const streams = Number(values.streams);
  const maxTokens = Number(values.tokens);
  const rounds = Number(values.rounds);
  const draft = DRAFT_CHOICES.find((c) => c === values.draft);
  if (!draft) throw new Error(`--draft ${values.draft}: expected one of ${DRAFT_CHOICES.join(", ")}`);
  const loaded = await loadModel(resolveModel(positionals[0] ?? "splash-tiny"), { threads: Number(values.threads), draft }); // 0: every core
  const endTokens = END_OF_TURN.map((t) => loaded.chat.tokenizer.encodeWithAddedTokens(t)).flatMap((ids) => (ids.length === 1 ? [ids[0]!] : [])); // added tokens only
  const server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat] });
  const clients = new Worker(new URL(import.meta.url), { workerData: { url: String(server.url).replace(/\/$/, ""), model: loaded.chat.id, maxTokens, endTokens, seeded: values.seeded } });

  type Rate = { tokS: number; cpuMsPer1k: number; serverCpuMsPer1k: number };
  const rate = async (n: number, seed: number): Promise<Rate> => {
    const cpu = process.cpuUsage();
    const thread = process.threadCpuUsage();
    const r = await new Promise<ClientResult>((resolve) => {
      clients.once("message", resolve);
      clients.postMessage({ streams: n, seed } satisfies Round);
    });
    if (r.tokens < n * maxTokens) console.log(`  (${n} stream${n > 1 ? "s" : ""} wrote ${r.tokens} of ${n * maxTokens} tokens)`);
    const used = process.cpuUsage(cpu);
    const own = process.threadCpuUsage(thread);
    return { tokS: r.tokens / (r.ms / 1000), cpuMsPer1k: (used.user + used.system) / r.tokens, serverCpuMsPer1k: (own.user + own.system) / r.tokens };
  };

  try {
    await rate(1, 0); // warm up
    const load = loadavg()[0]!;
    const one: Rate[] = [];
    const many: Rate[] = [];
    const cpu = (x: Rate) => `${x.cpuMsPer1k.toFixed(0)} CPU ms per 1000 tokens, ${x.serverCpuMsPer1k.toFixed(0)} on the server thread`;
    for (let r = 0; r < rounds; r++) {
      one.push(await rate(1, 1000 * r + 1));
      many.push(await rate(streams, 1000 * r + 1));
      const [a, b] = [one[r]!, many[r]!];
      console.log(`round ${r + 1}: 1 stream ${a.tokS.toFixed(1)} tok/s (${cpu(a)}); ${streams} streams ${b.tokS.toFixed(1)} tok/s (${cpu(b)}): ${(b.tokS / a.tokS).toFixed(2)}x`);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const oneTokS = median(one.map((r) => r.tokS));
    const manyTokS = median(many.map((r) => r.tokS));
    const figures = {
      bench: "http-streams",
      model: loaded.chat.id,
      streams,
      max_tokens: maxTokens,
      rounds,
      threads: loaded.model.info.threads,
      draft: loaded.draft,
      seeded: values.seeded,
      load_average: +load.toFixed(2),
      one_tok_s: +oneTokS.toFixed(1),
      many_tok_s: +manyTokS.toFixed(1),
      ratio: +(manyTokS / oneTokS).toFixed(2),
      one_cpu_ms_per_1k: +median(one.map((r) => r.cpuMsPer1k)).toFixed(0),
      many_cpu_ms_per_1k: +median(many.map((r) => r.cpuMsPer1k)).toFixed(0),
      one_server_cpu_ms_per_1k: +median(one.map((r) => r.serverCpuMsPer1k)).toFixed(0),
      many_server_cpu_ms_per_1k: +median(many.map((r) => r.serverCpuMsPer1k)).toFixed(0),
    };
    console.log(`1 stream ${figures.one_tok_s} tok/s, ${streams} streams ${figures.many_tok_s} tok/s in all: ${figures.ratio}x (median of ${rounds}, load average ${figures.load_average})`);
    console.log(JSON.stringify(figures));
  } finally {
    await clients.terminate();
    await server.stop();
    await loaded.close();
  }
}
