// The memory plan on toy sizes: default budget from the machine, the split into slots and pages, and refusals.
import { describe, expect, test } from "bun:test";
import { defaultKvBudget, describeDefaultBudget, describeMemoryPlan, KvBudgetTooSmall, memoryForModels, planMemory } from "../../../src/engine/memory-plan.ts";
import type { Machine } from "../../../src/machine.ts";

const GiB = 2 ** 30;
const MiB = 2 ** 20;
const linux: Machine = { os: "linux", arch: "x64", cpuModel: "x", cores: 8, totalMemory: 64 * GiB, availableMemory: 40 * GiB };
const mac: Machine = { os: "darwin", arch: "arm64", cpuModel: "Apple M4 Pro", cores: 14, totalMemory: 48 * GiB, availableMemory: 3 * GiB };

// A 27B-like model: 64 KiB of KV per token, 150 MiB of GDN state per sequence, 16 GiB of weights at 4 bits.
const model27b = { fixedBytes: 16 * GiB, slotBytes: 150 * MiB, contextTokens: 262144, pageBytes: (t: number) => t * 64 * 1024 };

describe("memory plan", () => {
  test("default budget: Apple silicon counts three quarters of unified memory, elsewhere what is available", () => {
    expect(memoryForModels(mac)).toBe(36 * GiB);
    expect(memoryForModels(linux)).toBe(40 * GiB);
    expect(memoryForModels({ ...linux, availableMemory: 63 * GiB })).toBe(Math.floor(64 * GiB * 0.9));
    expect(defaultKvBudget(mac, 16 * GiB)).toBe(20 * GiB);
    expect(defaultKvBudget(mac, 40 * GiB)).toBe(0);
    expect(describeDefaultBudget(mac)).toContain("36.0 GiB for models (75% of 48.0 GiB unified memory)");
  });

  test("slots for twice the running sequences, pages for the rest; exact by construction", () => {
    const p = planMemory(model27b, { pageTokens: 64, maxSeqs: 16 }, mac);
    expect(p.budget).toBe(20 * GiB);
    expect(p.budgetSource).toBe("default");
    expect(p.nSlots).toBe(32);
    expect(p.pageBytes).toBe(4 * MiB);
    expect(p.nPages).toBe(Math.floor((20 * GiB - 32 * 150 * MiB) / (4 * MiB)));
    expect(p.stateBytes).toBe(p.nPages * p.pageBytes + p.nSlots * p.slotBytes);
    expect(p.stateBytes).toBeLessThanOrEqual(p.budget);
    expect(p.maxSeqs).toBe(16);
    expect(describeMemoryPlan(p)).toContain(`${p.nPages} pages × 64 tokens`);
  });

  test("a small budget gives slots at most half of it, and fewer sequences", () => {
    const p = planMemory(model27b, { kvBudget: 1 * GiB, pageTokens: 64, maxSeqs: 16 }, mac);
    expect(p.budgetSource).toBe("--kv-budget");
    expect(p.nSlots).toBe(3); // 512 MiB / 150 MiB
    expect(p.maxSeqs).toBe(3);
    expect(p.nPages).toBe(Math.floor((GiB - 3 * 150 * MiB) / (4 * MiB)));
  });

  test("pages never exceed what maxSeqs full contexts can use", () => {
    const small = { fixedBytes: 0, slotBytes: 1000, contextTokens: 256, pageBytes: (t: number) => t * 10 };
    const p = planMemory(small, { kvBudget: 1e9, pageTokens: 16, maxSeqs: 4 }, linux);
    expect(p.nPages).toBe(4 * 16);
    expect(p.nSlots).toBe(8);
  });

  test("a budget that cannot hold one sequence is refused with the sizes", () => {
    expect(() => planMemory(model27b, { kvBudget: 200 * MiB, pageTokens: 64, maxSeqs: 1 }, mac)).toThrow(KvBudgetTooSmall);
    expect(() => planMemory(model27b, { pageTokens: 64, maxSeqs: 1 }, { ...mac, totalMemory: 16 * GiB })).toThrow(/cannot hold one sequence/);
  });
});
