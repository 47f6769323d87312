// The pool on toy sizes, with exact ids and eviction order (as vLLM's test_prefix_caching does).
import { describe, expect, test } from "bun:test";
import { blockHash, extendChain, rootHash, type BlockHash } from "../../../src/engine/block-hash.ts";
import { BlockPool } from "../../../src/engine/block-pool.ts";
import { FreeQueue } from "../../../src/engine/free-queue.ts";

const root = rootHash("toy");
const h = (name: string) => blockHash(root, Int32Array.from(name, (c) => c.charCodeAt(0)));

describe("FreeQueue", () => {
  test("push, pop and removal from the middle keep order", () => {
    const q = new FreeQueue(5);
    for (const id of [0, 1, 2, 3]) q.pushBack(id);
    q.remove(2);
    q.pushFront(4);
    expect([...q]).toEqual([4, 0, 1, 3]);
    expect(q.popFront()).toBe(4);
    expect(q.size).toBe(3);
    expect(q.has(2)).toBe(false);
    expect(() => q.remove(2)).toThrow();
    expect(() => q.pushBack(0)).toThrow();
  });
});

describe("block hashes", () => {
  test("a chain: the same block after different parents hashes differently", () => {
    const a = Int32Array.of(1, 2, 3, 4, 5, 6, 7, 8, 9);
    const b = Int32Array.of(9, 2, 3, 4, 5, 6, 7, 8, 9);
    const ha: BlockHash[] = [];
    const hb: BlockHash[] = [];
    extendChain(root, ha, a, a.length, 4);
    extendChain(root, hb, b, b.length, 4);
    expect(ha.length).toBe(2); // the partial third block is not hashed
    expect(ha[0]).not.toBe(hb[0]);
    expect(ha[1]).not.toBe(hb[1]); // same tokens 5..8, different parent
    expect(ha[1]).toBe(blockHash(ha[0]!, Int32Array.of(5, 6, 7, 8)));
    expect(rootHash("other")).not.toBe(root);
  });
  test("extending an existing chain hashes only the new blocks", () => {
    const t = Int32Array.of(1, 2, 3, 4, 5, 6, 7, 8);
    const chain: BlockHash[] = [];
    extendChain(root, chain, t, 4, 4);
    const first = chain[0];
    extendChain(root, chain, t, 8, 4);
    expect(chain[0]).toBe(first!);
    expect(chain.length).toBe(2);
  });
});

describe("BlockPool pages", () => {
  test("allocation takes ids in order; release returns them tail-first to the front when anonymous", () => {
    const pool = new BlockPool(4, 1);
    expect([pool.allocatePage(), pool.allocatePage(), pool.allocatePage()]).toEqual([0, 1, 2]);
    expect(pool.availablePages).toBe(1);
    pool.releasePages(Int32Array.of(0, 1, 2), 3);
    // Anonymous pages go to the front, released in reverse: 0 is pushed last, so it is first.
    expect([pool.allocatePage(), pool.allocatePage(), pool.allocatePage(), pool.allocatePage()]).toEqual([0, 1, 2, 3]);
    expect(pool.allocatePage()).toBeUndefined();
  });

  test("cached pages are evicted LRU, and within one sequence tail before root", () => {
    const pool = new BlockPool(6, 1);
    const seqA = Int32Array.from([0, 1, 2].map(() => pool.allocatePage()!));
    const seqB = Int32Array.from([0, 1].map(() => pool.allocatePage()!));
    ["a0", "a1", "a2"].forEach((n, i) => expect(pool.cachePage(seqA[i]!, h(n))).toBe(true));
    ["b0", "b1"].forEach((n, i) => pool.cachePage(seqB[i]!, h(n)));
    pool.releasePages(seqA, 3); // A finishes first
    pool.releasePages(seqB, 2);
    expect([...pool.cachedPageOrder()]).toEqual([2, 1, 0, 4, 3]);
    expect(pool.cachedPages).toBe(5);
    // The never-used page 5 goes first, then A's tail, A's middle...
    expect(pool.allocatePage()).toBe(5);
    expect(pool.allocatePage()).toBe(2);
    expect(pool.findPage(h("a2"))).toBeUndefined();
    expect(pool.findPage(h("a0"))).toBe(0);
    expect(pool.evictedPages).toBe(1);
  });

  test("a hit takes a cached page out of the queue; ref counts count readers", () => {
    const pool = new BlockPool(3, 1);
    const p = pool.allocatePage()!;
    pool.cachePage(p, h("x"));
    pool.takePage(p); // a second reader while the first still holds it
    expect(pool.refCount(p)).toBe(2);
    pool.releasePages(Int32Array.of(p), 1);
    expect(pool.refCount(p)).toBe(1);
    expect(pool.availablePages).toBe(2);
    pool.releasePages(Int32Array.of(p), 1);
    expect(pool.cachedPages).toBe(1);
    pool.takePage(p); // hit on a cached page with ref 0
    expect(pool.cachedPages).toBe(0);
    expect(pool.availablePages).toBe(2);
    expect([pool.allocatePage(), pool.allocatePage(), pool.allocatePage()]).toEqual([1, 2, undefined]);
    expect(() => pool.releasePages(Int32Array.of(1, 1), 2)).toThrow(/released with ref 0/);
  });

  test("a block already cached elsewhere is not named twice", () => {
    const pool = new BlockPool(2, 1);
    const [p, q] = [pool.allocatePage()!, pool.allocatePage()!];
    expect(pool.cachePage(p, h("x"))).toBe(true);
    expect(pool.cachePage(q, h("x"))).toBe(false);
    expect(pool.findPage(h("x"))).toBe(p);
  });
});

describe("BlockPool slots", () => {
  test("working slots come from free slots first, then the LRU snapshot", () => {
    const pool = new BlockPool(1, 3);
    expect(pool.addSnapshot(h("s1"))).toBe(0);
    expect(pool.addSnapshot(h("s2"))).toBe(1);
    expect(pool.addSnapshot(h("s1"))).toBeUndefined(); // exists: touched, so s2 is now the LRU
    expect(pool.snapshotOrder()).toEqual([h("s2"), h("s1")]);
    expect(pool.allocateSlot()).toBe(2);
    expect(pool.allocateSlot()).toBe(1); // evicts s2
    expect(pool.findSnapshot(h("s2"))).toBeUndefined();
    expect(pool.evictedSnapshots).toBe(1);
    expect(pool.allocateSlot()).toBe(0); // evicts s1
    expect(pool.allocateSlot()).toBeUndefined();
    expect(pool.addSnapshot(h("s3"))).toBeUndefined(); // every slot working: no snapshot
    pool.releaseSlot(1);
    expect(pool.workingSlots).toBe(2);
    expect(() => pool.releaseSlot(1)).toThrow();
  });

  test("a pinned snapshot is never the one evicted; when nothing else is left it is adopted", () => {
    const pool = new BlockPool(1, 2);
    const a = pool.addSnapshot(h("a"))!;
    const b = pool.addSnapshot(h("b"))!;
    pool.pinSnapshot(a); // a is the LRU, but pinned
    expect(pool.allocateSlot()).toBe(b);
    expect(pool.allocateSlot()).toBeUndefined();
    pool.adoptSnapshot(a);
    expect(pool.workingSlots).toBe(2);
    expect(pool.findSnapshot(h("a"))).toBeUndefined();
  });

  test("evicting a page drops the snapshot keyed by its block", () => {
    const pool = new BlockPool(1, 2);
    const p = pool.allocatePage()!;
    pool.cachePage(p, h("blk"));
    pool.releasePages(Int32Array.of(p), 1);
    pool.addSnapshot(h("blk"));
    expect(pool.snapshotSlots).toBe(1);
    expect(pool.allocatePage()).toBe(p);
    expect(pool.snapshotSlots).toBe(0);
    expect(pool.allocateSlot()).toBe(1);
    expect(pool.allocateSlot()).toBe(0);
  });
});
