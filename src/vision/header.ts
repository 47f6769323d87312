// An image's format and dimensions from its first bytes, before decoding (so a size limit is enforced without
// allocating the pixels). Only the four formats the vision path decodes are recognised.
import { ImageError } from "./image-error.ts";

export type ImageFormat = "png" | "jpeg" | "webp" | "gif";

export function imageSize(b: Uint8Array): { format: ImageFormat; width: number; height: number } {
  const ascii = (at: number, s: string) => [...s].every((ch, i) => b[at + i] === ch.charCodeAt(0));
  const be16 = (at: number) => (b[at]! << 8) | b[at + 1]!;
  const le16 = (at: number) => b[at]! | (b[at + 1]! << 8);
  const le24 = (at: number) => le16(at) | (b[at + 2]! << 16);
  const need = (n: number, what: string) => {
    if (b.byteLength < n) throw new ImageError("corrupt", `the ${what} header is truncated`);
  };
  if (b.byteLength >= 8 && b[0] === 0x89 && ascii(1, "PNG\r\n\x1a\n")) {
    need(24, "PNG");
    if (!ascii(12, "IHDR")) throw new ImageError("corrupt", "the PNG does not start with an IHDR chunk");
    return { format: "png", width: (be16(16) << 16) + be16(18), height: (be16(20) << 16) + be16(22) };
  }
  if (ascii(0, "GIF87a") || ascii(0, "GIF89a")) {
    need(10, "GIF");
    return { format: "gif", width: le16(6), height: le16(8) };
  }
  if (ascii(0, "RIFF") && ascii(8, "WEBP")) {
    need(30, "WebP");
    if (ascii(12, "VP8 ")) {
      if (!(b[23] === 0x9d && b[24] === 0x01 && b[25] === 0x2a)) throw new ImageError("corrupt", "the WebP (VP8) frame header is malformed");
      return { format: "webp", width: le16(26) & 0x3fff, height: le16(28) & 0x3fff };
    }
    if (ascii(12, "VP8L")) {
      if (b[20] !== 0x2f) throw new ImageError("corrupt", "the WebP (VP8L) signature is malformed");
      const bits = b[21]! | (b[22]! << 8) | (b[23]! << 16) | (b[24]! << 24);
      return { format: "webp", width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    if (ascii(12, "VP8X")) return { format: "webp", width: le24(24) + 1, height: le24(27) + 1 };
    throw new ImageError("corrupt", "the WebP has no VP8, VP8L or VP8X chunk");
  }
  if (b.byteLength >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return { format: "jpeg", ...jpegSize(b) };
  throw new ImageError("unsupported", `unsupported image format${sniffName(b)}: expected PNG, JPEG, WebP or GIF`);
}

// Walks the JPEG markers to the first start-of-frame (SOF0..SOF15 but DHT C4, JPG C8, DAC CC).
function jpegSize(b: Uint8Array): { width: number; height: number } {
  let at = 2;
  while (at + 9 < b.byteLength) {
    if (b[at] !== 0xff) throw new ImageError("corrupt", "the JPEG marker structure is malformed");
    const m = b[at + 1]!;
    if (m === 0xff) {
      at++; // fill byte
      continue;
    }
    if (m === 0x01 || (m >= 0xd0 && m <= 0xd8)) {
      at += 2; // markers without a length
      continue;
    }
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
      return { height: (b[at + 5]! << 8) | b[at + 6]!, width: (b[at + 7]! << 8) | b[at + 8]! };
    }
    if (m === 0xd9 || m === 0xda) break; // end of image, or scan data before any frame header
    at += 2 + ((b[at + 2]! << 8) | b[at + 3]!);
  }
  throw new ImageError("corrupt", "the JPEG has no frame header");
}

function sniffName(b: Uint8Array): string {
  const ascii = (at: number, s: string) => [...s].every((ch, i) => b[at + i] === ch.charCodeAt(0));
  if (ascii(0, "BM")) return " (BMP)";
  if (ascii(0, "II*\0") || ascii(0, "MM\0*")) return " (TIFF)";
  if (ascii(4, "ftypavif")) return " (AVIF)";
  if (ascii(4, "ftyphei") || ascii(4, "ftypmif1")) return " (HEIC)";
  if (ascii(0, "<?xml") || ascii(0, "<svg")) return " (SVG)";
  return "";
}
