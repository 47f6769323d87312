// `splash doctor --plan`: how many sequences of a context fit beside a model's weights, drafter and runtime reserve,
// from the spec's memory plan (no download needed). The goal: 16 × 32K for Qwen3.8-27B at 4-bit with an
// int8 KV cache in 48 GB.
import { describe, expect, test } from "bun:test";
import { planSequences, RUNTIME_RESERVE } from "../../../src/models/fit.ts";
import { findSpec } from "../../../src/models/registry.ts";
import { isHubSpec, type HubModelSpec } from "../../../src/models/spec.ts";
import { splash } from "../../helpers/cli.ts";

const GiB = 2 ** 30;
const spec = findSpec("qwen3.8-27b") as HubModelSpec;

describe("planSequences", () => {
  test("Qwen3.8-27B, q4 + MTP, int8 KV, 32K in 48 GiB: the parts add up, and 16 fit (21)", () => {
    expect(isHubSpec(spec)).toBe(true);
    const p = planSequences(spec, { memory: 48 * GiB, context: 32768, kvType: "int8", level: "q4", draft: "mtp" });
    const m = spec.memory!;
    expect(p.fixed).toEqual({ weights: m.fixed.q4.none, drafter: m.fixed.q4.mtp! - m.fixed.q4.none, reserve: RUNTIME_RESERVE, total: m.fixed.q4.mtp! + RUNTIME_RESERVE });
    // 16 attention layers × K and V × 4 heads × 8 groups of (32 int8 + f16 scale) per token
    expect(p.perSequence.kv).toBe(32768 * 16 * 2 * 4 * 8 * 34);
    expect(p.perSequence.drafterKv).toBe(32768 * m.mtpKvBytesPerToken.int8);
    expect(p.perSequence.state).toBe(m.stateBytesPerSequence + 4 * 5120);
    expect(p.perSequence.snapshot).toBe(p.perSequence.state);
    expect(p.sequences).toBe(Math.floor((48 * GiB - p.fixed.total) / p.perSequence.total));
    expect(p.sequences).toBeGreaterThanOrEqual(16);
    expect(p.sequences).toBe(21);
  });

  test("the same with an f32 cache: 6; with a 48 GB Mac's default 36 GiB for models: 13 (int8), 4 (f32)", () => {
    const base = { memory: 48 * GiB, context: 32768, level: "q4", draft: "mtp" } as const;
    expect(planSequences(spec, { ...base, kvType: "f32" }).sequences).toBe(6);
    expect(planSequences(spec, { ...base, memory: 36 * GiB, kvType: "int8" }).sequences).toBe(13);
    expect(planSequences(spec, { ...base, memory: 36 * GiB, kvType: "f32" }).sequences).toBe(4);
    expect(planSequences(spec, { ...base, memory: 36 * GiB, kvType: "int8", level: "mlx-4bit", draft: "none" }).sequences).toBe(15);
  });

  test("a context is held in whole pages; nothing fits when the weights do not", () => {
    const a = planSequences(spec, { memory: 48 * GiB, context: 1, kvType: "int8", level: "q4", draft: "none" });
    expect(a.perSequence.kv).toBe(64 * spec.memory!.kvBytesPerToken.int8);
    expect(planSequences(spec, { memory: 8 * GiB, context: 32768, kvType: "int8", level: "q4", draft: "none" }).sequences).toBe(0);
  });

  test("a drafter the weights do not carry is refused (MLX checkpoints have no MTP layer)", () => {
    expect(() => planSequences(spec, { memory: 48 * GiB, context: 32768, kvType: "int8", level: "mlx-4bit", draft: "mtp" })).toThrow("has no MTP drafter at mlx-4bit");
  });
});

describe("splash doctor --plan", () => {
  test("JSON for the goal's question, without the model downloaded", async () => {
    const r = await splash(["doctor", "--plan", "qwen3.8-27b", "--memory", "48G", "--context", "32K", "--json"], { env: { HF_HUB_CACHE: "/nonexistent" } });
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out).toMatchObject({ model: "qwen3.8-27b", level: "q4", draft: "mtp", kvType: "int8", context: 32768, memory: 48 * GiB, sequences: 21, sequencesWithF32Kv: 6 });
  });

  test("text: the plan, the fixed part, a sequence and what fits; auto picks the drafter the weights carry", async () => {
    const r = await splash(["doctor", "--plan", "qwen3.8-27b", "--memory", "36G", "--weights", "mlx-4bit"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("qwen3.8-27b: mlx-4bit weights, no drafter, int8 KV, 32K-token sequences, in 36.0 GiB for models (--memory)");
    expect(r.stdout).toMatch(/fits {7}15 sequences of 32K at once .*; with f32 KV: 4/);
  });

  test("wrong input exits 2 naming the option", async () => {
    for (const [args, says] of [
      [["--plan", "splash-tiny"], "no supported model by that name has a memory plan"],
      [["--plan", "qwen3.8-27b", "--context", "lots"], "--context"],
      [["--plan", "qwen3.8-27b", "--memory", "much"], "--memory"],
      [["--memory", "48G"], "--memory goes with --plan MODEL"],
    ] as const) {
      const r = await splash(["doctor", ...args]);
      expect({ args, code: r.code, says: r.stderr.includes(says) }).toEqual({ args, code: 2, says: true });
    }
  });
});
