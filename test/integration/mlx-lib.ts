// Shared by the MLX-format, packed-format and pull tests: a safetensors tensor read as numbers, and MLX checkpoints
// rewritten (dequantized, tied) for the comparisons test/helpers/parity.ts runs.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensorsHeader } from "../../src/models/safetensors.ts";

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
