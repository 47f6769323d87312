// Encoded images by content hash, least recently used first out, bounded in bytes: an agent resends the same
// screenshot with every turn of its history, and the tower runs once for it.
export type EncodedImage = {
  hash: string; // sha256 of the image bytes as the client sent them (also its prefix-cache key)
  grid: [number, number, number]; // (t, h, w) in patches
  tokens: number; // pad tokens = rows of embeds
  embeds: Float32Array; // [tokens][hidden]
};

export class ImageCache {
  private readonly entries = new Map<string, EncodedImage>(); // insertion order = recency
  private bytes = 0;
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {}

  get(hash: string): EncodedImage | undefined {
    const e = this.entries.get(hash);
    if (!e) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.entries.delete(hash);
    this.entries.set(hash, e);
    return e;
  }

  // An image larger than the whole budget is not kept.
  set(image: EncodedImage): void {
    const old = this.entries.get(image.hash);
    if (old) {
      this.bytes -= old.embeds.byteLength;
      this.entries.delete(image.hash);
    }
    if (image.embeds.byteLength > this.maxBytes) return;
    this.entries.set(image.hash, image);
    this.bytes += image.embeds.byteLength;
    for (const [hash, e] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.entries.delete(hash);
      this.bytes -= e.embeds.byteLength;
    }
  }

  get size(): number {
    return this.entries.size;
  }

  get usedBytes(): number {
    return this.bytes;
  }
}
