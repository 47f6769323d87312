// The GGUF container (version 3), written front to back without holding tensor data: the header, the metadata
// key/values and the tensor table are laid out first (every tensor's size is known from its type and shape), then
// each tensor's bytes are produced row by row by its source and streamed to the file.
//
// Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata as (string key,
// u32 value type, value); tensor infos as (string name, u32 n_dims, u64 ne[n_dims] innermost first, u32 ggml type,
// u64 offset from the start of the data section); padding to the alignment; the data section, each tensor starting
// at a multiple of the alignment. Strings are u64 length + UTF-8 bytes, no terminator.
import { closeSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { encodeRows, rowBytes, type GgmlType, GGML_TYPE_ID } from "./quantize.ts";

export const GGUF_ALIGNMENT = 32; // general.alignment's default; we write no other

// Metadata value types (gguf_type).
const T = { u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12 } as const;
type Scalar = "u32" | "i32" | "f32" | "bool" | "string" | "u64";

export type MetaValue =
  | { type: Scalar; value: number | bigint | boolean | string }
  | { type: "array"; of: "string"; value: readonly string[] }
  | { type: "array"; of: "i32" | "u32" | "f32"; value: ArrayLike<number> };

export const meta = {
  u32: (value: number): MetaValue => ({ type: "u32", value }),
  i32: (value: number): MetaValue => ({ type: "i32", value }),
  f32: (value: number): MetaValue => ({ type: "f32", value }),
  bool: (value: boolean): MetaValue => ({ type: "bool", value }),
  str: (value: string): MetaValue => ({ type: "string", value }),
  strings: (value: readonly string[]): MetaValue => ({ type: "array", of: "string", value }),
  i32s: (value: ArrayLike<number>): MetaValue => ({ type: "array", of: "i32", value }),
  f32s: (value: ArrayLike<number>): MetaValue => ({ type: "array", of: "f32", value }),
};

// One tensor to write. `shape` is in PyTorch order (outermost first); GGUF stores it reversed. Rows are the
// innermost dimension: `fill(r0, n, out)` writes rows [r0, r0 + n) as f32 into out[n · cols].
export type TensorSource = {
  name: string;
  shape: number[];
  type: GgmlType;
  fill: (r0: number, n: number, out: Float32Array) => void;
};

const utf8 = new TextEncoder();

// A growable little-endian byte buffer for the header.
class Bytes {
  buf = new Uint8Array(1 << 16);
  view = new DataView(this.buf.buffer);
  length = 0;
  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number) { this.room(1); this.view.setUint8(this.length, v); this.length += 1; }
  u32(v: number) { this.room(4); this.view.setUint32(this.length, v, true); this.length += 4; }
  i32(v: number) { this.room(4); this.view.setInt32(this.length, v, true); this.length += 4; }
  f32(v: number) { this.room(4); this.view.setFloat32(this.length, v, true); this.length += 4; }
  u64(v: number | bigint) { this.room(8); this.view.setBigUint64(this.length, BigInt(v), true); this.length += 8; }
  str(s: string) {
    const b = utf8.encode(s);
    this.u64(b.length);
    this.room(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
  }
  pad(alignment: number) {
    const n = (alignment - (this.length % alignment)) % alignment;
    this.room(n);
    this.buf.fill(0, this.length, this.length + n);
    this.length += n;
  }
}

function writeValue(b: Bytes, v: MetaValue): void {
  if (v.type === "array") {
    b.u32(T.array);
    b.u32(T[v.of]);
    b.u64(v.value.length);
    for (let i = 0; i < v.value.length; i++) {
      const x = v.value[i]!;
      if (v.of === "string") b.str(x as string);
      else if (v.of === "f32") b.f32(x as number);
      else if (v.of === "i32") b.i32(x as number);
      else b.u32(x as number);
    }
    return;
  }
  b.u32(T[v.type]);
  switch (v.type) {
    case "u32": return b.u32(v.value as number);
    case "i32": return b.i32(v.value as number);
    case "f32": return b.f32(v.value as number);
    case "u64": return b.u64(v.value as number | bigint);
    case "bool": return b.u8(v.value ? 1 : 0);
    case "string": return b.str(v.value as string);
  }
}

export function tensorBytes(t: Pick<TensorSource, "shape" | "type">): number {
  const cols = t.shape.at(-1)!;
  const rows = t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
  return rows * rowBytes(t.type, cols);
}

const align = (n: number) => Math.ceil(n / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;

// Output buffered per chunk of rows: about this many bytes of f32 input at a time.
const CHUNK_FLOATS = 1 << 22;

export type WriteProgress = (done: number, total: number, tensor: string) => void;

// Writes a GGUF file at `path` (through a temporary file renamed at the end, so a failed export leaves nothing
// that looks finished). Returns the file's size.
export function writeGguf(path: string, metadata: ReadonlyMap<string, MetaValue>, tensors: readonly TensorSource[], progress?: WriteProgress): number {
  const names = new Set<string>();
  for (const t of tensors) {
    if (names.has(t.name)) throw new Error(`GGUF: tensor ${t.name} twice`);
    names.add(t.name);
  }
  const head = new Bytes();
  head.buf.set(utf8.encode("GGUF"), 0);
  head.length = 4;
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.size);
  for (const [key, value] of metadata) {
    head.str(key);
    writeValue(head, value);
  }
  let offset = 0;
  const sizes = tensors.map(tensorBytes);
  tensors.forEach((t, i) => {
    head.str(t.name);
    head.u32(t.shape.length);
    for (let d = t.shape.length - 1; d >= 0; d--) head.u64(t.shape[d]!);
    head.u32(GGML_TYPE_ID[t.type]);
    head.u64(offset);
    offset = align(offset + sizes[i]!);
  });
  head.pad(GGUF_ALIGNMENT);
  const total = head.length + offset;

  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "w");
  try {
    writeSync(fd, head.buf, 0, head.length);
    let done = 0;
    const zeros = new Uint8Array(GGUF_ALIGNMENT);
    tensors.forEach((t, i) => {
      progress?.(done, total, t.name);
      const cols = t.shape.at(-1)!;
      const rows = t.shape.slice(0, -1).reduce((a, b) => a * b, 1);
      const perChunk = Math.max(1, Math.floor(CHUNK_FLOATS / cols));
      const f32 = new Float32Array(Math.min(rows, perChunk) * cols);
      const out = new Uint8Array(Math.min(rows, perChunk) * rowBytes(t.type, cols));
      for (let r0 = 0; r0 < rows; r0 += perChunk) {
        const n = Math.min(perChunk, rows - r0);
        const src = f32.subarray(0, n * cols);
        t.fill(r0, n, src);
        const bytes = encodeRows(t.type, src, n, cols, out);
        writeSync(fd, out, 0, bytes);
      }
      const padding = align(sizes[i]!) - sizes[i]!;
      if (padding) writeSync(fd, zeros, 0, padding);
      done += align(sizes[i]!);
    });
    progress?.(done, total, "");
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  return total;
}
