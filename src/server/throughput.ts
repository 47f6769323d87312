// Tokens per second of each model over the last minutes, for the page's chart: the engine's cumulative counts
// (EngineStats.promptTokensComputed, generatedTokens) sampled at a fixed interval, kept as rates in a ring.
import type { ChatModel } from "../chat/ir.ts";

// Rates over each interval, oldest first, at most `capacity` of them; prompt = prefill (prefix-cache hits left
// out), generated = output.
export type ThroughputSeries = { intervalSeconds: number; capacity: number; prompt: number[]; generated: number[] };

type Last = { at: number; prompt: number; generated: number };

export class Throughput {
  private last = new Map<string, Last>();
  private rates = new Map<string, { prompt: number[]; generated: number[] }>();

  constructor(
    readonly intervalMs: number,
    readonly samples: number,
  ) {}

  // Records each model's counts at `now` (ms) and the rates since the previous sample.
  sample(models: readonly ChatModel[], now = performance.now()): void {
    for (const m of models) {
      const s = m.stats();
      const current = { at: now, prompt: s.promptTokensComputed, generated: s.generatedTokens };
      const prev = this.last.get(m.id);
      this.last.set(m.id, current);
      if (!prev || now <= prev.at) continue;
      const seconds = (now - prev.at) / 1000;
      const r = this.rates.get(m.id) ?? { prompt: [], generated: [] };
      r.prompt.push((current.prompt - prev.prompt) / seconds);
      r.generated.push((current.generated - prev.generated) / seconds);
      if (r.prompt.length > this.samples) r.prompt.shift(), r.generated.shift();
      this.rates.set(m.id, r);
    }
  }

  series(id: string): ThroughputSeries {
    const r = this.rates.get(id);
    return { intervalSeconds: this.intervalMs / 1000, capacity: this.samples, prompt: [...(r?.prompt ?? [])], generated: [...(r?.generated ?? [])] };
  }

  // Samples every intervalMs until the returned function is called; the timer never keeps the process alive.
  start(models: readonly ChatModel[]): () => void {
    this.sample(models);
    const timer = setInterval(() => this.sample(models), this.intervalMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}
