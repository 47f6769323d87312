// What a prompt's images (GenerateRequest.images) mean for one step and for the prefix cache.
import type { BlockExtras } from "./block-hash.ts";
import type { PromptImages } from "./types.ts";

// The image rows and M-RoPE positions of the step that runs tokens [start, start + count) of a sequence: the rows
// of the pads among them (in order), and each token's (t, h, w): the prompt's own ids, then i + ropeDelta.
export function stepImages(images: PromptImages | undefined, start: number, count: number): { embeds?: Float32Array; positions?: Int32Array } {
  if (!images) return {};
  const promptLength = images.positions.length / 3;
  const positions = new Int32Array(3 * count);
  for (let j = 0; j < count; j++) {
    const i = start + j;
    if (i < promptLength) positions.set(images.positions.subarray(3 * i, 3 * i + 3), 3 * j);
    else positions.fill(i + images.ropeDelta, 3 * j, 3 * j + 3);
  }
  const parts: Float32Array[] = [];
  for (const s of images.spans) {
    const lo = Math.max(s.start, start);
    const hi = Math.min(s.start + s.rows, start + count);
    if (lo >= hi) continue;
    const width = s.embeds.length / s.rows;
    parts.push(s.embeds.subarray((lo - s.start) * width, (hi - s.start) * width));
  }
  if (parts.length === 0) return { positions };
  if (parts.length === 1) return { embeds: parts[0]!, positions };
  const embeds = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) embeds.set(p, o), (o += p.length);
  return { embeds, positions };
}

// vLLM's "extra keys": a block holding image pads is named by the images' content too (hash and the offset of the
// block's first pad inside the image), so two different images at the same place never share KV pages or state.
export function imageBlockExtras(images: PromptImages | undefined): BlockExtras | undefined {
  if (!images || images.spans.length === 0) return undefined;
  return (start, end) => {
    const keys = images.spans.filter((s) => s.start < end && s.start + s.rows > start).map((s) => `${s.hash}@${Math.max(start - s.start, 0)}`);
    return keys.length ? keys.join(",") : undefined;
  };
}
