// Decoded RGB pixels → the vision tower's input, exactly as transformers' Qwen2VLImageProcessorPil (the processor
// transformers maps to qwen3_5) computes pixel_values and image_grid_thw:
//   1. smart_resize: height and width to multiples of patch × merge, aspect kept, pixel count within
//      [min_pixels, max_pixels]; Pillow bicubic (resample.ts, integer-exact)
//   2. rescale (× 1/255, in float64, stored as float32) and normalize ((x − mean) / std in float32)
//   3. patches: one row per patch of (channel, temporal, y, x), the still image repeated on the temporal axis;
//      rows in merge-window order ((h/m, w/m) windows row-major, each window's m × m patches row-major)
// Settings come from the checkpoint's preprocessor_config.json.
import { z } from "zod";
import type { RgbImage } from "./decode.ts";
import { ImageError } from "./image-error.ts";
import { resizeBicubic } from "./resample.ts";

export type ProcessorSettings = {
  patchSize: number;
  temporalPatchSize: number;
  mergeSize: number;
  minPixels: number;
  maxPixels: number;
  mean: [number, number, number];
  std: [number, number, number];
  rescaleFactor: number;
  doResize: boolean;
  doRescale: boolean;
  doNormalize: boolean;
};

// One image ready for splash_vision_encode: pixels [t·h·w][3·T·P·P] and its grid in patches.
export type ImagePatches = { pixels: Float32Array; grid: [number, number, number]; tokens: number; width: number; height: number };

const PreprocessorConfig = z.object({
  patch_size: z.number().int().positive().default(14),
  temporal_patch_size: z.number().int().positive().default(2),
  merge_size: z.number().int().positive().default(2),
  min_pixels: z.number().int().positive().optional(),
  max_pixels: z.number().int().positive().optional(),
  size: z.object({ shortest_edge: z.number().int().positive(), longest_edge: z.number().int().positive() }).partial().optional(),
  image_mean: z.tuple([z.number(), z.number(), z.number()]).default([0.48145466, 0.4578275, 0.40821073]),
  image_std: z.tuple([z.number(), z.number(), z.number()]).default([0.26862954, 0.26130258, 0.27577711]),
  rescale_factor: z.number().positive().default(1 / 255),
  do_resize: z.boolean().default(true),
  do_rescale: z.boolean().default(true),
  do_normalize: z.boolean().default(true),
  resample: z.literal(3, { message: "only resample 3 (bicubic) is supported" }).default(3),
});

// The processor settings of a checkpoint's preprocessor_config.json (transformers' defaults for missing keys;
// min/max_pixels win over size.shortest_edge/longest_edge, as the processor's constructor does).
export function processorSettings(json: unknown): ProcessorSettings {
  const c = PreprocessorConfig.parse(json);
  return {
    patchSize: c.patch_size,
    temporalPatchSize: c.temporal_patch_size,
    mergeSize: c.merge_size,
    minPixels: c.min_pixels ?? c.size?.shortest_edge ?? 56 * 56,
    maxPixels: c.max_pixels ?? c.size?.longest_edge ?? 28 * 28 * 1280,
    mean: c.image_mean,
    std: c.image_std,
    rescaleFactor: c.rescale_factor,
    doResize: c.do_resize,
    doRescale: c.do_rescale,
    doNormalize: c.do_normalize,
  };
}

// Python's round(): halves go to the even neighbour.
function pyRound(x: number): number {
  const f = Math.floor(x);
  const d = x - f;
  return d > 0.5 ? f + 1 : d < 0.5 ? f : f % 2 === 0 ? f : f + 1;
}

// transformers' smart_resize, operation for operation.
export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): [number, number] {
  if (Math.max(height, width) / Math.min(height, width) > 200)
    throw new ImageError("unsupported", `the image's aspect ratio ${width}×${height} is more extreme than 200:1`);
  let h = pyRound(height / factor) * factor;
  let w = pyRound(width / factor) * factor;
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return [h, w];
}

export function preprocess(img: RgbImage, s: ProcessorSettings): ImagePatches {
  const P = s.patchSize;
  const T = s.temporalPatchSize;
  const m = s.mergeSize;
  const [height, width] = s.doResize ? smartResize(img.height, img.width, P * m, s.minPixels, s.maxPixels) : [img.height, img.width];
  if (height % (P * m) || width % (P * m))
    throw new ImageError("unsupported", `the image is ${width}×${height}, not a multiple of ${P * m} pixels (do_resize is off)`);
  const r = resizeBicubic(img, width, height);
  // float32 per channel value of each byte: rescale in float64 then float32, normalize in float32
  const lut = [0, 1, 2].map((c) => {
    const t = new Float32Array(256);
    for (let v = 0; v < 256; v++) {
      let x = s.doRescale ? Math.fround(v * s.rescaleFactor) : v;
      if (s.doNormalize) x = Math.fround(Math.fround(x - Math.fround(s.mean[c]!)) / Math.fround(s.std[c]!));
      t[v] = x;
    }
    return t;
  });
  const gh = height / P;
  const gw = width / P;
  const rowFloats = 3 * T * P * P;
  const pixels = new Float32Array(gh * gw * rowFloats);
  let row = 0;
  for (let bh = 0; bh < gh / m; bh++)
    for (let bw = 0; bw < gw / m; bw++)
      for (let mh = 0; mh < m; mh++)
        for (let mw = 0; mw < m; mw++, row++) {
          const y0 = (bh * m + mh) * P;
          const x0 = (bw * m + mw) * P;
          let o = row * rowFloats;
          for (let c = 0; c < 3; c++)
            for (let t = 0; t < T; t++)
              for (let py = 0; py < P; py++) {
                const src = ((y0 + py) * width + x0) * 3 + c;
                for (let px = 0; px < P; px++) pixels[o++] = lut[c]![r.data[src + 3 * px]!]!;
              }
        }
  return { pixels, grid: [1, gh, gw], tokens: (gh * gw) / (m * m), width, height };
}
