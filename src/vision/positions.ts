// M-RoPE positions of a prompt with images, exactly as transformers' Qwen3_5Model.get_rope_index computes them:
// text tokens carry one running position on all three streams (t, h, w); the pad tokens of an image of grid
// (t, h, w) patches with merge m take (start + frame, start + row, start + column) over its (t, h/m, w/m) merged
// grid, where start is the running position; after the image the running position advances by max(h, w)/m (not by
// its token count). A token at index i past the prompt sits at i + ropeDelta on all three streams.
export type ImageSpan = { start: number; grid: readonly [number, number, number] }; // start: index of its first pad

export function mropePositions(length: number, spans: readonly ImageSpan[], merge: number): { positions: Int32Array; ropeDelta: number } {
  const positions = new Int32Array(length * 3); // [length][3]
  let pos = 0;
  let i = 0;
  let max = -1;
  const put = (t: number, h: number, w: number) => {
    positions.set([t, h, w], 3 * i++);
    max = Math.max(max, t, h, w);
  };
  for (const span of [...spans].sort((a, b) => a.start - b.start)) {
    while (i < span.start) put(pos, pos, pos), pos++;
    const [t, gh, gw] = [span.grid[0], span.grid[1] / merge, span.grid[2] / merge];
    for (let f = 0; f < t; f++) for (let y = 0; y < gh; y++) for (let x = 0; x < gw; x++) put(pos + f, pos + y, pos + x);
    pos += Math.max(gh, gw);
  }
  while (i < length) put(pos, pos, pos), pos++;
  return { positions, ropeDelta: max + 1 - length };
}
