// Image bytes → 8-bit RGB pixels, the way Pillow's `Image.open(f).convert("RGB")` gives them to the reference
// processor (transformers' Qwen2VLImageProcessorPil): alpha is dropped (not composited), palettes are looked up,
// grayscale is replicated, EXIF orientation is not applied, a GIF is its first frame. The format is sniffed from the
// bytes; the client's media type is not trusted.
//
// Decoders (all work inside the compiled binary: WebAssembly embedded as a file, or plain JS):
//   JPEG  @jsquash/jpeg  — libjpeg-turbo's decoder (MozJPEG build): bit-identical to Pillow's (libjpeg-turbo)
//   WebP  @jsquash/webp  — libwebp, as Pillow uses
//   PNG   fast-png       — lossless, so any correct decoder agrees (16-bit samples: the high byte, see below)
//   GIF   gifuct-js      — LZW frames; the first frame composed as Pillow composes it
//
// Dimensions are read from the header before any pixel is decoded, so a small file that claims a huge image (a
// decompression bomb) is refused without the allocation.
import jpegWasm from "@jsquash/jpeg/codec/dec/mozjpeg_dec.wasm" with { type: "file" };
import decodeJpegWasm, { init as initJpeg } from "@jsquash/jpeg/decode.js";
import webpWasm from "@jsquash/webp/codec/dec/webp_dec.wasm" with { type: "file" };
import decodeWebpWasm, { init as initWebp } from "@jsquash/webp/decode.js";
import { convertIndexedToRgb, decode as decodePng } from "fast-png";
import { decompressFrame, parseGIF } from "gifuct-js";
import { imageSize, type ImageFormat } from "./header.ts";
import { ImageError } from "./image-error.ts";

export type RgbImage = { width: number; height: number; data: Uint8Array }; // data: [height][width][3]

export type ImageLimits = {
  maxBytes: number; // encoded size
  maxPixels: number; // width × height, checked from the header before decoding
};

export async function decodeImage(bytes: Uint8Array, limits: ImageLimits): Promise<RgbImage & { format: ImageFormat }> {
  if (bytes.byteLength > limits.maxBytes)
    throw new ImageError("too_large", `the image is ${bytes.byteLength} bytes, more than the limit of ${limits.maxBytes}`);
  const size = imageSize(bytes);
  if (size.width * size.height > limits.maxPixels)
    throw new ImageError("too_large", `the image is ${size.width}×${size.height} pixels, more than the limit of ${limits.maxPixels}`);
  let image: RgbImage;
  try {
    image = await DECODERS[size.format](bytes);
  } catch (e) {
    if (e instanceof ImageError) throw e;
    throw new ImageError("corrupt", `the ${size.format.toUpperCase()} image could not be decoded (${e instanceof Error ? e.message : String(e)})`);
  }
  if (image.width !== size.width || image.height !== size.height)
    throw new ImageError("corrupt", `the ${size.format.toUpperCase()} image decodes to ${image.width}×${image.height}, its header says ${size.width}×${size.height}`);
  return { ...image, format: size.format };
}

const DECODERS: Record<ImageFormat, (bytes: Uint8Array) => Promise<RgbImage>> = {
  png: async (bytes) => png(bytes),
  jpeg: async (bytes) => {
    // libjpeg fills a truncated scan with gray and carries on; Pillow refuses it ("image file is truncated"), so do we
    if (!jpegComplete(bytes)) throw new ImageError("corrupt", "the JPEG image is truncated (no end-of-image marker after the scan)");
    await wasmReady("jpeg");
    return fromRgba(await decodeJpegWasm(exactBuffer(bytes)));
  },
  webp: async (bytes) => {
    await wasmReady("webp");
    return fromRgba(await decodeWebpWasm(exactBuffer(bytes)));
  },
  gif: async (bytes) => gif(bytes),
};

// --- internal ---

// The WebAssembly modules are compiled once, on first use, from the files Bun embeds in the compiled binary.
const wasm: Partial<Record<"jpeg" | "webp", Promise<void>>> = {};
async function wasmReady(which: "jpeg" | "webp"): Promise<void> {
  wasm[which] ??= (async () => {
    const module = await WebAssembly.compile(await Bun.file(which === "jpeg" ? jpegWasm : webpWasm).arrayBuffer());
    // Emscripten instantiates through this hook (the package would fetch the file by URL, which a binary cannot);
    // print/printErr keep libjpeg's warnings out of the server's stderr.
    const options = {
      instantiateWasm: (imports: ConstructorParameters<typeof WebAssembly.Instance>[1], done: (instance: WebAssembly.Instance) => void) => {
        const instance = new WebAssembly.Instance(module, imports);
        done(instance);
        return instance.exports;
      },
      print: () => {},
      printErr: () => {},
    };
    // Outside a browser the Emscripten glue sets `self.location = {href: ""}` as it starts (synchronously, in the
    // call); other Emscripten modules (xgrammar's) then take themselves for a browser script and fail to load, so
    // the global goes again at once (the decoders never read it outside a browser).
    const hadLocation = "location" in globalThis;
    const ready = (which === "jpeg" ? initJpeg : initWebp)(options as Parameters<typeof initJpeg>[0]);
    if (!hadLocation) Reflect.deleteProperty(globalThis, "location");
    await ready;
  })();
  await wasm[which];
}

// An end-of-image marker after the first start-of-scan (entropy-coded data stuffs every 0xFF, so FF D9 there is
// the marker itself).
function jpegComplete(b: Uint8Array): boolean {
  let at = 2;
  while (at + 1 < b.length && !(b[at] === 0xff && b[at + 1] === 0xda)) at++;
  for (at += 2; at + 1 < b.length; at++) if (b[at] === 0xff && b[at + 1] === 0xd9) return true;
  return false;
}

function exactBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

function fromRgba(img: { width: number; height: number; data: Uint8ClampedArray | Uint8Array }): RgbImage {
  const n = img.width * img.height;
  const data = new Uint8Array(n * 3);
  for (let i = 0; i < n; i++) {
    data[3 * i] = img.data[4 * i]!;
    data[3 * i + 1] = img.data[4 * i + 1]!;
    data[3 * i + 2] = img.data[4 * i + 2]!;
  }
  return { width: img.width, height: img.height, data };
}

// PNG: palette → RGB through the palette (its alpha dropped); gray → replicated, low bit depths scaled to 0..255 as
// Pillow's unpackers do; alpha channels dropped. 16-bit samples keep their high byte, which is what Pillow does for
// RGB(A); for 16-bit grayscale Pillow clips the value to 255 instead (an "I;16" artefact), which we do not copy.
function png(bytes: Uint8Array): RgbImage {
  const p = decodePng(bytes);
  const { width, height } = p;
  const n = width * height;
  const data = new Uint8Array(n * 3);
  if (p.palette) {
    const rgb = convertIndexedToRgb(p);
    const c = rgb.length / n;
    for (let i = 0; i < n; i++) for (let k = 0; k < 3; k++) data[3 * i + k] = rgb[c * i + k]!;
    return { width, height, data };
  }
  const c = p.channels;
  const d = p.depth;
  // sample i of row y: fast-png keeps 1/2/4-bit rows packed (MSB first, each row padded to a byte)
  const rowBytes = Math.ceil((width * c * d) / 8);
  const sample =
    d >= 8
      ? (y: number, i: number) => p.data[y * width * c + i]!
      : (y: number, i: number) => (p.data[y * rowBytes + ((i * d) >> 3)]! >> (8 - d - ((i * d) & 7))) & ((1 << d) - 1);
  const toByte = d === 16 ? (v: number) => v >> 8 : d === 8 ? (v: number) => v : (v: number) => (v * 255) / ((1 << d) - 1);
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const o = 3 * (y * width + x);
      if (c >= 3) for (let k = 0; k < 3; k++) data[o + k] = toByte(sample(y, c * x + k));
      else data[o] = data[o + 1] = data[o + 2] = toByte(sample(y, c * x));
    }
  return { width, height, data };
}

// GIF, first frame, as Pillow composes it: a canvas of the logical screen filled with the frame's transparent index
// (else index 0), the frame's indices pasted at its offset, then every index looked up in the frame's color table
// (local, else global; missing entries black).
function gif(bytes: Uint8Array): RgbImage {
  // the decoder pads missing LZW data with index 0; a file cut short lacks its trailer byte, so refuse that
  if (bytes[bytes.length - 1] !== 0x3b) throw new ImageError("corrupt", "the GIF image is truncated (no trailer)");
  const parsed = parseGIF(exactBuffer(bytes));
  const width = parsed.lsd.width;
  const height = parsed.lsd.height;
  const frame = parsed.frames.find((f) => "image" in f);
  if (!frame) throw new ImageError("corrupt", "the GIF has no image frame");
  const f = decompressFrame(frame, parsed.gct, false);
  const fill = "gce" in frame && frame.gce.extras.transparentColorGiven ? frame.gce.transparentColorIndex : 0;
  const table = f.colorTable;
  const data = new Uint8Array(width * height * 3);
  const { top, left, width: fw, height: fh } = f.dims;
  for (let y = 0; y < height; y++)
    for (let x = 0; x < width; x++) {
      const inside = x >= left && x < left + fw && y >= top && y < top + fh;
      const index = inside ? f.pixels[(y - top) * fw + (x - left)]! : fill;
      const color = table[index] ?? [0, 0, 0];
      data.set(color, 3 * (y * width + x));
    }
  return { width, height, data };
}
