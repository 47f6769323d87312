// The tensors of a safetensors checkpoint as rows of f32, read with positioned reads (nothing is held but the rows
// asked for; a memory map would do too, but Bun's typed arrays stop short of a 27B model's multi-GB shards): what
// the exporter streams from.
import { openSync, readSync } from "node:fs";
import { join } from "node:path";
import { checkWeightFiles } from "../models/files.ts";
import { readSafetensorsHeader } from "../models/safetensors.ts";

export type SourceTensor = {
  name: string;
  dtype: "BF16" | "F16" | "F32";
  shape: number[];
  file: string;
  fd: number;
  offset: number; // of the tensor's data in the file
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
      const fd = openSync(path, "r"); // open for the life of the process, like a mapping
      const base = 8 + header.headerLength;
      for (const [name, t] of header.tensors) {
        if (!FLOAT_DTYPES.has(t.dtype)) continue; // not a weight the exporter reads (none in this family)
        this.tensors.set(name, { name, dtype: t.dtype as SourceTensor["dtype"], shape: t.shape, file: path, fd, offset: base + t.begin });
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

let scratch = new Uint8Array(1 << 20);

// Reads `count` consecutive elements starting at element `first` of t into out (as f32).
export function readElements(t: SourceTensor, first: number, count: number, out: Float32Array): void {
  const size = t.dtype === "F32" ? 4 : 2;
  const bytes = count * size;
  if (scratch.length < bytes) scratch = new Uint8Array(bytes);
  for (let got = 0; got < bytes; ) {
    const n = readSync(t.fd, scratch, got, bytes - got, t.offset + first * size + got);
    if (n === 0) throw new SourceError(`${t.file}: tensor ${t.name} is cut short`);
    got += n;
  }
  if (t.dtype === "F32") {
    out.set(new Float32Array(scratch.buffer, 0, count));
    return;
  }
  if (t.dtype === "F16") {
    out.set(new Float16Array(scratch.buffer, 0, count));
    return;
  }
  const halves = new Uint16Array(scratch.buffer, 0, count);
  const bits = new Uint32Array(out.buffer, out.byteOffset, count);
  for (let i = 0; i < count; i++) bits[i] = halves[i]! << 16;
}
