// The page's figures that keep history: tokens per second (rates between samples, a bounded ring) and the last
// generations (newest first, the oldest dropped past capacity).
import { describe, expect, test } from "bun:test";
import type { ChatModel } from "../../../src/chat/ir.ts";
import type { EngineStats } from "../../../src/engine/types.ts";
import { RecentGenerations, type FinishedGeneration } from "../../../src/server/recent-generations.ts";
import { Throughput } from "../../../src/server/throughput.ts";

function counting(id: string) {
  const counts = { prompt: 0, generated: 0 };
  const stats = (): EngineStats => ({ running: 0, queued: 0, stateBytesInUse: 0, stateBytesBudget: 0, prefixCacheHitTokens: 0, promptTokensComputed: counts.prompt, generatedTokens: counts.generated });
  return { model: { id, stats } as unknown as ChatModel, counts };
}

describe("Throughput", () => {
  test("rates between samples per model, oldest first, at most `samples` of them", () => {
    const a = counting("a");
    const b = counting("b");
    const t = new Throughput(2000, 3);
    t.sample([a.model, b.model], 0);
    expect(t.series("a")).toEqual({ intervalSeconds: 2, capacity: 3, prompt: [], generated: [] });
    for (const [at, prompt, generated] of [
      [2000, 100, 10],
      [4000, 100, 30],
      [5000, 300, 30], // a late timer: the rate is over the time that passed
      [7000, 300, 50],
    ] as const) {
      a.counts.prompt = prompt;
      a.counts.generated = generated;
      t.sample([a.model, b.model], at);
    }
    expect(t.series("a")).toEqual({ intervalSeconds: 2, capacity: 3, prompt: [0, 200, 0], generated: [10, 0, 10] });
    expect(t.series("b").generated).toEqual([0, 0, 0]);
    expect(t.series("unknown")).toEqual({ intervalSeconds: 2, capacity: 3, prompt: [], generated: [] });
  });

  test("start() samples until stopped", async () => {
    const a = counting("a");
    const t = new Throughput(10, 100);
    const stop = t.start([a.model]);
    a.counts.generated = 5;
    await Bun.sleep(35);
    stop();
    const n = t.series("a").generated.length;
    expect(n).toBeGreaterThanOrEqual(2);
    await Bun.sleep(30);
    expect(t.series("a").generated.length).toBe(n);
  });
});

describe("RecentGenerations", () => {
  const gen = (i: number): FinishedGeneration => ({ at: i, surface: "chat", model: "m", outcome: "stop", promptTokens: i, cachedPromptTokens: 0, completionTokens: 1, ttftMs: 1, durationMs: 2 });

  test("newest first; past capacity the oldest go", () => {
    const r = new RecentGenerations(3);
    expect(r.list()).toEqual([]);
    r.add(gen(1));
    r.add(gen(2));
    expect(r.list().map((g) => g.at)).toEqual([2, 1]);
    r.add(gen(3));
    expect(r.list().map((g) => g.at)).toEqual([3, 2, 1]);
    for (let i = 4; i <= 8; i++) r.add(gen(i));
    expect(r.list().map((g) => g.at)).toEqual([8, 7, 6]);
  });
});
