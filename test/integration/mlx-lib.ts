// Shared by the MLX-format and packed-format tests: a safetensors tensor read as numbers, the logits of a whole
// prompt from the native engine, and the comparison figures (max |Δ| / std, argmax agreement).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensorsHeader } from "../../src/models/safetensors.ts";
import type { Model } from "../../src/native/model.ts";

export function tensor(path: string, name: string): Float32Array | Int32Array {
  const h = readSafetensorsHeader(path);
  const t = h.tensors.get(name);
  if (!t) throw new Error(`${path} has no tensor ${name}`);
  const bytes = readFileSync(path).subarray(8 + h.headerLength + t.begin, 8 + h.headerLength + t.end);
  const copy = new Uint8Array(bytes).buffer;
  if (t.dtype === "F32") return new Float32Array(copy);
  if (t.dtype === "I32") return new Int32Array(copy);
  throw new Error(`${name}: dtype ${t.dtype} is not read here`);
}

// Logits at every position of `tokens`, fed as one prefill of a fresh sequence.
export function promptLogits(model: Model, tokens: ArrayLike<number>): Float32Array {
  const V = model.info.vocabSize;
  const pageTokens = 16;
  const nPages = Math.ceil(tokens.length / pageTokens);
  const cache = model.createCache({ pageTokens, nPages, nSlots: 1 });
  try {
    const logits = new Float32Array(tokens.length * V);
    cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from(tokens), pages: Int32Array.from({ length: nPages }, (_, i) => i), logits }]);
    return logits;
  } finally {
    cache.free();
  }
}

export type Agreement = { positions: number; same: number; maxOverStd: number; meanOverStd: number };

// Compares logits [T][V] with the reference over the first `vocab` entries of each row (goldens may pad the vocabulary).
export function agreement(got: Float32Array, want: Float32Array, V: number, T: number): Agreement {
  let sum = 0;
  let sq = 0;
  for (let i = 0; i < T * V; i++) (sum += want[i]!), (sq += want[i]! * want[i]!);
  const std = Math.sqrt(sq / (T * V) - (sum / (T * V)) ** 2);
  let same = 0;
  let max = 0;
  let mean = 0;
  for (let t = 0; t < T; t++) {
    let a = 0;
    let b = 0;
    for (let v = 0; v < V; v++) {
      const i = t * V + v;
      if (got[i]! > got[t * V + a]!) a = v;
      if (want[i]! > want[t * V + b]!) b = v;
      const d = Math.abs(got[i]! - want[i]!) / std;
      max = Math.max(max, Number.isFinite(d) ? d : Infinity);
      mean += d;
    }
    if (a === b) same++;
  }
  return { positions: T, same, maxOverStd: max, meanOverStd: mean / (T * V) };
}

// An MLX checkpoint with every quantized module dequantized to f32 (w = q·scale + bias, exactly as stored) and no
// quantization block: the same names and quirks, read through the float path. Native on it against mlx-lm's float32
// logits checks the mlx-lm layout alone; native on the quantized original against it checks the MLX kernels alone.
export function dequantizedCopy(src: string, dst: string): void {
  const file = join(src, "model.safetensors");
  const h = readSafetensorsHeader(file);
  const raw = readFileSync(file);
  const data = (name: string) => {
    const t = h.tensors.get(name)!;
    return { t, bytes: raw.subarray(8 + h.headerLength + t.begin, 8 + h.headerLength + t.end) };
  };
  const bf16 = (b: Buffer) => {
    const u = new Uint32Array(b.length / 2);
    for (let i = 0; i < u.length; i++) u[i] = b.readUInt16LE(2 * i) << 16;
    return new Float32Array(u.buffer);
  };
  const out: Tensor[] = [];
  for (const name of h.tensors.keys()) {
    if (name.endsWith(".scales") || name.endsWith(".biases")) continue;
    const base = name.replace(/\.weight$/, "");
    if (!h.tensors.has(`${base}.scales`)) {
      const { t, bytes } = data(name);
      out.push({ name, dtype: t.dtype, shape: t.shape, bytes });
      continue;
    }
    const w = data(name);
    const sc = bf16(data(`${base}.scales`).bytes);
    const bi = bf16(data(`${base}.biases`).bytes);
    const groupsPerRow = data(`${base}.scales`).t.shape.at(-1)!;
    const cols = groupsPerRow * 64;
    const bits = (w.t.shape.at(-1)! * 32) / cols;
    const rows = w.t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
    const f = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r++) {
      for (let k = 0; k < cols; k++) {
        const bit = (r * cols + k) * bits;
        const q = (w.bytes[bit >> 3]! >> (bit & 7)) & ((1 << bits) - 1);
        const g = r * groupsPerRow + (k >> 6);
        f[r * cols + k] = q * sc[g]! + bi[g]!;
      }
    }
    out.push({ name, dtype: "F32", shape: [...w.t.shape.slice(0, -1), cols], bytes: new Uint8Array(f.buffer) });
  }
  const config = JSON.parse(readFileSync(join(src, "config.json"), "utf8"));
  delete config.quantization;
  delete config.quantization_config;
  writeCheckpoint(dst, out, config);
}

type Tensor = { name: string; dtype: string; shape: number[]; bytes: Uint8Array };

// dst/model.safetensors (one file, no index) holding `tensors`, and dst/config.json.
function writeCheckpoint(dst: string, tensors: Tensor[], config: unknown): void {
  const header: Record<string, unknown> = { __metadata__: { format: "mlx" } };
  let offset = 0;
  for (const t of tensors) {
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + t.bytes.length] };
    offset += t.bytes.length;
  }
  let json = JSON.stringify(header);
  json += " ".repeat((8 - ((8 + json.length) % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  mkdirSync(dst, { recursive: true });
  writeFileSync(join(dst, "model.safetensors"), Buffer.concat([len, Buffer.from(json), ...tensors.map((t) => t.bytes)]));
  writeFileSync(join(dst, "config.json"), JSON.stringify(config));
}

// An MLX checkpoint with tied embeddings: its lm_head module (weight, scales, biases) dropped and
// tie_word_embeddings set, so the loader reuses the embedding's matrix (quantized as stored) as lm_head.
export function tiedCopy(src: string, dst: string): void {
  const file = join(src, "model.safetensors");
  const h = readSafetensorsHeader(file);
  const raw = readFileSync(file);
  const out: Tensor[] = [];
  for (const [name, t] of h.tensors)
    if (!name.startsWith("language_model.lm_head."))
      out.push({ name, dtype: t.dtype, shape: t.shape, bytes: raw.subarray(8 + h.headerLength + t.begin, 8 + h.headerLength + t.end) });
  const config = JSON.parse(readFileSync(join(src, "config.json"), "utf8"));
  config.tie_word_embeddings = true;
  if (config.text_config) config.text_config.tie_word_embeddings = true;
  writeCheckpoint(dst, out, config);
}
