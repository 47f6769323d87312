// Image inputs of a vision checkpoint, from the client's bytes (or URL, when allowed) to the rows that replace the
// image's pad tokens: fetch → content hash → image cache, or decode → preprocess → the native tower → cache.
//
//   const vision = VisionEncoder.open(model, dir, { allowUrls: false });   // null: the checkpoint has no tower
//   vision.tokensFor(source)          // pad tokens the image renders to (from its header alone; bytes only)
//   await vision.encode(source, signal)  // EncodedImage: hash, grid, tokens, embeds [tokens][hidden]
//
// The tower runs synchronously on the calling thread, between engine steps (a step and an encode never overlap).
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { ImageSource } from "../chat/ir.ts";
import { log } from "../log.ts";
import type { Model, VisionInfo } from "../native/model.ts";
import { decodeImage, type ImageLimits } from "./decode.ts";
import { ImageError } from "./image-error.ts";
import { imageSize } from "./header.ts";
import { ImageCache, type EncodedImage } from "./image-cache.ts";
import { preprocess, processorSettings, smartResize, type ProcessorSettings } from "./preprocess.ts";

export type VisionOptions = {
  allowUrls?: boolean; // fetch http(s) image URLs (default: refused with a clear error)
  limits?: Partial<ImageLimits>;
  cacheBytes?: number; // encoded images kept by content hash
  fetchTimeoutMs?: number;
};

export const DEFAULT_IMAGE_LIMITS: ImageLimits = { maxBytes: 20 << 20, maxPixels: 64 << 20 };
const DEFAULT_CACHE_BYTES = 256 << 20;

export class VisionEncoder {
  readonly cache: ImageCache;
  readonly limits: ImageLimits;
  private readonly allowUrls: boolean;
  private readonly fetchTimeoutMs: number;

  private constructor(
    private readonly model: Model,
    readonly info: VisionInfo,
    readonly settings: ProcessorSettings,
    options: VisionOptions,
  ) {
    this.cache = new ImageCache(options.cacheBytes ?? DEFAULT_CACHE_BYTES);
    this.limits = { ...DEFAULT_IMAGE_LIMITS, ...options.limits };
    this.allowUrls = options.allowUrls ?? false;
    this.fetchTimeoutMs = options.fetchTimeoutMs ?? 30_000;
  }

  // The encoder of a loaded model, or null when it has no vision tower. The processor settings are the checkpoint's
  // preprocessor_config.json; a tower without one serves no images (the settings would be guesses).
  static open(model: Model, dir: string, options: VisionOptions = {}): VisionEncoder | null {
    const info = model.vision;
    if (!info) return null;
    const path = join(dir, "preprocessor_config.json");
    if (!existsSync(path)) {
      log.warn(`${dir}: the checkpoint has a vision tower but no preprocessor_config.json; images will be refused`);
      return null;
    }
    const settings = processorSettings(JSON.parse(readFileSync(path, "utf8")));
    if (settings.patchSize !== info.patchSize || settings.temporalPatchSize !== info.temporalPatchSize || settings.mergeSize !== info.spatialMergeSize)
      throw new Error(`${path}: patch ${settings.patchSize}/${settings.temporalPatchSize}/${settings.mergeSize} disagrees with the tower's vision_config`);
    return new VisionEncoder(model, info, settings, options);
  }

  get padTokenId(): number {
    return this.info.imageTokenId;
  }

  // Pad tokens the image becomes, from its header: what the prompt is counted with before anything is decoded.
  tokensFor(source: ImageSource): number {
    if (source.kind === "url") throw new ImageError("fetch", "an image given by URL cannot be counted without fetching it; send it as base64");
    const { width, height } = imageSize(source.data);
    const s = this.settings;
    const [h, w] = s.doResize ? smartResize(height, width, s.patchSize * s.mergeSize, s.minPixels, s.maxPixels) : [height, width];
    return (h / s.patchSize) * (w / s.patchSize) / (s.mergeSize * s.mergeSize);
  }

  async encode(source: ImageSource, signal?: AbortSignal): Promise<EncodedImage> {
    const bytes = source.kind === "bytes" ? source.data : await this.fetch(source.url, signal);
    const hash = createHash("sha256").update(bytes).digest("hex");
    const cached = this.cache.get(hash);
    if (cached) return cached;
    // the same new image in requests that arrive together is encoded once
    let pending = this.inflight.get(hash);
    if (!pending) {
      pending = this.encodeNew(hash, bytes).finally(() => this.inflight.delete(hash));
      this.inflight.set(hash, pending);
    }
    return pending;
  }

  // --- internal ---

  private readonly inflight = new Map<string, Promise<EncodedImage>>();

  private async encodeNew(hash: string, bytes: Uint8Array): Promise<EncodedImage> {
    const patches = preprocess(await decodeImage(bytes, this.limits), this.settings);
    const embeds = await this.model.encodeImage(patches.pixels, patches.grid);
    const image: EncodedImage = { hash, grid: patches.grid, tokens: patches.tokens, embeds };
    this.cache.set(image);
    return image;
  }

  private async fetch(url: string, signal?: AbortSignal): Promise<Uint8Array> {
    if (!this.allowUrls)
      throw new ImageError("fetch", "image URLs are not fetched by this server: send the image as base64 (a data URL), or start `splash serve --allow-image-urls`");
    const timeout = AbortSignal.timeout(this.fetchTimeoutMs);
    let res: Response;
    try {
      res = await fetch(url, { signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
    } catch (e) {
      throw new ImageError("fetch", `the image at ${url} could not be fetched (${e instanceof Error ? e.message : String(e)})`);
    }
    if (!res.ok) throw new ImageError("fetch", `the image at ${url} could not be fetched (HTTP ${res.status})`);
    const declared = Number(res.headers.get("content-length") ?? 0);
    if (declared > this.limits.maxBytes) throw new ImageError("too_large", `the image at ${url} is ${declared} bytes, more than the limit of ${this.limits.maxBytes}`);
    // read at most maxBytes + 1, whatever the server claimed
    const chunks: Uint8Array[] = [];
    let n = 0;
    for await (const chunk of res.body ?? []) {
      n += chunk.byteLength;
      if (n > this.limits.maxBytes) throw new ImageError("too_large", `the image at ${url} is more than the limit of ${this.limits.maxBytes} bytes`);
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  }
}
