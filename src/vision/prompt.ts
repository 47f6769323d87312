// A rendered prompt's image placeholders made real: the chat template writes one <|image_pad|> per image (between
// <|vision_start|> and <|vision_end|>); the processor's expansion repeats it once per merged patch, and the engine
// gets each image's rows, its place and its content hash, with the prompt's M-RoPE positions.
import type { PromptImages } from "../engine/types.ts";
import type { EncodedImage } from "./image-cache.ts";
import { mropePositions } from "./positions.ts";

// ids with the k-th pad repeated images[k].tokens times; the index of each image's first pad.
export function expandImagePads(ids: Int32Array, padId: number, tokens: readonly number[]): { ids: Int32Array; starts: number[] } {
  const pads = ids.reduce((n, t) => n + (t === padId ? 1 : 0), 0);
  if (pads !== tokens.length) throw new Error(`the chat template wrote ${pads} image placeholders for ${tokens.length} images`);
  const out = new Int32Array(ids.length - pads + tokens.reduce((a, b) => a + b, 0));
  const starts: number[] = [];
  let o = 0;
  for (const t of ids) {
    if (t !== padId) {
      out[o++] = t;
      continue;
    }
    starts.push(o);
    out.fill(padId, o, o + tokens[starts.length - 1]!);
    o += tokens[starts.length - 1]!;
  }
  return { ids: out, starts };
}

export function promptImages(length: number, starts: readonly number[], images: readonly EncodedImage[], merge: number): PromptImages {
  const { positions, ropeDelta } = mropePositions(
    length,
    images.map((im, k) => ({ start: starts[k]!, grid: im.grid })),
    merge,
  );
  return { spans: images.map((im, k) => ({ start: starts[k]!, rows: im.tokens, embeds: im.embeds, hash: im.hash })), positions, ropeDelta };
}
