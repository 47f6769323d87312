// The engine's share of images, without a model: each step's rows and M-RoPE positions, and block hashes that name
// the images a block holds (so different images behind identical pad tokens never share prefix-cache entries).
import { expect, test } from "bun:test";
import { extendChain, rootHash, type BlockHash } from "../../../src/engine/block-hash.ts";
import { imageBlockExtras, stepImages } from "../../../src/engine/images.ts";
import type { PromptImages } from "../../../src/engine/types.ts";

const H = 2; // hidden size of the toy rows
// prompt of 12: text 0-1, image A pads 2-5, text 6, image B pads 7-8, text 9-11
function images(hashA = "A", hashB = "B"): PromptImages {
  const rows = (n: number, base: number) => Float32Array.from({ length: n * H }, (_, i) => base + i);
  const positions = new Int32Array(12 * 3);
  for (let i = 0; i < 12; i++) positions.fill(100 + i, 3 * i, 3 * i + 3);
  return { spans: [{ start: 2, rows: 4, embeds: rows(4, 0), hash: hashA }, { start: 7, rows: 2, embeds: rows(2, 50), hash: hashB }], positions, ropeDelta: 95 };
}

test("a step gets the rows of the pads it carries, in order, and every token's position", () => {
  const im = images();
  expect(Array.from(stepImages(im, 0, 4).embeds!)).toEqual([0, 1, 2, 3]); // pads 2, 3 of image A
  expect(Array.from(stepImages(im, 4, 4).embeds!)).toEqual([4, 5, 6, 7, 50, 51]); // A's last two, B's first
  expect(stepImages(im, 9, 3).embeds).toBeUndefined(); // text only
  const decode = stepImages(im, 12, 2); // past the prompt: index + ropeDelta on all three streams
  expect(Array.from(decode.positions!)).toEqual([107, 107, 107, 108, 108, 108]);
  expect(Array.from(stepImages(im, 10, 3).positions!)).toEqual([110, 110, 110, 111, 111, 111, 107, 107, 107]);
  expect(stepImages(undefined, 0, 4)).toEqual({});
});

test("blocks holding pads are named by the images too", () => {
  const tokens = Int32Array.from({ length: 12 }, (_, i) => (i >= 2 && i < 6) || i === 7 || i === 8 ? 9 : i);
  const root = rootHash("toy");
  const chain = (im?: PromptImages) => {
    const h: BlockHash[] = [];
    extendChain(root, h, tokens, 12, 4, imageBlockExtras(im));
    return h;
  };
  const a = chain(images());
  const text = chain(undefined);
  const otherB = chain(images("A", "B2"));
  expect(a).toHaveLength(3);
  expect(a[0]).not.toBe(text[0]); // block 0 holds A's pads
  expect(otherB[0]).toBe(a[0]); // same image A: the first block is shared
  expect(otherB[1]).not.toBe(a[1]); // block 1 holds B's first pad: a different B is a different block
  expect(otherB[2]).not.toBe(a[2]); // and everything after it differs through the chain
  const extras = imageBlockExtras(images())!;
  expect(extras(0, 4)).toBe("A@0");
  expect(extras(4, 8)).toBe("A@2,B@0");
  expect(extras(8, 12)).toBe("B@1");
  expect(imageBlockExtras(undefined)).toBeUndefined();
});
