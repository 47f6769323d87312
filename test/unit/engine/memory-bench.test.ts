// The `splash bench memory` workloads run end to end on the toy model (plumbing and accounting; the timings mean
// nothing here).
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { admissionByKv, restartTtft, subagents } from "../../../src/engine/memory-bench.ts";
import { ToyModel, toyPrompt } from "./toy-runner.ts";

const tmp = mkdtempSync(join(tmpdir(), "splash-memory-bench-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const options = { pageTokens: 16, kvBudget: 4e6, maxStepTokens: 64, snapshotInterval: 128 };
const toy = () => new ToyModel({ contextTokens: 4096, kvBytesPerToken: 4, slotBytes: 4 });

test("restart: the prefix comes from the disk tier, with the cold run's output", async () => {
  const r = await restartTtft(toy(), { ...options, diskCache: { dir: tmp, budget: 1 << 20 } }, toyPrompt(300, 1), [toyPrompt(20, 2), toyPrompt(20, 3)], 4);
  expect(r).toMatchObject({ prefixTokens: 300, promptTokens: 320, cachedTokens: 288, outputsMatch: true });
  expect(r.diskReadBytes).toBeGreaterThan(0);
});

test("sub-agents: the shared prefix is computed once with the prefix cache, four times without", async () => {
  const r = await subagents(toy(), options, toyPrompt(300, 1), [4, 5, 6, 7].map((s) => toyPrompt(20, s)), 4);
  expect(r.outputsMatch).toBe(true);
  expect(r.shared.cached).toEqual([0, 288, 288, 288]);
  expect(r.shared.promptTokensComputed).toBe(320 + 3 * 32);
  expect(r.independent.promptTokensComputed).toBe(4 * 320);
});

test("admission: what each model's page size lets run at once, all completing", async () => {
  const small = new ToyModel({ contextTokens: 1024, kvBytesPerToken: 25 });
  const big = new ToyModel({ contextTokens: 1024, kvBytesPerToken: 100 });
  const budget = 8 * 17 * small.pageBytes(16) + 16 * small.slotBytes;
  const runs = await admissionByKv([{ kvType: "small", model: small }, { kvType: "big", model: big }], { ...options, maxStepTokens: 256 }, budget, 8, 256, 8);
  expect(runs.map((r) => [r.kvType, r.completed])).toEqual([["small", 8], ["big", 8]]);
  expect(runs[0]!.peakRunning).toBe(8);
  expect(runs[1]!.peakRunning).toBeLessThan(4);
});
