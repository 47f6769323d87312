// Reads a safetensors file's header (never its data): the tensor table and where the data must end. The fast check
// on load (files.ts) uses it to catch truncated and corrupt downloads before native maps them; the memory test
// uses it to compare the tensor inventory with real checkpoints.
import { closeSync, openSync, readSync, fstatSync } from "node:fs";

const DTYPE_BYTES: Record<string, number> = { BOOL: 1, U8: 1, I8: 1, F8_E4M3: 1, F8_E5M2: 1, I16: 2, U16: 2, F16: 2, BF16: 2, I32: 4, U32: 4, F32: 4, I64: 8, U64: 8, F64: 8 };
const MAX_HEADER = 100 * 1024 * 1024; // the format's own limit

export type SafetensorsTensor = { dtype: string; shape: number[]; begin: number; end: number };
export type SafetensorsHeader = { fileSize: number; headerLength: number; tensors: Map<string, SafetensorsTensor>; metadata: Record<string, string> };

export class SafetensorsError extends Error {
  override name = "SafetensorsError";
}

function readExactly(fd: number, length: number, position: number): Buffer {
  const buf = Buffer.alloc(length);
  let got = 0;
  while (got < length) {
    const n = readSync(fd, buf, got, length - got, position + got);
    if (n === 0) break;
    got += n;
  }
  return buf.subarray(0, got);
}

// Parses and checks the header: JSON, dtypes, shapes against byte ranges, and that the file is exactly as long as
// the data the header declares (a short file is a cut download; a longer one is not a safetensors file).
export function readSafetensorsHeader(path: string): SafetensorsHeader {
  const fd = openSync(path, "r");
  try {
    const fileSize = fstatSync(fd).size;
    const fail = (what: string) => new SafetensorsError(`${path}: ${what}`);
    if (fileSize < 8) throw fail(`${fileSize} bytes, too short for a safetensors header`);
    const n = Number(readExactly(fd, 8, 0).readBigUInt64LE(0));
    if (n < 2 || n > MAX_HEADER || 8 + n > fileSize) throw fail(`header length ${n} does not fit a file of ${fileSize} bytes`);
    let json: unknown;
    try {
      json = JSON.parse(readExactly(fd, n, 8).toString("utf8"));
    } catch (e) {
      throw fail(`header is not valid JSON (${(e as Error).message})`);
    }
    if (typeof json !== "object" || json === null || Array.isArray(json)) throw fail("header is not a JSON object");
    const tensors = new Map<string, SafetensorsTensor>();
    let metadata: Record<string, string> = {};
    let dataEnd = 0;
    for (const [name, v] of Object.entries(json as Record<string, unknown>)) {
      if (name === "__metadata__") {
        metadata = v as Record<string, string>;
        continue;
      }
      const t = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      const size = typeof t.dtype === "string" ? DTYPE_BYTES[t.dtype] : undefined;
      if (size === undefined) throw fail(`tensor ${name}: unknown dtype ${JSON.stringify(t.dtype)}`);
      if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0)) throw fail(`tensor ${name}: bad shape ${JSON.stringify(t.shape)}`);
      const off = t.data_offsets;
      if (!Array.isArray(off) || off.length !== 2 || !off.every((o) => Number.isInteger(o) && o >= 0) || off[1] < off[0]) {
        throw fail(`tensor ${name}: bad data_offsets ${JSON.stringify(off)}`);
      }
      const shape = t.shape as number[];
      const bytes = shape.reduce((a, b) => a * b, 1) * size;
      if (off[1] - off[0] !== bytes) throw fail(`tensor ${name}: ${off[1] - off[0]} bytes of data for ${t.dtype} ${JSON.stringify(shape)} (${bytes} expected)`);
      tensors.set(name, { dtype: t.dtype as string, shape, begin: off[0], end: off[1] });
      dataEnd = Math.max(dataEnd, off[1]);
    }
    const expected = 8 + n + dataEnd;
    if (fileSize < expected) throw fail(`truncated: ${fileSize} bytes, the header declares ${expected}`);
    if (fileSize > expected) throw fail(`${fileSize - expected} bytes past the last tensor's data`);
    return { fileSize, headerLength: n, tensors, metadata };
  } finally {
    closeSync(fd);
  }
}
