// The `splash bench serve` workloads run end to end on the toy model (plumbing and accounting; the timings mean
// nothing here).
import { describe, expect, test } from "bun:test";
import { agentTurns, decodeStall, decodeStreams, tightBudget } from "../../../src/engine/serve-bench.ts";
import { ToyModel } from "./toy-runner.ts";

const options = { pageTokens: 16, kvBudget: 4e6, maxStepTokens: 64, snapshotInterval: 128 };

describe("serve bench workloads on the toy", () => {
  test("agent turns: the cached prefix grows turn by turn and outputs match the uncached run", async () => {
    const turns = await agentTurns(new ToyModel({ contextTokens: 4096 }), options, { systemTokens: 200, turnTokens: 40, outputTokens: 4, targetPrefix: 300, missTurns: "all" });
    expect(turns[0]!.cachedTokens).toBe(0);
    for (let i = 1; i < turns.length; i++) {
      expect(turns[i]!.cachedTokens).toBeGreaterThan(turns[i - 1]!.cachedTokens);
      // Resumes from the last block boundary before the previous prompt's end.
      expect(turns[i]!.cachedTokens).toBe(Math.floor((turns[i - 1]!.promptTokens - 1) / 16) * 16);
    }
    expect(turns.at(-1)!.cachedTokens).toBeGreaterThanOrEqual(300);
  });

  test("streams, stall and a tight budget", async () => {
    const model = new ToyModel({ contextTokens: 4096, stepDelayMs: 1 });
    const four = await decodeStreams(model, options, 4, 8, 20);
    expect(four.tokens).toBeGreaterThan(40);
    const stall = await decodeStall(model, options, 2, 300);
    expect(stall.maxStepTokens).toBe(64);
    expect(stall.maxGapDuringPrefillMs).toBeGreaterThan(0);
    const tight = await tightBudget(new ToyModel({ contextTokens: 1024 }), { ...options, maxStepTokens: 256 }, { requests: 16, contextTokens: 1024, reserveAdmits: 9, outputTokens: 8 });
    expect(tight.reserveAdmits).toBe(9);
    expect(tight.completed).toBe(16);
    expect(tight.peakRunning).toBe(16);
    expect(tight.peakSequenceBytes).toBeLessThanOrEqual(tight.budgetBytes);
  });
});
