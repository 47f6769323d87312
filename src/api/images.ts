// Image inputs as the client sent them, turned into the IR's ImageSource. Decoding and preprocessing belong to the
// vision path; here a data URL or base64 payload only becomes bytes, and a model without vision refuses images.
import type { ImageSource } from "../chat/ir.ts";
import { invalidRequest } from "./errors.ts";

export function base64Image(data: string, mediaType: string | undefined, param: string): ImageSource {
  const clean = data.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(clean)) throw invalidRequest("image data is not valid base64", param);
  return { kind: "bytes", data: Buffer.from(clean, "base64"), mediaType };
}

// `data:image/png;base64,...` or an http(s) URL (fetched, if at all, by the vision path).
export function imageFromUrl(url: string, param: string): ImageSource {
  if (url.startsWith("data:")) {
    const m = /^data:([^;,]*)(;[^,]*)?,(.*)$/s.exec(url);
    if (!m || !(m[2] ?? "").includes("base64")) throw invalidRequest("expected a base64 data URL (data:<type>;base64,<data>)", param);
    return base64Image(m[3]!, m[1] || undefined, param);
  }
  if (/^https?:\/\//.test(url)) return { kind: "url", url };
  throw invalidRequest("expected an http(s) URL or a base64 data URL", param);
}

export function requireVision(vision: boolean, model: string, param: string): void {
  if (!vision) throw invalidRequest(`model '${model}' does not accept images`, param, "unsupported_content");
}
