// M-RoPE positions against the vision fixture's get_rope_index goldens (one and two images of different grids),
// and the image cache's LRU bound.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ImageCache } from "../../../src/vision/image-cache.ts";
import { mropePositions } from "../../../src/vision/positions.ts";

const manifest = JSON.parse(readFileSync(join(import.meta.dir, "../../fixtures/models/qwen35-vision-tiny/golden/manifest.json"), "utf8")) as {
  token_ids: { image_token_id: number };
  prompts: { input_ids: number[]; position_ids: number[][]; rope_delta: number; images: { grid_thw: [number, number, number]; n_tokens: number }[] }[];
};

test("positions equal transformers' get_rope_index for every fixture prompt", () => {
  for (const p of manifest.prompts) {
    const pad = manifest.token_ids.image_token_id;
    const spans = p.images.map((im, k) => {
      let seen = 0;
      const start = p.input_ids.findIndex((t, i) => t === pad && (i === 0 || p.input_ids[i - 1] !== pad) && seen++ === k);
      return { start, grid: im.grid_thw };
    });
    const { positions, ropeDelta } = mropePositions(p.input_ids.length, spans, 2);
    const got = [0, 1, 2].map((s) => Array.from({ length: p.input_ids.length }, (_, i) => positions[3 * i + s]));
    expect(got).toEqual(p.position_ids);
    expect(ropeDelta).toBe(p.rope_delta);
  }
});

test("text-only positions are the indices on three equal streams", () => {
  const { positions, ropeDelta } = mropePositions(4, [], 2);
  expect(Array.from(positions)).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
  expect(ropeDelta).toBe(0);
});

test("the image cache keeps the most recently used images within its byte budget", () => {
  const cache = new ImageCache(3 * 400);
  const img = (hash: string) => ({ hash, grid: [1, 2, 2] as [number, number, number], tokens: 1, embeds: new Float32Array(100) });
  cache.set(img("a"));
  cache.set(img("b"));
  cache.set(img("c"));
  expect(cache.get("a")?.hash).toBe("a"); // a is now the most recent
  cache.set(img("d")); // evicts b, the least recently used
  expect(cache.get("b")).toBeUndefined();
  expect(["a", "c", "d"].map((h) => cache.get(h)?.hash)).toEqual(["a", "c", "d"]);
  expect(cache.usedBytes).toBe(1200);
  cache.set({ ...img("huge"), embeds: new Float32Array(1000) }); // larger than the budget: not kept
  expect(cache.get("huge")).toBeUndefined();
  expect(cache.size).toBe(3);
});
