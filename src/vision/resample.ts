// Pillow's `Image.resize(size, Image.BICUBIC)` on an 8-bit RGB image, integer for integer: the reference processor
// (Qwen2VLImageProcessorPil) resizes with it before normalizing, so matching it makes pixel_values match exactly.
// A port of Pillow's src/libImaging/Resample.c (precompute_coeffs, normalize_coeffs_8bpc, the horizontal then the
// vertical 8-bit pass): a cubic kernel with a = −0.5, support 2 × the downscale factor, weights normalized to sum 1,
// then fixed point with 22 fractional bits, rounding by adding half, clipping to 0..255 after each pass.
import type { RgbImage } from "./decode.ts";

const PRECISION_BITS = 32 - 8 - 2;
const SUPPORT = 2;

function cubic(x: number): number {
  const a = -0.5;
  if (x < 0) x = -x;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

type Coeffs = { ksize: number; bounds: Int32Array; k: Int32Array }; // bounds: [out][xmin, count]

// Which input pixels each output pixel reads, and with which fixed-point weights (Pillow's precompute_coeffs).
function coeffs(inSize: number, outSize: number): Coeffs {
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = SUPPORT * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const bounds = new Int32Array(outSize * 2);
  const k = new Int32Array(outSize * ksize);
  const w = new Float64Array(ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const ss = 1 / filterscale;
    const xmin = Math.max(Math.trunc(center - support + 0.5), 0);
    const xmax = Math.min(Math.trunc(center + support + 0.5), inSize) - xmin;
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      w[x] = cubic((x + xmin - center + 0.5) * ss);
      ww += w[x]!;
    }
    for (let x = 0; x < xmax; x++) {
      const v = ww !== 0 ? w[x]! / ww : w[x]!;
      k[xx * ksize + x] = Math.trunc(v < 0 ? -0.5 + v * (1 << PRECISION_BITS) : 0.5 + v * (1 << PRECISION_BITS));
    }
    bounds[2 * xx] = xmin;
    bounds[2 * xx + 1] = xmax;
  }
  return { ksize, bounds, k };
}

function clip8(v: number): number {
  if (v >= 1 << (PRECISION_BITS + 8)) return 255;
  if (v <= 0) return 0;
  return v >> PRECISION_BITS;
}

export function resizeBicubic(img: RgbImage, width: number, height: number): RgbImage {
  if (img.width === width && img.height === height) return img; // Pillow returns a copy unchanged
  const h = coeffs(img.width, width);
  const v = coeffs(img.height, height);
  // rows the vertical pass reads, so the horizontal pass computes only those (as Pillow does)
  const first = v.bounds[0]!;
  const last = v.bounds[2 * height - 2]! + v.bounds[2 * height - 1]!;
  let src = img.data;
  let srcWidth = img.width;
  let rowOffset = 0;
  const half = 1 << (PRECISION_BITS - 1);
  if (width !== img.width) {
    const rows = last - first;
    const tmp = new Uint8Array(rows * width * 3);
    for (let y = 0; y < rows; y++) {
      const inRow = (y + first) * img.width * 3;
      for (let xx = 0; xx < width; xx++) {
        const xmin = h.bounds[2 * xx]!;
        const n = h.bounds[2 * xx + 1]!;
        const kb = xx * h.ksize;
        let s0 = half;
        let s1 = half;
        let s2 = half;
        for (let x = 0; x < n; x++) {
          const kx = h.k[kb + x]!;
          const p = inRow + (x + xmin) * 3;
          s0 += img.data[p]! * kx;
          s1 += img.data[p + 1]! * kx;
          s2 += img.data[p + 2]! * kx;
        }
        const o = (y * width + xx) * 3;
        tmp[o] = clip8(s0);
        tmp[o + 1] = clip8(s1);
        tmp[o + 2] = clip8(s2);
      }
    }
    src = tmp;
    srcWidth = width;
    rowOffset = first;
  }
  if (height === img.height) return { width, height, data: src };
  const out = new Uint8Array(height * width * 3);
  for (let yy = 0; yy < height; yy++) {
    const ymin = v.bounds[2 * yy]! - rowOffset;
    const n = v.bounds[2 * yy + 1]!;
    const kb = yy * v.ksize;
    for (let xx = 0; xx < width; xx++) {
      let s0 = half;
      let s1 = half;
      let s2 = half;
      for (let y = 0; y < n; y++) {
        const ky = v.k[kb + y]!;
        const p = ((y + ymin) * srcWidth + xx) * 3;
        s0 += src[p]! * ky;
        s1 += src[p + 1]! * ky;
        s2 += src[p + 2]! * ky;
      }
      const o = (yy * width + xx) * 3;
      out[o] = clip8(s0);
      out[o + 1] = clip8(s1);
      out[o + 2] = clip8(s2);
    }
  }
  return { width, height, data: out };
}
