// Concurrent streams through the HTTP API: tokens per second of 1 streaming chat completion, then of N at once, on
// a model served in this process as `splash serve` serves it (SSE over a loopback socket), and the ratio.
//   bun scripts/bench/http-streams.ts [MODEL] [--streams 4] [--tokens 200] [--rounds 3]
// Each request asks for --tokens tokens at temperature 1 with a different seed; a stream that ends early counts the
// tokens it wrote (usage). Ends with one JSON line.
import { parseArgs } from "node:util";
import { loadModel } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { createServer } from "../../src/server/server.ts";

const { values, positionals } = parseArgs({ options: { streams: { type: "string", default: "4" }, tokens: { type: "string", default: "200" }, rounds: { type: "string", default: "3" } }, allowPositionals: true });
const streams = Number(values.streams);
const maxTokens = Number(values.tokens);
const rounds = Number(values.rounds);
const loaded = await loadModel(resolveModel(positionals[0] ?? "splash-tiny"));
const server = createServer({ host: "127.0.0.1", port: 0, models: [loaded.chat] });

// One streamed completion: its completion tokens.
async function stream(seed: number): Promise<number> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: loaded.chat.id,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: maxTokens,
      temperature: 1,
      seed,
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

async function rate(n: number, round: number): Promise<number> {
  const t = performance.now();
  const counts = await Promise.all(Array.from({ length: n }, (_, i) => stream(1000 * round + i + 1)));
  return counts.reduce((a, b) => a + b, 0) / ((performance.now() - t) / 1000);
}

try {
  await stream(0); // warm up
  const one: number[] = [];
  const many: number[] = [];
  for (let r = 0; r < rounds; r++) {
    one.push(await rate(1, r));
    many.push(await rate(streams, r));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
  const figures = { bench: "http-streams", model: loaded.chat.id, streams, max_tokens: maxTokens, rounds, one_tok_s: +median(one).toFixed(1), many_tok_s: +median(many).toFixed(1), ratio: +(median(many) / median(one)).toFixed(2) };
  console.log(`1 stream ${figures.one_tok_s} tok/s, ${streams} streams ${figures.many_tok_s} tok/s in all: ${figures.ratio}x (median of ${rounds})`);
  console.log(JSON.stringify(figures));
} finally {
  await server.stop();
  await loaded.close();
}
