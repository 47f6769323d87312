// The KVCacheManager on toy sizes (B = 4 tokens a page): the admission guarantee, prefix lookup and resume points,
// snapshot points, exact page ids.
import { describe, expect, test } from "bun:test";
import { rootHash } from "../../../src/engine/block-hash.ts";
import { BlockPool } from "../../../src/engine/block-pool.ts";
import { KVCacheManager, type Holdings } from "../../../src/engine/cache-manager.ts";

function manager(nPages: number, nSlots: number, options: { prefixCache?: boolean; snapshotInterval?: number } = {}) {
  const ops: string[] = [];
  const pool = new BlockPool(nPages, nSlots);
  const cache = new KVCacheManager(
    pool,
    { copySlot: (s, d) => ops.push(`copy ${s}->${d}`), clearSlot: (s) => ops.push(`clear ${s}`) },
    { pageTokens: 4, pageBytes: 400, slotBytes: 1000, root: rootHash("t"), prefixCache: options.prefixCache ?? true, snapshotInterval: options.snapshotInterval ?? 8 },
  );
  return { pool, cache, ops };
}

const seq = (n: number, from = 1) => Int32Array.from({ length: n }, (_, i) => from + i);

// Runs a prompt through to `upTo` positions, as the scheduler would (chunks ending at snapshot points).
function compute(cache: KVCacheManager, h: Holdings, tokens: Int32Array, from: number, upTo: number) {
  let at = from;
  while (at < upTo) {
    const next = Math.min(upTo, cache.nextSnapshotPoint(h, at) ?? upTo);
    cache.allocate(h, next);
    at = next;
    cache.commit(h, tokens, at);
  }
}

describe("admission", () => {
  test("admits while the worst cases fit in what is free, counting what is promised, not what is held", () => {
    const { cache, pool } = manager(10, 4, { prefixCache: false });
    const a = cache.admit(seq(6), 13)!; // ceil(13/4) = 4 pages
    const b = cache.admit(seq(6), 20)!; // 5 pages
    expect(cache.outstandingPages).toBe(9);
    expect(pool.heldPages).toBe(0); // nothing allocated up front
    expect(cache.admit(seq(6), 8)).toBeUndefined(); // 2 more pages: 11 > 10
    cache.allocate(a, 13);
    expect([...a.pages]).toEqual([0, 1, 2, 3]);
    expect(cache.outstandingPages).toBe(5);
    expect(pool.availablePages).toBe(6);
    expect(cache.admit(seq(6), 8)).toBeUndefined(); // still 5 + 2 > 6
    expect(cache.admit(seq(3), 4)).toBeDefined(); // 5 + 1 ≤ 6
    cache.allocate(b, 6);
    expect([...b.pages.subarray(0, b.nPages)]).toEqual([4, 5]);
    expect(() => cache.allocate(b, 21)).toThrow(/exceed/);
    cache.free(a);
    expect(cache.outstandingPages).toBe(4); // b: 3 to go, the third sequence: 1
    expect(pool.heldPages).toBe(2);
  });

  test("needs a slot", () => {
    const { cache } = manager(10, 1, { prefixCache: false });
    const a = cache.admit(seq(2), 2)!;
    expect(cache.admit(seq(2), 2)).toBeUndefined();
    cache.free(a);
    expect(cache.admit(seq(2), 2)).toBeDefined();
  });

  test("a fresh sequence gets a cleared slot", () => {
    const { cache, ops } = manager(4, 2);
    cache.admit(seq(3), 3);
    expect(ops).toEqual(["clear 0"]);
  });
});

describe("prefix cache", () => {
  test("snapshot points: every interval, and the last block boundary before the last prompt token", () => {
    const { cache } = manager(20, 4, { snapshotInterval: 8 });
    expect(cache.admit(seq(30), 30)!.snapshotPoints).toEqual([8, 16, 24, 28]);
    expect(cache.admit(seq(10), 10)!.snapshotPoints).toEqual([8]);
    expect(cache.admit(seq(8), 8, [5])!.snapshotPoints).toEqual([4]); // the hint rounds down to 4, as does 7
    expect(cache.admit(seq(3), 3)!.snapshotPoints).toEqual([]);
  });

  test("a longer prompt resumes from the previous prompt's end snapshot and shares its pages", () => {
    const { cache, pool, ops } = manager(12, 3, { snapshotInterval: 64 });
    const p1 = seq(10);
    const a = cache.admit(p1, 12)!;
    compute(cache, a, p1, 0, 10);
    expect(ops).toEqual(["clear 0", "copy 0->1"]); // snapshot at 8 into slot 1
    expect([...a.pages.subarray(0, a.nPages)]).toEqual([0, 1, 2]);
    cache.free(a);
    expect([...pool.cachedPageOrder()]).toEqual([1, 0]); // page 2 (partial block) is anonymous, at the front

    const p2 = seq(14); // p1 + 4 more tokens
    expect(cache.cachedPrefix(p2)).toBe(8);
    const b = cache.admit(p2, 16)!;
    expect(b.resume).toBe(8);
    expect([...b.pages.subarray(0, b.nPages)]).toEqual([0, 1]);
    expect(pool.refCount(0)).toBe(1);
    expect(ops.slice(2)).toEqual(["copy 1->2"]); // restored into the next free slot
    expect(cache.outstandingPages).toBe(2); // 4 pages worst, 2 shared
    cache.allocate(b, 14);
    expect([...b.pages.subarray(0, b.nPages)]).toEqual([0, 1, 2, 3]);
    expect(cache.hits).toEqual({ memory: 8, disk: 0 });
  });

  test("when every token hits, the last block is recomputed for its logits", () => {
    const { cache } = manager(12, 4, { snapshotInterval: 64 });
    const p = seq(8);
    const a = cache.admit(p, 8)!;
    expect(a.snapshotPoints).toEqual([4]);
    compute(cache, a, p, 0, 8);
    cache.free(a);
    expect(cache.cachedPrefix(p)).toBe(4); // both pages are cached, but position 7 must run again
    expect(cache.cachedPrefix(seq(9))).toBe(4); // no snapshot at 8
  });

  test("no snapshot, no resume: pages alone are not enough for a hybrid model", () => {
    const { cache, pool } = manager(12, 1, { snapshotInterval: 64 });
    const p = seq(10);
    const a = cache.admit(p, 10)!;
    compute(cache, a, p, 0, 10); // the snapshot at 8 finds no slot (the only one is working)
    cache.free(a);
    expect(pool.cachedPages).toBe(2);
    expect(pool.snapshotSlots).toBe(0);
    expect(cache.cachedPrefix(seq(14))).toBe(0);
  });

  test("a different token in the first block misses everything", () => {
    const { cache } = manager(12, 3, { snapshotInterval: 64 });
    const p = seq(10);
    const a = cache.admit(p, 10)!;
    compute(cache, a, p, 0, 10);
    cache.free(a);
    const q = seq(14);
    q[1] = 99;
    expect(cache.cachedPrefix(q)).toBe(0);
  });

  test("hit pages that were cached leave the free queue, so they count against what admission can promise", () => {
    const { cache } = manager(5, 3, { snapshotInterval: 64 });
    const p = seq(10);
    const a = cache.admit(p, 10)!;
    compute(cache, a, p, 0, 10);
    cache.free(a); // pages 0, 1 cached; 5 available
    // A needs 5 pages in its worst case, 2 of them hit: 3 new ≤ 5 − 2.
    const b = cache.admit(seq(14), 20)!;
    expect(b.resume).toBe(8);
    expect(cache.outstandingPages).toBe(3);
    expect(cache.admit(seq(3, 50), 3)).toBeUndefined(); // one more page: 3 + 1 > 3
  });

  test("a running sequence shares its prefix pages with a newcomer: one copy, two readers", () => {
    const { cache, pool } = manager(8, 4, { snapshotInterval: 64 });
    const p = seq(10);
    const a = cache.admit(p, 12)!;
    compute(cache, a, p, 0, 10);
    const b = cache.admit(seq(12), 12)!;
    expect(b.resume).toBe(8);
    expect(pool.refCount(0)).toBe(2);
    expect(pool.heldPages).toBe(3);
    cache.free(a);
    expect(pool.refCount(0)).toBe(1);
    cache.free(b);
    expect(pool.heldPages).toBe(0);
    expect(cache.outstandingPages).toBe(0);
  });

  test("with the prefix cache off nothing is named and nothing hits", () => {
    const { cache, pool, ops } = manager(12, 3, { prefixCache: false });
    const p = seq(10);
    const a = cache.admit(p, 10)!;
    compute(cache, a, p, 0, 10);
    cache.free(a);
    expect(pool.cachedPages).toBe(0);
    expect(ops).toEqual(["clear 0"]);
    expect(cache.cachedPrefix(p)).toBe(0);
  });
});
