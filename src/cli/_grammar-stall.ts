// For `splash bench grammar --model`: how long a grammar compile holds up the other streams of a served model.
// Grammars compile in worker threads (src/engine/grammar/grammar-pool.ts), so a new request's compile should cost
// the running stream nothing but a share of the CPU. A free-text stream is generated; at its `at`-th token a
// request with `schema` arrives (its grammar not compiled yet), later the same request again (compiled, from the
// cache). For each, the stream's largest gap between tokens from that request's arrival to its admission, and the
// arrival-to-admission time itself.
import type { Conversation, GenerationOptions, ResponseFormat } from "../chat/ir.ts";
import { loadModel } from "../models/load.ts";
import type { ResolvedModel } from "../models/resolve.ts";
import type { LoadFlags } from "./_load-flags.ts";

export type StallFigures = { streamGapP50Ms: number; cold: { maxGapMs: number; admissionMs: number }; cached: { maxGapMs: number; admissionMs: number } };

const at = 20; // the stream's token at which the cold request arrives; the cached one comes 30 tokens later

export async function compileStall(resolved: ResolvedModel, schema: Record<string, unknown>, flags: LoadFlags): Promise<StallFigures | null> {
  const loaded = await loadModel(resolved, flags);
  try {
    const chat = loaded.chat;
    const conversation = (responseFormat: ResponseFormat): Conversation => ({
      messages: [{ role: "user", content: [{ type: "text", text: "Write a Python function that merges two sorted lists." }] }],
      tools: [],
      toolChoice: "auto",
      parallelToolCalls: true,
      thinking: { enabled: false },
      responseFormat,
    });
    const options = (seed: number, maxTokens: number): GenerationOptions => ({
      maxTokens,
      stop: [],
      sampling: { temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed },
      signal: new AbortController().signal,
    });
    // The first grammar worker prepares the vocabulary after load: a first constrained request waits for it here, so
    // only the compile is timed.
    for await (const _ of chat.generate(conversation({ type: "json_schema", schema: { const: 1 } }), options(0, 4)));

    const gaps: { at: number; ms: number }[] = [];
    const arrivals: { start: number; admitted: number }[] = [];
    const arrive = async (seed: number) => {
      const a = { start: performance.now(), admitted: 0 };
      arrivals.push(a);
      for await (const e of chat.generate(conversation({ type: "json_schema", schema }), options(seed, 1))) {
        if (e.type === "start") a.admitted = performance.now();
      }
    };
    const pending: Promise<void>[] = [];
    let last = performance.now();
    for await (const e of chat.generate(conversation({ type: "text" }), options(1, at + 200))) {
      if (e.type !== "content" && e.type !== "reasoning" && e.type !== "tool_call_delta") continue;
      const now = performance.now();
      gaps.push({ at: now, ms: now - last });
      last = now;
      if (gaps.length === at) pending.push(arrive(2));
      if (gaps.length === at + 30) pending.push(arrive(3));
    }
    await Promise.all(pending);
    if (arrivals.length < 2) return null; // the stream ended too soon (a model that stops early)
    const during = (a: { start: number; admitted: number }) => {
      const inside = gaps.filter((g) => g.at >= a.start && g.at <= a.admitted + 1).map((g) => g.ms);
      return { maxGapMs: inside.length ? Math.max(...inside) : 0, admissionMs: a.admitted - a.start };
    };
    const before = gaps.slice(1, at).map((g) => g.ms).sort((x, y) => x - y);
    return { streamGapP50Ms: before[before.length >> 1] ?? 0, cold: during(arrivals[0]!), cached: during(arrivals[1]!) };
  } finally {
    await loaded.close();
  }
}
