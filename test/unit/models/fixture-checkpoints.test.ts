// Integrity of the committed fixture checkpoints and goldens (test/fixtures/models, made by scripts/fixtures/):
// every safetensors header is well formed with bf16 tensors inside the file, sharded indexes point at real
// tensors, the config-implied tensors exist with the right shapes (MTP, DFlash fc), every golden file has the size
// its manifest shape implies and the sha256 it records, and prompts stay inside the vocabulary and off the
// reserved ids. The numbers themselves are checked against transformers by scripts/fixtures/check_fixtures.py.
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "../../fixtures/models");
const RESERVED = 8; // vocab-8 .. vocab-1 are special ids in every fixture

type Header = Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
type FileEntry = { file: string; sha256: string; shape?: number[]; dtype?: string };

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, "utf8")) as T;
}

function header(path: string): { tensors: Header; dataBytes: number } {
  const buf = readFileSync(path);
  const len = Number(buf.readBigUInt64LE(0));
  expect(8 + len).toBeLessThanOrEqual(buf.length);
  const parsed = JSON.parse(buf.subarray(8, 8 + len).toString("utf8")) as Record<string, unknown>;
  delete parsed.__metadata__;
  return { tensors: parsed as Header, dataBytes: buf.length - 8 - len };
}

function checkpointDirs(): string[] {
  return readdirSync(ROOT).filter((d) => existsSync(join(ROOT, d, "config.json"))).sort();
}

function tensorsOf(dir: string): Map<string, { dtype: string; shape: number[] }> {
  const out = new Map<string, { dtype: string; shape: number[] }>();
  const index = join(ROOT, dir, "model.safetensors.index.json");
  const files = existsSync(index)
    ? [...new Set(Object.values(readJson<{ weight_map: Record<string, string> }>(index).weight_map))]
    : ["model.safetensors"];
  for (const f of files) {
    const { tensors, dataBytes } = header(join(ROOT, dir, f));
    let covered = 0;
    for (const [name, t] of Object.entries(tensors)) {
      expect(t.dtype).toBe("BF16");
      const [begin, end] = t.data_offsets;
      expect(end - begin).toBe(t.shape.reduce((a, b) => a * b, 1) * 2);
      expect(end).toBeLessThanOrEqual(dataBytes);
      covered += end - begin;
      out.set(name, t);
    }
    expect(covered).toBe(dataBytes);
  }
  return out;
}

function sha256(path: string): string {
  return new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");
}

function fileEntries(node: unknown): FileEntry[] {
  if (Array.isArray(node)) return node.flatMap(fileEntries);
  if (node === null || typeof node !== "object") return [];
  const o = node as Record<string, unknown>;
  if (typeof o.file === "string" && typeof o.sha256 === "string") return [o as FileEntry];
  return Object.values(o).flatMap(fileEntries);
}

describe("fixture checkpoints", () => {
  test("the expected fixtures are present", () => {
    expect(checkpointDirs()).toEqual([
      "qwen35-dense-rope50",
      "qwen35-dense-tiny",
      "qwen35-dense-tiny-dflash",
      "qwen35-dense-tiny-dflash-swa",
      "qwen35-dense-tiny-dflash2",
      "qwen35-dense-tiny-sharded",
      "qwen35-moe-tiny",
      "qwen35-moe-tiny-fused",
      "qwen35-vision-tiny",
    ]);
  });

  for (const dir of checkpointDirs()) {
    test(`${dir}: safetensors well formed, config-implied tensors present`, () => {
      const cfg = readJson<Record<string, any>>(join(ROOT, dir, "config.json"));
      const tensors = tensorsOf(dir);
      if (cfg.dflash_config) {
        const h = cfg.hidden_size as number;
        expect(tensors.get("fc.weight")?.shape).toEqual([h, cfg.dflash_config.target_layer_ids.length * h]);
        expect(tensors.has("embed_tokens.weight") || tensors.has("lm_head.weight")).toBe(false);
        return;
      }
      const tc = cfg.text_config as Record<string, any>;
      const h = tc.hidden_size as number;
      expect(tc.layer_types).toHaveLength(tc.num_hidden_layers);
      expect(tensors.get("lm_head.weight")?.shape).toEqual([tc.vocab_size, h]);
      expect(tensors.get("model.language_model.embed_tokens.weight")?.shape).toEqual([tc.vocab_size, h]);
      expect([...tensors.keys()].some((k) => k.startsWith("model.visual."))).toBe(true);
      const hasMtp = tensors.has("mtp.fc.weight");
      expect(hasMtp).toBe(tc.mtp_num_hidden_layers > 0);
      if (hasMtp) expect(tensors.get("mtp.fc.weight")?.shape).toEqual([h, 2 * h]);
      tc.layer_types.forEach((kind: string, i: number) => {
        const p = `model.language_model.layers.${i}.`;
        expect(tensors.has(p + (kind === "full_attention" ? "self_attn.q_proj.weight" : "linear_attn.in_proj_qkv.weight"))).toBe(true);
      });
    });
  }

  test("sharded index: every mapped tensor is in its shard, total_size adds up", () => {
    const dir = "qwen35-dense-tiny-sharded";
    const index = readJson<{ metadata: { total_size: number }; weight_map: Record<string, string> }>(
      join(ROOT, dir, "model.safetensors.index.json"),
    );
    let total = 0;
    for (const [name, file] of Object.entries(index.weight_map)) {
      const t = header(join(ROOT, dir, file)).tensors[name];
      expect(t).toBeDefined();
      total += t!.data_offsets[1] - t!.data_offsets[0];
    }
    expect(total).toBe(index.metadata.total_size);
    expect(tensorsOf(dir).size).toBe(Object.keys(index.weight_map).length);
  });
});

describe("goldens", () => {
  const withGolden = checkpointDirs().filter((d) => existsSync(join(ROOT, d, "golden/manifest.json")));

  for (const dir of withGolden) {
    test(`${dir}: every file (goldens, test images) matches its manifest shape and sha256; prompts use ordinary ids`, () => {
      const gdir = join(ROOT, dir, "golden");
      const m = readJson<Record<string, any>>(join(gdir, "manifest.json"));
      const entries = fileEntries(m.prompts ?? m.cases);
      expect(entries.length).toBeGreaterThan(0);
      for (const e of entries) {
        const path = join(gdir, e.file);
        if (e.dtype === "f32le") expect(statSync(path).size).toBe(e.shape!.reduce((a, b) => a * b, 1) * 4);
        expect(sha256(path)).toBe(e.sha256);
      }
      const cfg = readJson<Record<string, any>>(join(ROOT, m.target ?? dir, "config.json"));
      const vocab = (cfg.text_config?.vocab_size ?? cfg.vocab_size) as number;
      for (const p of m.prompts ?? m.cases) {
        const ids: number[] = p.tokens ?? p.prompt ?? p.input_ids.filter((t: number) => t < vocab - RESERVED);
        for (const t of ids) expect(t >= 0 && t < vocab - RESERVED).toBe(true);
        expect(p.min_top2_margin_over_std).toBeGreaterThanOrEqual(4e-3);
      }
    });
  }
});
