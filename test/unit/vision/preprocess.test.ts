// Decoding + preprocessing against the vision fixture's processor goldens (transformers' Qwen2VLImageProcessorPil
// on the committed PNG/JPEG files): grid, resized size and every pixel_values float.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeImage } from "../../../src/vision/decode.ts";
import { preprocess, processorSettings, smartResize } from "../../../src/vision/preprocess.ts";

const dir = join(import.meta.dir, "../../fixtures/models/qwen35-vision-tiny");
const manifest = JSON.parse(readFileSync(join(dir, "golden/manifest.json"), "utf8")) as {
  prompts: {
    pixel_values: { file: string; shape: [number, number] };
    images: { file: string; grid_thw: [number, number, number]; resized_height: number; resized_width: number; patch_rows: [number, number] }[];
  }[];
};
const settings = processorSettings(JSON.parse(readFileSync(join(dir, "preprocessor_config.json"), "utf8")));
const limits = { maxBytes: 1 << 24, maxPixels: 1 << 26 };

describe("preprocessing matches the reference processor", () => {
  for (const [pi, p] of manifest.prompts.entries()) {
    const golden = new Float32Array(readFileSync(join(dir, "golden", p.pixel_values.file)).buffer.slice(0));
    const cols = p.pixel_values.shape[1];
    for (const im of p.images) {
      test(`prompt ${pi}: ${im.file}`, async () => {
        const img = await decodeImage(new Uint8Array(readFileSync(join(dir, "golden", im.file))), limits);
        const out = preprocess(img, settings);
        expect(out.grid).toEqual(im.grid_thw);
        expect([out.height, out.width]).toEqual([im.resized_height, im.resized_width]);
        const want = golden.subarray(im.patch_rows[0] * cols, im.patch_rows[1] * cols);
        expect(out.pixels.length).toBe(want.length);
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(out.pixels[i]! - want[i]!));
        expect(worst).toBe(0); // bit-exact: Pillow's integer bicubic and the float32 normalization reproduced
      });
    }
  }
});

test("smart_resize: rounding half to even, min/max pixels, aspect ratio limit", () => {
  expect(smartResize(64, 96, 32, 4096, 12288)).toEqual([64, 96]);
  expect(smartResize(48, 80, 32, 0, 1 << 30)).toEqual([64, 64]); // 1.5 → 2, 2.5 → 2 (Python's round)
  expect(smartResize(123, 201, 32, 4096, 12288)).toEqual([64, 128]);
  expect(smartResize(40, 50, 32, 4096, 12288)).toEqual([64, 96]);
  expect(() => smartResize(10, 2010, 32, 4096, 12288)).toThrow(/aspect ratio/);
});
