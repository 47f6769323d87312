// A checkpoint whose output head is padded past its tokenizer, built from the fixture model (fixture-model.ts): the
// same weights and fixture-1024 tokenizer, with PADDING more rows of lm_head and of the embedding (1024 ids, 1088
// rows). The padded lm_head rows are the first rows scaled by ±8, so for any hidden state one of them scores far
// above every real token: a sampler that looks at the padded rows picks one nearly every time (checked by the tests
// that use it), as a real checkpoint's can under temperature, penalties or a bias.
//
//   const dir = paddedModelDir();                 // a temporary directory (made once per process)
//   const loaded = await loadPaddedModel({ draft: "mtp" });
//   const drafter = paddedDflash2Dir();           // the fixture DFlash2 drafter with codebooks of the padded rows
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadModel, type LoadedModel, type LoadModelOptions } from "../../src/models/load.ts";
import { resolveModel } from "../../src/models/resolve.ts";

const FIXTURES = join(import.meta.dir, "../fixtures");
const WEIGHTS = join(FIXTURES, "models/qwen35-dense-tiny");
const TOKENIZER = join(FIXTURES, "tokenizers/fixture-1024");
export const DFLASH_DRAFTER = join(FIXTURES, "models/qwen35-dense-tiny-dflash");
const DFLASH2_DRAFTER = join(FIXTURES, "models/qwen35-dense-tiny-dflash2");
export const PADDED_MODEL_ID = "fixture-padded";
export const TOKENS = 1024;
export const PADDING = 64;
const SCALE = 8;

export type Tensor = { dtype: string; shape: number[]; data: Uint8Array };

export function readSafetensors(path: string): Map<string, Tensor> {
  const file = readFileSync(path);
  const n = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + n).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out = new Map<string, Tensor>();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    out.set(name, { dtype: t.dtype, shape: t.shape, data: file.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) });
  }
  return out;
}

export function writeSafetensors(path: string, tensors: Map<string, Tensor>): void {
  const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
  let offset = 0;
  for (const [name, t] of tensors) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.data.length] };
    offset += t.data.length;
  }
  let json = Buffer.from(JSON.stringify(header));
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([size, json, ...[...tensors.values()].map((t) => t.data)]));
}

// bf16 rows [rows][cols] with PADDING more: lm_head's are ±SCALE × its first rows, the embedding's copies of them.
function padded(t: Tensor, scale: (k: number) => number): Tensor {
  const [rows, cols] = t.shape as [number, number];
  const src = new Uint16Array(t.data.buffer, t.data.byteOffset, rows * cols);
  const out = new Uint16Array((rows + PADDING) * cols);
  out.set(src);
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  for (let k = 0; k < PADDING; k++) {
    for (let c = 0; c < cols; c++) {
      u32[0] = src[(k % (PADDING / 2)) * cols + c]! << 16;
      f32[0] = f32[0]! * scale(k); // a power of two: exact in bf16
      out[(rows + k) * cols + c] = u32[0]! >>> 16;
    }
  }
  return { dtype: t.dtype, shape: [rows + PADDING, cols], data: new Uint8Array(out.buffer) };
}

let assembled: string | undefined;

export function paddedModelDir(): string {
  if (assembled) return assembled;
  const root = mkdtempSync(join(tmpdir(), "splash-padded-model-"));
  process.on("exit", () => rmSync(root, { recursive: true, force: true }));
  const dir = join(root, PADDED_MODEL_ID);
  mkdirSync(dir);
  const config = JSON.parse(readFileSync(join(WEIGHTS, "config.json"), "utf8")) as { text_config: { vocab_size: number } };
  if (config.text_config.vocab_size !== TOKENS) throw new Error(`expected the fixture's ${TOKENS} rows`);
  config.text_config.vocab_size = TOKENS + PADDING;
  writeFileSync(join(dir, "config.json"), JSON.stringify(config, null, 2));
  const tensors = readSafetensors(join(WEIGHTS, "model.safetensors"));
  const lmHead = "lm_head.weight";
  const embed = "model.language_model.embed_tokens.weight";
  tensors.set(lmHead, padded(tensors.get(lmHead)!, (k) => (k < PADDING / 2 ? SCALE : -SCALE)));
  tensors.set(embed, padded(tensors.get(embed)!, () => 1));
  writeSafetensors(join(dir, "model.safetensors"), tensors);
  symlinkSync(join(WEIGHTS, "generation_config.json"), join(dir, "generation_config.json"));
  for (const f of ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]) copyFileSync(join(TOKENIZER, f), join(dir, f));
  assembled = dir;
  return dir;
}

// The fixture DFlash2 drafter beside the padded model: its selector's codebooks (one row per output row) get the
// padded rows too, copies of their first rows.
export function paddedDflash2Dir(): string {
  const dir = join(paddedModelDir(), "..", "dflash2");
  if (existsSync(dir)) return dir;
  mkdirSync(dir);
  copyFileSync(join(DFLASH2_DRAFTER, "config.json"), join(dir, "config.json"));
  const tensors = readSafetensors(join(DFLASH2_DRAFTER, "model.safetensors"));
  for (const name of ["candidate_selector.predecessor_codebook", "candidate_selector.successor_codebook"]) tensors.set(name, padded(tensors.get(name)!, () => 1));
  writeSafetensors(join(dir, "model.safetensors"), tensors);
  return dir;
}

export function loadPaddedModel(options: LoadModelOptions = {}): Promise<LoadedModel> {
  return loadModel(resolveModel(paddedModelDir()), { threads: 2, kvBudget: 64 << 20, ...options });
}
