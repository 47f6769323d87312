// KV cache types end to end. The parity bound `--kv-type auto` relies on (src/bench/kv-parity.ts), checked on
// shorter sequences than `splash bench kv` measures (BENCHMARKS.md has 4K and 16K): splash-tiny on the mixed agent
// conversation and the dense fixture on random tokens, for f16 and int8. The MoE fixture holds the argmax part only:
// its random router sits near ties, where any perturbation of the attention output (f16 too) flips an expert and
// moves a log-probability by more than the bound (why auto keeps f32 for the MoE model, BENCHMARKS.md). The Vulkan
// backend's f16 and int8 caches (lavapipe here) hold the same bound against its own f32 cache. And the flag: it takes
// effect on both backends (f16 and int8 logits differ from f32 ones, by little), and auto gives a model's measured type
// (int8 for splash-tiny) on the GPU too. A backend without a type refuses it: test/unit/models/kv-type.test.ts.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KV_PARITY_BOUND, kvParity, withinBound } from "../../src/bench/kv-parity.ts";
import { mixedPrompt } from "../../src/cli/bench-tokenize.ts";
import { randomTokens } from "../../src/engine/serve-bench.ts";
import { KV_TYPES, type KvType } from "../../src/models/kv-type.ts";
import { Model } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { repoRoot, splash } from "../helpers/cli.ts";

const FIXTURES = join(repoRoot, "test/fixtures/models");
const TINY = join(repoRoot, "models/splash-tiny");
const tmp = mkdtempSync(join(tmpdir(), "splash-kv-type-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function loadAll(dir: string, backend: "cpu" | "vulkan" = "cpu", types: readonly KvType[] = KV_TYPES): Promise<Partial<Record<KvType, Model>>> {
  const out: Partial<Record<KvType, Model>> = {};
  for (const t of types) {
    const m = await Model.load(dir, { threads: 2, backend, maxStepTokens: 256 });
    m.setKvType(t);
    out[t] = m;
  }
  return out;
}

describe("parity bound against the f32 cache", () => {
  const cases: { name: string; dir: string; tokens: (m: Model) => Promise<Int32Array>; argmaxOnly?: boolean }[] = [
    {
      name: "splash-tiny, the mixed agent conversation",
      dir: TINY,
      tokens: async () => {
        const tok = await Tokenizer.load(TINY);
        const ids = tok.encodeTemplate(mixedPrompt(tok, 1024)).subarray(0, 1024);
        tok.free();
        return ids;
      },
    },
    { name: "dense fixture, random tokens", dir: join(FIXTURES, "qwen35-dense-tiny"), tokens: async (m) => randomTokens(1024, 5, m.info.vocabSize) },
    { name: "MoE fixture, random tokens (argmax agreement)", dir: join(FIXTURES, "qwen35-moe-tiny"), tokens: async (m) => randomTokens(1024, 6, m.info.vocabSize), argmaxOnly: true },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const models = await loadAll(c.dir);
      try {
        const rows = kvParity(models, await c.tokens(models.f32!), [1024], 256);
        expect(rows.map((r) => [r.type, r.positions])).toEqual([["f16", 1024], ["int8", 1024]]);
        for (const r of rows) {
          const within = c.argmaxOnly ? r.argmaxAgreement >= KV_PARITY_BOUND.argmaxAgreement : withinBound(r);
          expect({ ...r, within }).toEqual({ ...r, within: true });
        }
        // the caches do differ from f32 (the comparison is not of a model with itself)
        expect(rows.every((r) => r.meanKl > 0)).toBe(true);
      } finally {
        for (const m of Object.values(models)) m.free();
      }
    }, 120_000);
  }

  test("the Vulkan backend's f16 and int8 caches, dense fixture, random tokens", async () => {
    const models = await loadAll(join(FIXTURES, "qwen35-dense-tiny"), "vulkan");
    try {
      const rows = kvParity(models, randomTokens(1024, 5, models.f32!.info.vocabSize), [1024], 256);
      expect(rows.map((r) => [r.type, r.positions])).toEqual([["f16", 1024], ["int8", 1024]]);
      for (const r of rows) expect({ ...r, within: withinBound(r) }).toEqual({ ...r, within: true });
      expect(rows.every((r) => r.meanKl > 0)).toBe(true);
    } finally {
      for (const m of Object.values(models)) m.free();
    }
  }, 300_000);
});

describe("--kv-type", () => {
  const dir = join(FIXTURES, "qwen35-dense-tiny");
  const logits = async (kv: string) => {
    const out = join(tmp, `${kv}.bin`);
    const r = await splash(["logits", dir, "--tokens", "1,2,3,4,5,6,7,8,9,10,11,12", "--out", out, "--backend", "cpu", "--kv-type", kv]);
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const b = readFileSync(out);
    return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  };

  test("takes effect: int8 logits differ from f32 ones, by little; auto on a checkpoint without a spec is f32", async () => {
    const [f32, int8, auto] = [await logits("f32"), await logits("int8"), await logits("auto")];
    expect(int8).not.toEqual(f32);
    expect(auto).toEqual(f32);
    let max = 0;
    for (let i = 0; i < f32.length; i++) max = Math.max(max, Math.abs(f32[i]! - int8[i]!));
    expect(max).toBeGreaterThan(0);
    expect(max).toBeLessThan(0.05);
  }, 60_000);

  test("an unknown type is a usage error", async () => {
    const r = await splash(["logits", dir, "--tokens", "1,2", "--out", join(tmp, "x.bin"), "--kv-type", "int4"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--kvType \(int4\)\. Expected one of: auto, f32, f16, int8/);
  });

  test("the Vulkan backend has all three: f16 and int8 take effect, by little; auto gives splash-tiny's int8", async () => {
    const vulkan = async (kv: string) => {
      const out = join(tmp, `v-${kv}.bin`);
      const r = await splash(["logits", dir, "--tokens", "1,2,3,4,5,6,7,8", "--out", out, "--backend", "vulkan", "--kv-type", kv]);
      expect(r.code).toBe(0);
      const b = readFileSync(out);
      return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    };
    const [f32, f16, int8] = [await vulkan("f32"), await vulkan("f16"), await vulkan("int8")];
    for (const [other, bound] of [[f16, 0.01], [int8, 0.05]] as const) {
      expect(other).not.toEqual(f32);
      let max = 0;
      for (let i = 0; i < f32.length; i++) max = Math.max(max, Math.abs(f32[i]! - other[i]!));
      expect(max).toBeLessThan(bound);
    }
    const run = await splash(["run", "--backend", "vulkan", "--max-tokens", "1", "--draft", "none", "hello"], { env: { SPLASH_CACHE_DIR: tmp } });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/on vulkan: .*, int8 KV cache/);
    expect(run.stderr).not.toMatch(/has no/);
  }, 180_000);
});
