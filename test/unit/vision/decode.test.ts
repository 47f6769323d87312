// Image decoding against Pillow (test/fixtures/vision/expected.json: the sha256 of Pillow's convert("RGB") bytes of
// each committed file, every format and mode the decoders handle), and the refusals: corrupt, unsupported, too large.
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { decodeImage } from "../../../src/vision/decode.ts";
import { ImageError } from "../../../src/vision/image-error.ts";

const dir = join(import.meta.dir, "../../fixtures/vision");
const expected = JSON.parse(readFileSync(join(dir, "expected.json"), "utf8")) as Record<string, { width: number; height: number; rgb_sha256: string }>;
const limits = { maxBytes: 1 << 20, maxPixels: 1 << 22 };
const bytes = (name: string) => new Uint8Array(readFileSync(join(dir, name)));

// Pillow 13 decodes 16-bit RGB PNGs to their high byte; so do we (the fixture's samples are v·257, high byte v).
describe("decoded pixels equal Pillow's convert('RGB')", () => {
  for (const [name, want] of Object.entries(expected)) {
    test(name, async () => {
      const img = await decodeImage(bytes(name), limits);
      expect([img.width, img.height]).toEqual([want.width, want.height]);
      expect(createHash("sha256").update(img.data).digest("hex")).toBe(want.rgb_sha256);
    });
  }
});

async function refusal(b: Uint8Array, l = limits): Promise<ImageError> {
  try {
    await decodeImage(b, l);
  } catch (e) {
    if (e instanceof ImageError) return e;
    throw e;
  }
  throw new Error("decoded");
}

describe("bad images are refused with the reason", () => {
  test("unsupported formats are named", async () => {
    const bmp = new Uint8Array(64);
    bmp.set([0x42, 0x4d]);
    expect(await refusal(bmp)).toMatchObject({ reason: "unsupported", message: expect.stringContaining("BMP") });
    expect(await refusal(new TextEncoder().encode("<svg xmlns='http://www.w3.org/2000/svg'/>"))).toMatchObject({ reason: "unsupported" });
    expect(await refusal(new Uint8Array([1, 2, 3]))).toMatchObject({ reason: "unsupported", message: expect.stringContaining("PNG, JPEG, WebP or GIF") });
  });
  test("truncated or damaged files are corrupt", async () => {
    for (const name of ["rgb.png", "baseline.jpg", "lossy.webp", "still.gif"]) {
      const b = bytes(name);
      const e = await refusal(b.subarray(0, Math.floor(b.length / 2)));
      expect(e.reason, name).toBe("corrupt");
      expect(e.message).toContain(name.endsWith("jpg") ? "JPEG" : name.endsWith("png") ? "PNG" : name.endsWith("webp") ? "WEBP" : "GIF");
    }
    const png = bytes("rgb.png").slice();
    png.fill(0x55, 60, 200); // damaged deflate stream
    expect((await refusal(png)).reason).toBe("corrupt");
  });
  test("byte and pixel limits come before decoding", async () => {
    expect(await refusal(bytes("rgb.png"), { maxBytes: 100, maxPixels: 1 << 22 })).toMatchObject({ reason: "too_large", message: expect.stringContaining("bytes") });
    expect(await refusal(bytes("rgb.png"), { maxBytes: 1 << 20, maxPixels: 100 })).toMatchObject({ reason: "too_large", message: expect.stringContaining("37×23") });
    // a 24-byte PNG header claiming 100000 × 100000 pixels is refused without decoding anything
    const bomb = bytes("rgb.png").slice(0, 33);
    new DataView(bomb.buffer).setUint32(16, 100000);
    new DataView(bomb.buffer).setUint32(20, 100000);
    expect(await refusal(bomb)).toMatchObject({ reason: "too_large" });
  });
});

// The decoders' Emscripten glue sets self.location outside a browser; left there, xgrammar's WebAssembly loader takes
// itself for a browser script and structured output fails for the rest of the process.
test("decoding leaves no browser globals behind", async () => {
  expect("location" in globalThis).toBe(false);
  await decodeImage(bytes("baseline.jpg"), limits);
  await decodeImage(bytes("lossy.webp"), limits);
  expect("location" in globalThis).toBe(false);
});
