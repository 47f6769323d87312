// The GGUF writer's pieces without a model: block encodings against ggml's reference rules, the container layout
// (header, metadata, tensor table, 32-byte alignment of every tensor), and the V-head permutation.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { meta, writeGguf } from "../../../src/gguf/format.ts";
import { encodeRows, rowBytes } from "../../../src/gguf/quantize.ts";
import { groupedRow, type Shapes } from "../../../src/gguf/qwen35.ts";

const dir = mkdtempSync(join(tmpdir(), "splash-gguf-unit-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const f16 = (bits: number) => new Float16Array(new Uint16Array([bits]).buffer)[0]!;

test("Q8_0: d = max|x|/127 as f16, q = round(x/d) half away from zero", () => {
  const x = Float32Array.from({ length: 32 }, (_, i) => (i - 16) / 8); // -2 … 1.875
  const out = new Uint8Array(rowBytes("Q8_0", 32));
  expect(encodeRows("Q8_0", x, 1, 32, out)).toBe(34);
  const d = f16(new DataView(out.buffer).getUint16(0, true));
  expect(d).toBeCloseTo(2 / 127, 5);
  const q = new Int8Array(out.buffer, 2, 32);
  expect(q[0]).toBe(-127);
  for (let i = 0; i < 32; i++) expect(Math.abs(q[i]! * d - x[i]!)).toBeLessThanOrEqual(d / 2 + 1e-6);
});

test("Q4_0: d = (element of largest magnitude) / -8, nibbles hold elements j and j + 16", () => {
  const x = Float32Array.from({ length: 32 }, (_, i) => (i % 2 ? 1 : -1) * (i / 4));
  const out = new Uint8Array(rowBytes("Q4_0", 32));
  expect(encodeRows("Q4_0", x, 1, 32, out)).toBe(18);
  const d = f16(new DataView(out.buffer).getUint16(0, true));
  expect(d).toBeCloseTo(31 / 4 / -8, 3); // x[31] = 7.75 is the largest magnitude: d is negative
  // the nearest of the 16 levels (q − 8)·d, q = 0 … 15: values past 7·d clamp to q = 15
  const ok = (q: number, v: number) => Math.abs((q - 8) * d - v) <= Math.abs(d) / 2 + 1e-6 || (q === 15 && v / d >= 7);
  for (let j = 0; j < 16; j++) {
    const b = out[2 + j]!;
    expect(ok(b & 15, x[j]!)).toBe(true);
    expect(ok(b >> 4, x[16 + j]!)).toBe(true);
  }
  expect(out[2 + 15]! >> 4).toBe(0); // x[31] itself is −8·d
});

test("rows that the block size does not divide are refused", () => {
  expect(() => rowBytes("Q8_0", 48)).toThrow(/multiple of 32/);
});

test("the container: magic, version 3, counts, metadata, tensor table, each tensor at a multiple of 32", () => {
  const path = join(dir, "t.gguf");
  const a = Float32Array.from({ length: 6 }, (_, i) => i);
  writeGguf(path, new Map([["general.architecture", meta.str("x")], ["x.n", meta.u32(7)], ["x.list", meta.i32s([1, -2])]]), [
    { name: "a", shape: [2, 3], type: "F32", fill: (r0, n, out) => out.set(a.subarray(r0 * 3, (r0 + n) * 3)) },
    { name: "b", shape: [5], type: "F16", fill: (_r0, _n, out) => out.fill(0.5) },
  ]);
  const buf = readFileSync(path);
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  expect(buf.subarray(0, 4).toString()).toBe("GGUF");
  expect(v.getUint32(4, true)).toBe(3);
  expect(v.getBigUint64(8, true)).toBe(2n);
  expect(v.getBigUint64(16, true)).toBe(3n);
  let at = 24;
  const str = () => {
    const n = Number(v.getBigUint64(at, true));
    const s = buf.subarray(at + 8, at + 8 + n).toString();
    at += 8 + n;
    return s;
  };
  expect(str()).toBe("general.architecture");
  expect(v.getUint32(at, true)).toBe(8);
  at += 4;
  expect(str()).toBe("x");
  expect(str()).toBe("x.n");
  at += 4;
  expect(v.getUint32(at, true)).toBe(7);
  at += 4;
  expect(str()).toBe("x.list");
  expect([v.getUint32(at, true), v.getUint32(at + 4, true), Number(v.getBigUint64(at + 8, true))]).toEqual([9, 5, 2]);
  expect([v.getInt32(at + 16, true), v.getInt32(at + 20, true)]).toEqual([1, -2]);
  at += 24;
  const infos: { name: string; dims: number[]; type: number; offset: number }[] = [];
  for (let t = 0; t < 2; t++) {
    const name = str();
    const n = v.getUint32(at, true);
    const dims = Array.from({ length: n }, (_, i) => Number(v.getBigUint64(at + 4 + 8 * i, true)));
    at += 4 + 8 * n;
    infos.push({ name, dims, type: v.getUint32(at, true), offset: Number(v.getBigUint64(at + 4, true)) });
    at += 12;
  }
  expect(infos).toEqual([
    { name: "a", dims: [3, 2], type: 0, offset: 0 },
    { name: "b", dims: [5], type: 1, offset: 32 },
  ]);
  const data = Math.ceil(at / 32) * 32;
  expect(Array.from(new Float32Array(buf.buffer.slice(buf.byteOffset + data, buf.byteOffset + data + 24)))).toEqual(Array.from(a));
  expect(f16(v.getUint16(data + 32, true))).toBe(0.5);
  expect(buf.length).toBe(data + 64);
});

test("V heads go from grouped to tiled order: tiled head j·Hk + g reads grouped head g·r + j", () => {
  const s = { Hk: 2, Hv: 6 } as Shapes;
  expect(Array.from({ length: 6 }, (_, r) => groupedRow(s, r, 1))).toEqual([0, 3, 1, 4, 2, 5]);
  // rows of a head stay together and in order
  expect(Array.from({ length: 4 }, (_, r) => groupedRow(s, 2 * 2 + r, 2))).toEqual([2, 3, 8, 9]);
});
