// Splash's packed format end to end (native/core/packed.h, src/models/packed*.ts, `splash import`):
//  - loading a packed file is a map of the very rows load-time quantization makes: logits bit-identical to
//    Model.load(bf16, quant) on the dense, MoE (per-expert) and trained fixtures;
//  - `splash import` per the recipe on the embedded model: argmax agreement with its transformers goldens (printed);
//  - the file: page-aligned tensors, header and payload XXH64 (cross-checked with Bun's xxHash64);
//  - resolution finds an import in the Splash cache, and verify runs the full checksum;
//  - a truncated, damaged or foreign file never loads, with a message naming the file and saying what to do.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { closeSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readSafetensorsHeader } from "../../src/models/safetensors.ts";
import { checkWeightFiles } from "../../src/models/files.ts";
import { PACKED_FILE, packPlan, readPackedHeader, verifyPacked, writePacked, DEFAULT_RECIPE } from "../../src/models/packed.ts";
import { importModel } from "../../src/models/packed-import.ts";
import { resolveModel } from "../../src/models/resolve.ts";
import { Model, type Quant } from "../../src/native/model.ts";
import { MLX_FIXTURES_TIMEOUT_MS, mlxFixtures, skipMlxFixtures } from "../helpers/mlx-fixtures.ts";
import { promptLogits } from "../helpers/parity.ts";
import { tensor } from "./mlx-lib.ts";

const ROOT = join(import.meta.dir, "../..");
const MODELS = join(ROOT, "test/fixtures/models");
const GOLDEN = join(MODELS, "splash-tiny-golden/golden.safetensors");
const tmp = mkdtempSync(join(tmpdir(), "splash-packed-"));
const savedCache = process.env.SPLASH_CACHE_DIR;
const rows: Record<string, string | number>[] = [];
beforeAll(() => (process.env.SPLASH_CACHE_DIR = join(tmp, "cache")));
afterAll(() => {
  if (savedCache === undefined) delete process.env.SPLASH_CACHE_DIR;
  else process.env.SPLASH_CACHE_DIR = savedCache;
  rmSync(tmp, { recursive: true, force: true });
  console.table(rows);
});

function tensorsOf(dir: string): { name: string; shape: number[] }[] {
  return checkWeightFiles(dir).files.flatMap((f) => [...readSafetensorsHeader(join(dir, f)).tensors].map(([name, t]) => ({ name, shape: t.shape })));
}

const load = (dir: string, quant: Quant = "none") => Model.load(dir, { threads: 2, backend: "cpu", quant });

describe.each([
  ["qwen35-dense-tiny", join(MODELS, "qwen35-dense-tiny")],
  ["qwen35-moe-tiny", join(MODELS, "qwen35-moe-tiny")],
  ["splash-tiny", join(ROOT, "models/splash-tiny")],
])("%s packed", (name, src) => {
  test.each(["q8", "q4"] as const)("%s: a map of the rows load-time quantization makes by the same recipe (bit-identical logits)", async (quant) => {
    const dir = join(tmp, `exact-${name}-${quant}`);
    mkdirSync(dir, { recursive: true });
    copyFileSync(join(src, "config.json"), join(dir, "config.json"));
    await writePacked(src, join(dir, PACKED_FILE), packPlan(tensorsOf(src), DEFAULT_RECIPE, quant), { test: true });
    const ids = Int32Array.from({ length: 24 }, (_, i) => (i * 37 + 5) % 500);
    const packed = await load(dir, "none");
    const atLoad = await load(src, quant);
    try {
      const a = promptLogits(packed, ids);
      const b = promptLogits(atLoad, ids);
      expect(Buffer.compare(Buffer.from(a.buffer), Buffer.from(b.buffer))).toBe(0);
      expect(packed.info.weightBytes).toBe(atLoad.info.weightBytes);
    } finally {
      packed.free();
      atLoad.free();
    }
  }, 60_000);
});

describe("splash import of the embedded model", () => {
  test.each([
    ["q8", 0.98],
    ["q4", 0.9],
  ] as const)("%s per the default recipe: argmax agreement with transformers on the bf16 weights", async (quant, bar) => {
    const r = await importModel(resolveModel(undefined, { source: true }), quant, join(tmp, "cache/packed/splash-tiny", quant), 2);
    expect(r.quantized).toBeGreaterThan(50);
    const model = await load(r.dir);
    try {
      const V = model.info.vocabSize;
      let same = 0;
      let positions = 0;
      for (const p of ["p0", "p1", "p2", "p3"]) {
        const ids = tensor(GOLDEN, `${p}.input_ids`);
        const got = promptLogits(model, ids);
        const ref = p === "p3" ? tensor(GOLDEN, "p3.argmax") : undefined;
        const refLogits = p === "p3" ? undefined : (tensor(GOLDEN, `${p}.logits`) as Float32Array);
        for (let t = 0; t < ids.length; t++) {
          let a = 0;
          let b = 0;
          for (let v = 1; v < V; v++) {
            if (got[t * V + v]! > got[t * V + a]!) a = v;
            if (refLogits && refLogits[t * V + v]! > refLogits[t * V + b]!) b = v;
          }
          if (a === (ref ? ref[t] : b)) same++;
        }
        positions += ids.length;
      }
      rows.push({ model: "splash-tiny", packed: quant, "weight bytes": model.info.weightBytes, "file bytes": r.bytes, "argmax vs transformers bf16": `${same}/${positions} (${((100 * same) / positions).toFixed(1)}%)` });
      expect(same / positions).toBeGreaterThanOrEqual(bar);
    } finally {
      model.free();
    }
  }, 60_000);

  test("the file: page-aligned tensors, both checksums as Bun's xxHash64 computes them, the source recorded", () => {
    const path = join(tmp, "cache/packed/splash-tiny/q4", PACKED_FILE);
    const h = readPackedHeader(path);
    const bytes = readFileSync(path);
    const dataOffset = Number(bytes.readBigUInt64LE(24));
    expect(dataOffset % 16384).toBe(0);
    for (const t of h.tensors) {
      expect(t.offset % 16384).toBe(0);
      expect(t.bytes).toBe(t.rows * t.row_bytes);
    }
    expect(h.tensors.find((t) => t.name === "lm_head.weight")?.type).toBe("q8");
    expect(h.tensors.find((t) => t.name.endsWith("layers.0.mlp.up_proj.weight"))?.type).toBe("q4");
    expect(h.tensors.find((t) => t.name.endsWith("layers.0.linear_attn.in_proj_a.weight"))?.type).toBe("bf16");
    expect(BigInt.asUintN(64, Bun.hash.xxHash64(bytes.subarray(dataOffset)))).toBe(bytes.readBigUInt64LE(48));
    expect(h.meta).toMatchObject({ model: "splash-tiny", quant: "q4", recipe: { lm_head: "q8", embed: "q4", norm: "bf16" } });
    expect(Object.keys((h.meta.source as { files: object }).files)).toEqual(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
  });

  test("resolution takes the import (the spec's default level first), verify checks every byte", async () => {
    const r = resolveModel();
    expect(r).toMatchObject({ kind: "embedded", id: "splash-tiny", packed: "q4", dir: join(tmp, "cache/packed/splash-tiny/q4") });
    expect(resolveModel(undefined, { source: true }).packed).toBeUndefined();
    await verifyPacked(join(r.dir, PACKED_FILE));
    const proc = Bun.spawn([process.execPath, join(ROOT, "src/main.ts"), "verify"], { env: { ...process.env }, stdout: "pipe", stderr: "pipe" });
    const out = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    expect(out).toContain("the weights match their checksum (xxh64)");
  }, 60_000);
});

describe("a damaged file never loads", () => {
  function damaged(name: string, damage: (path: string) => void): string {
    const dir = join(tmp, `bad-${name}`);
    cpSync(join(tmp, "cache/packed/splash-tiny/q4"), dir, { recursive: true });
    damage(join(dir, PACKED_FILE));
    return dir;
  }
  function poke(path: string, at: number) {
    const fd = openSync(path, "r+");
    const b = Buffer.alloc(1);
    b[0] = readFileSync(path)[at]! ^ 0xff;
    writeSync(fd, b, 0, 1, at);
    closeSync(fd);
  }
  const advice = /model\.splash: .*delete it and run `splash import` again/;

  test("truncated (a cut write): refused at load and at resolution", async () => {
    const dir = damaged("cut", (p) => truncateSync(p, readFileSync(p).length - 1000));
    await expect(load(dir)).rejects.toThrow(/bytes but its header says .*truncated or damaged; delete it and run `splash import` again/);
    expect(() => readPackedHeader(join(dir, PACKED_FILE))).toThrow(/truncated or damaged/);
    expect(() => resolveModel(dir)).toThrow(/truncated or damaged/);
  });

  test("a changed header byte", async () => {
    const dir = damaged("header", (p) => poke(p, 100));
    await expect(load(dir)).rejects.toThrow(/the header's checksum does not match/);
  });

  test("not a packed file", async () => {
    const dir = damaged("magic", (p) => poke(p, 0));
    await expect(load(dir)).rejects.toThrow(/not a Splash packed file/);
  });

  test("a changed weight byte: the fast check cannot see it, `splash verify` does", async () => {
    const dir = damaged("payload", (p) => poke(p, readFileSync(p).length - 5));
    (await load(dir)).free();
    await expect(verifyPacked(join(dir, PACKED_FILE))).rejects.toThrow(advice);
    await expect(verifyPacked(join(dir, PACKED_FILE))).rejects.toThrow(/weights' checksum does not match/);
  });

  test("an import in the cache that is damaged is reported, not skipped", () => {
    const dir = join(tmp, "cache/packed/splash-tiny/q4");
    truncateSync(join(dir, PACKED_FILE), 100);
    expect(() => resolveModel()).toThrow(/the imported splash-tiny \(q4\) .* is damaged/);
    rmSync(dir, { recursive: true });
    expect(resolveModel().packed).toBe("q8");
  });

  test.skipIf(skipMlxFixtures)("an MLX checkpoint is not imported (it loads as it is)", async () => {
    const plan = packPlan(tensorsOf(join(ROOT, "models/splash-tiny")), DEFAULT_RECIPE, "q4");
    const mlx = join(await mlxFixtures(), "splash-tiny-mlx-4bit"); // made by mlx-lm at test time
    await expect(writePacked(mlx, join(tmp, "x.splash"), plan, {})).rejects.toThrow(/takes a float .*an MLX-quantized one loads as it is/);
  }, MLX_FIXTURES_TIMEOUT_MS);
});
