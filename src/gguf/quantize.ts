// ggml's tensor encodings that the exporter writes, from f32 rows. The block formats follow ggml's reference
// quantizers (quantize_row_q8_0_ref, quantize_row_q4_0_ref), so a file we write holds what llama.cpp's own tools
// would have written from the same floats:
//   Q8_0: blocks of 32 → f16 d, int8 q[32];  d = max|x| / 127, q = round(x / d) (half away from zero).   8.5 bits
//   Q4_0: blocks of 32 → f16 d, u8 qs[16];   d = m / −8 where m is the element of largest magnitude (sign kept),
//         q = min(15, trunc(x / d + 8.5)); byte j holds element j in its low nibble and element j + 16 in its
//         high nibble; x ≈ (q − 8) · d.                                                                   4.5 bits
// F16 rounds to nearest even (Float16Array does it); BF16 rounds to nearest even on the top 16 bits.

export type GgmlType = "F32" | "F16" | "BF16" | "Q8_0" | "Q4_0";

export const GGML_TYPE_ID: Record<GgmlType, number> = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, BF16: 30 };
// [elements per block, bytes per block]
export const GGML_BLOCK: Record<GgmlType, [number, number]> = { F32: [1, 4], F16: [1, 2], BF16: [1, 2], Q8_0: [32, 34], Q4_0: [32, 18] };

export function rowBytes(type: GgmlType, cols: number): number {
  const [n, bytes] = GGML_BLOCK[type];
  if (cols % n !== 0) throw new Error(`${type} needs rows of a multiple of ${n} elements, not ${cols}`);
  return (cols / n) * bytes;
}

const f16 = new Float16Array(1);
const f16bits = new Uint16Array(f16.buffer);
function toF16Bits(x: number): number {
  f16[0] = x;
  return f16bits[0]!;
}

// roundf: half away from zero.
function roundAway(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5);
}

function q8_0(src: Float32Array, out: Uint8Array, view: DataView, cols: number, n: number): number {
  let o = 0;
  for (let r = 0; r < n; r++) {
    for (let b = r * cols, end = b + cols; b < end; b += 32) {
      let amax = 0;
      for (let j = 0; j < 32; j++) {
        const a = Math.abs(src[b + j]!);
        if (a > amax) amax = a;
      }
      const d = Math.fround(amax / 127);
      const id = d ? Math.fround(1 / d) : 0;
      view.setUint16(o, toF16Bits(d), true);
      for (let j = 0; j < 32; j++) out[o + 2 + j] = roundAway(Math.fround(src[b + j]! * id)) & 0xff;
      o += 34;
    }
  }
  return o;
}

function q4_0(src: Float32Array, out: Uint8Array, view: DataView, cols: number, n: number): number {
  let o = 0;
  for (let r = 0; r < n; r++) {
    for (let b = r * cols, end = b + cols; b < end; b += 32) {
      let amax = 0;
      let max = 0;
      for (let j = 0; j < 32; j++) {
        const v = src[b + j]!;
        if (Math.abs(v) > amax) {
          amax = Math.abs(v);
          max = v;
        }
      }
      const d = Math.fround(max / -8);
      const id = d ? Math.fround(1 / d) : 0;
      view.setUint16(o, toF16Bits(d), true);
      for (let j = 0; j < 16; j++) {
        const x0 = Math.trunc(Math.fround(Math.fround(src[b + j]! * id) + 8.5));
        const x1 = Math.trunc(Math.fround(Math.fround(src[b + 16 + j]! * id) + 8.5));
        out[o + 2 + j] = Math.min(15, x0) | (Math.min(15, x1) << 4);
      }
      o += 18;
    }
  }
  return o;
}

// Encodes n rows of `cols` floats into out (which must hold n · rowBytes(type, cols) bytes); returns bytes written.
export function encodeRows(type: GgmlType, src: Float32Array, n: number, cols: number, out: Uint8Array): number {
  const bytes = n * rowBytes(type, cols);
  const count = n * cols;
  switch (type) {
    case "F32":
      out.set(new Uint8Array(src.buffer, src.byteOffset, count * 4));
      return bytes;
    case "F16": {
      const h = new Float16Array(out.buffer, out.byteOffset, count);
      h.set(src.subarray(0, count));
      return bytes;
    }
    case "BF16": {
      const u = new Uint32Array(src.buffer, src.byteOffset, count);
      const h = new Uint16Array(out.buffer, out.byteOffset, count);
      for (let i = 0; i < count; i++) {
        const x = u[i]!;
        // NaN stays a (quiet) NaN; everything else rounds to nearest even
        h[i] = (x & 0x7fffffff) > 0x7f800000 ? (x >>> 16) | 0x40 : (x + 0x7fff + ((x >>> 16) & 1)) >>> 16;
      }
      return bytes;
    }
    case "Q8_0":
      return q8_0(src, out, new DataView(out.buffer, out.byteOffset, bytes), cols, n);
    case "Q4_0":
      return q4_0(src, out, new DataView(out.buffer, out.byteOffset, bytes), cols, n);
  }
}
