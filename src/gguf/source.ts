// The tensors of a safetensors checkpoint as rows of f32, read through memory maps (nothing is copied until a row
// is asked for, and the pages read stay the kernel's to drop): what the exporter streams from.
import { join } from "node:path";
import { checkWeightFiles } from "../models/files.ts";
import { readSafetensorsHeader } from "../models/safetensors.ts";

export type SourceTensor = {
  name: string;
  dtype: "BF16" | "F16" | "F32";
  shape: number[];
  file: string;
  bytes: Uint8Array; // the tensor's data, a view into the mapped file
};

export class SourceError extends Error {
  override name = "SourceError";
}

const FLOAT_DTYPES = new Set(["BF16", "F16", "F32"]);

export class Checkpoint {
  readonly tensors = new Map<string, SourceTensor>();

  constructor(readonly dir: string) {
    for (const file of checkWeightFiles(dir).files) {
      const path = join(dir, file);
      const header = readSafetensorsHeader(path);
      const map = Bun.mmap(path, { shared: false });
      const base = 8 + header.headerLength;
      for (const [name, t] of header.tensors) {
        if (!FLOAT_DTYPES.has(t.dtype)) continue; // not a weight the exporter reads (none in this family)
        this.tensors.set(name, { name, dtype: t.dtype as SourceTensor["dtype"], shape: t.shape, file: path, bytes: map.subarray(base + t.begin, base + t.end) });
      }
    }
  }

  has(name: string): boolean {
    return this.tensors.has(name);
  }

  // The tensor, checked against the shape the config implies (PyTorch order).
  get(name: string, shape: number[]): SourceTensor {
    const t = this.tensors.get(name);
    if (!t) throw new SourceError(`${this.dir}: tensor ${name} is missing`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i]))
      throw new SourceError(`${t.file}: tensor ${name} has shape [${t.shape}], the config implies [${shape}]`);
    return t;
  }
}

// Reads `count` consecutive elements starting at element `first` of t into out (as f32).
export function readElements(t: SourceTensor, first: number, count: number, out: Float32Array): void {
  const b = t.bytes;
  if (t.dtype === "F32") {
    const start = b.byteOffset + first * 4;
    if (start % 4 === 0) out.set(new Float32Array(b.buffer, start, count));
    else out.set(new Float32Array(b.slice(first * 4, (first + count) * 4).buffer));
    return;
  }
  const start = b.byteOffset + first * 2;
  const halves = start % 2 === 0 ? new Uint16Array(b.buffer, start, count) : new Uint16Array(b.slice(first * 2, (first + count) * 2).buffer);
  if (t.dtype === "F16") {
    out.set(new Float16Array(halves.buffer, halves.byteOffset, count));
    return;
  }
  const bits = new Uint32Array(out.buffer, out.byteOffset, count);
  for (let i = 0; i < count; i++) bits[i] = halves[i]! << 16;
}
