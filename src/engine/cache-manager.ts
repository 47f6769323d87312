// A sequence's holdings in sequence-state memory: prefix lookup at admission, pages allocated as tokens arrive,
// full blocks named for the prefix cache, GDN snapshots, and release. The pool (block-pool.ts) owns the ids; the
// scheduler decides who runs; this file keeps the promise that a running sequence never runs out of memory.
//
// One sequence's token layout (B = pageTokens = 4, prompt L = 14, maxTokens M = 5):
//
//   position    0       4       8       12      16      20
//               | p p p p | p p p p | p p p p | p p g g | g . . . |     p prompt, g generated so far
//               [ hit pages ]                                           blocks before the resume point: taken from
//                           ^ resume = k·B                               the cache (ref +1), never written again
//               [ hit       ][ own pages, allocated as `computed` passes each page boundary ...   ]
//               |------- computed ------------------------------->|    in the pages and the GDN slot
//               |------- known (prompt + generated) ------------------->|
//               |------- worst = L + M − 1 positions that can ever need KV ------------>|  = 18 → 5 pages
//
// The last sampled token is never fed back, so positions [0, L + M − 1) are all that can ever need KV.
//
// The guarantee. Let outstanding(s) = worstPages(s) − pages in s's table. The manager keeps, at every step boundary,
//
//     Σ outstanding(s) over running s  ≤  availablePages  (pages with ref 0: free or merely cached)
//
// Allocating a page lowers both sides by one; releasing a finished sequence removes its outstanding and only adds
// available pages; a cached page is evicted on demand, so it counts as available. Admission adds a request only
// when the inequality still holds after its hit pages leave the free queue. Hence every later allocation finds a
// page: the worst case is guaranteed without being reserved, and memory not yet needed keeps serving the cache.
// A page shared by several sequences is held once and sits in none of their outstanding counts.
//
// Shared pages are copy-on-write in the degenerate, cheapest form: only full blocks are ever shared, a full block is
// never written again, and every resume point is a block boundary (see admit), so no write ever reaches a shared
// page and no copy is ever needed.
//
// The disk tier (disk-cache.ts), when there is one, holds copies of pages and snapshots beyond what memory keeps:
// every snapshot taken is written there with the pages before it (write-through, in the background), and a lookup
// that finds a longer resumable prefix on disk than in memory admits the sequence with the disk part pending: its
// pages are allocated at once (counted like any page of its worst case) and filled when the reads complete
// (fetch, then applyLoad between steps); until then the sequence does not run. A failed read (missing, damaged)
// leaves it at its memory resume point, the allocated pages to be overwritten by its prefill.
import { extendChain, type BlockExtras, type BlockHash } from "./block-hash.ts";
import type { BlockPool } from "./block-pool.ts";
import type { DiskPrefixCache } from "./disk-cache.ts";

export type CacheOptions = {
  pageTokens: number;
  pageBytes: number;
  slotBytes: number;
  root: BlockHash;
  prefixCache: boolean; // false: nothing is named or snapshotted; every request starts from an empty state
  snapshotInterval: number; // tokens between GDN snapshots inside long prompts (a multiple of pageTokens)
  disk?: { tier: DiskPrefixCache; copies: HostCopies }; // the disk tier (with prefixCache only)
};

// What the manager needs to do to the state itself.
export type StateOps = { copySlot(src: number, dst: number): void; clearSlot(slot: number): void };
// Host copies of pages and slots, for the disk tier.
export type HostCopies = {
  readPage(page: number): Uint8Array;
  writePage(page: number, data: Uint8Array): void;
  readSlot(slot: number): Uint8Array;
  writeSlot(slot: number, data: Uint8Array): void;
};

// The disk part of an admission: blocks [from, to) and the snapshot after block to − 1 come from disk.
export type DiskLoad = { from: number; to: number; snapshot: BlockHash };
// What a completed read brought: the pages of blocks [from, to) in order, and the snapshot.
export type LoadedState = { pages: Uint8Array[]; state: Uint8Array };

export type Holdings = {
  readonly pages: Int32Array; // page table, capacity worstPages
  nPages: number;
  readonly slot: number;
  readonly worstPages: number;
  resume: number; // prompt tokens served from the cache (memory, then disk once the load completes)
  readonly hashes: BlockHash[]; // chain over the full blocks known so far
  readonly extras?: BlockExtras; // what else names a block (the prompt's images)
  readonly hints: readonly number[]; // the caller's snapshot points (admit's snapshotAt)
  committedBlocks: number; // blocks already offered to the cache
  snapshotPoints: number[]; // positions still to snapshot, ascending
  load?: DiskLoad; // pending: the sequence runs once it is applied or abandoned
};

// Prompt tokens served from each tier since start.
export type TierHits = { memory: number; disk: number };

export class KVCacheManager {
  private outstanding = 0;
  private peakHeld = 0;
  readonly hits: TierHits = { memory: 0, disk: 0 };

  constructor(
    readonly pool: BlockPool,
    private readonly ops: StateOps,
    readonly options: CacheOptions,
  ) {
    if (options.snapshotInterval % options.pageTokens !== 0) throw new Error("snapshotInterval must be a multiple of pageTokens");
  }

  // Pages promised to running sequences and not yet allocated.
  get outstandingPages(): number {
    return this.outstanding;
  }

  // Tokens of `prompt` that admission would serve from the cache now (memory or disk). `hashes`: its block chain as
  // far as known (extended here).
  cachedPrefix(prompt: Int32Array, extras?: BlockExtras, hashes: BlockHash[] = []): number {
    const { resume, diskTo } = this.lookup(prompt, hashes, extras);
    return Math.max(resume, diskTo);
  }

  // Admits a sequence whose prompt is `prompt` and whose KV may reach `worstTokens` positions, or returns undefined
  // when that does not fit now (no slot, or the guarantee above would break). `snapshotAt` adds snapshot points
  // (message ends the chat layer knows about) to the regular ones. `hashes` is the prompt's block chain as far as
  // it is known (kept by the caller, so a request that waits is hashed once); `extras` names blocks by more than
  // their tokens (images).
  admit(prompt: Int32Array, worstTokens: number, snapshotAt: readonly number[] = [], hashes: BlockHash[] = [], extras?: BlockExtras): Holdings | undefined {
    const B = this.options.pageTokens;
    const L = prompt.length;
    const worstPages = Math.ceil(worstTokens / B);
    if (L < 1 || worstTokens < L || worstPages > this.pool.nPages) throw new Error(`cache: cannot admit ${L} prompt tokens with ${worstTokens} worst-case tokens`);
    if (this.pool.workingSlots >= this.pool.nSlots) return undefined;
    const { resume, diskTo } = this.lookup(prompt, hashes, extras);
    const k = resume / B;
    const to = Math.max(k, diskTo / B);
    let fromFreeQueue = 0;
    for (let j = 0; j < k; j++) if (this.pool.refCount(this.pool.findPage(hashes[j]!)!) === 0) fromFreeQueue++;
    if (this.outstanding + (worstPages - k) > this.pool.availablePages - fromFreeQueue) return undefined;

    const pages = new Int32Array(worstPages);
    for (let j = 0; j < k; j++) {
      const page = this.pool.findPage(hashes[j]!)!;
      this.pool.takePage(page);
      pages[j] = page;
    }
    // the disk blocks go into fresh pages of the sequence's own (never into shared ones, which a failed read would
    // leave to its prefill to overwrite)
    for (let j = k; j < to; j++) pages[j] = this.pool.allocatePage()!; // within the check above
    const slot = this.restoreSlot(k === 0 ? undefined : hashes[k - 1]!);
    this.outstanding += worstPages - to;
    this.hits.memory += resume;
    this.notePeak();
    const h: Holdings = { pages, nPages: to, slot, worstPages, resume, hashes, extras, hints: snapshotAt, committedBlocks: k, snapshotPoints: this.snapshotPoints(L, to * B, snapshotAt) };
    if (to > k) h.load = { from: k, to, snapshot: hashes[to - 1]! };
    return h;
  }

  // Reads what a pending disk load needs; undefined when an entry is missing or damaged. Touches no state: the
  // result is applied between steps (applyLoad), or the load abandoned.
  async fetch(h: Holdings): Promise<LoadedState | undefined> {
    const load = h.load!;
    const disk = this.options.disk!.tier;
    const blocks = Array.from({ length: load.to - load.from }, (_, i) => h.hashes[load.from + i]!);
    const [state, ...pages] = await Promise.all([disk.read("state", load.snapshot), ...blocks.map((hash) => disk.read("page", hash))]);
    if (!state || pages.some((p) => !p)) return undefined;
    return { pages: pages as Uint8Array[], state };
  }

  // A completed read: the pages and the snapshot go into the sequence's pages and slot, the pages are named for the
  // memory cache and the snapshot is kept there too (hot again); the sequence resumes after the loaded blocks.
  applyLoad(h: Holdings, data: LoadedState): void {
    const load = h.load!;
    const B = this.options.pageTokens;
    const copies = this.options.disk!.copies;
    data.pages.forEach((bytes, i) => copies.writePage(h.pages[load.from + i]!, bytes));
    copies.writeSlot(h.slot, data.state);
    for (let j = h.committedBlocks; j < load.to; j++) this.pool.cachePage(h.pages[j]!, h.hashes[j]!);
    const snap = this.pool.addSnapshot(load.snapshot);
    if (snap !== undefined) this.ops.copySlot(h.slot, snap);
    h.committedBlocks = load.to;
    this.hits.disk += (load.to - load.from) * B;
    h.resume = load.to * B;
    h.load = undefined;
  }

  // A failed read: the sequence resumes where memory left it; the pages meant for the disk blocks stay its own
  // (unnamed), to be overwritten by its prefill.
  abandonLoad(h: Holdings, promptLength: number): void {
    const load = h.load!;
    h.snapshotPoints = this.snapshotPoints(promptLength, load.from * this.options.pageTokens, h.hints);
    h.load = undefined;
  }

  // Makes the page table cover positions [0, upTo). Cannot fail for an admitted sequence (the guarantee); a
  // failure here is a bug.
  allocate(h: Holdings, upTo: number): void {
    const need = Math.ceil(upTo / this.options.pageTokens);
    if (need > h.worstPages) throw new Error(`cache: ${upTo} positions exceed the sequence's worst case of ${h.worstPages} pages`);
    while (h.nPages < need) {
      const page = this.pool.allocatePage();
      if (page === undefined) throw new Error("cache: no page for an admitted sequence (the admission guarantee is broken)");
      h.pages[h.nPages++] = page;
      this.outstanding--;
    }
    this.notePeak();
  }

  // After a step brought the sequence to `computed` positions of `tokens`: names its new full blocks for the prefix
  // cache and saves a GDN snapshot when `computed` is a snapshot point (the scheduler cuts chunks there).
  commit(h: Holdings, tokens: Int32Array, computed: number): void {
    if (!this.options.prefixCache) return;
    const B = this.options.pageTokens;
    extendChain(this.options.root, h.hashes, tokens, computed, B, h.extras);
    for (; (h.committedBlocks + 1) * B <= computed; h.committedBlocks++) {
      this.pool.cachePage(h.pages[h.committedBlocks]!, h.hashes[h.committedBlocks]!);
    }
    while (h.snapshotPoints.length > 0 && h.snapshotPoints[0]! <= computed) {
      const point = h.snapshotPoints.shift()!;
      if (point !== computed) continue;
      const slot = this.pool.addSnapshot(h.hashes[point / B - 1]!);
      if (slot !== undefined) this.ops.copySlot(h.slot, slot);
      this.writeThrough(h, point / B);
    }
  }

  // The snapshot just taken after block `blocks` − 1, and the pages before it not on disk yet, to the disk tier (the
  // snapshot is the sequence's slot right now; pages named for the cache are final).
  private writeThrough(h: Holdings, blocks: number): void {
    if (!this.options.disk) return;
    const { tier, copies } = this.options.disk;
    for (let j = 0; j < blocks; j++) if (!tier.holds("page", h.hashes[j]!)) tier.write("page", h.hashes[j]!, copies.readPage(h.pages[j]!));
    if (!tier.holds("state", h.hashes[blocks - 1]!)) tier.write("state", h.hashes[blocks - 1]!, copies.readSlot(h.slot));
  }

  // Extends `hashes` over every full block of the prompt (what admission looks up).
  hashPrompt(prompt: Int32Array, hashes: BlockHash[], extras?: BlockExtras): void {
    extendChain(this.options.root, hashes, prompt, prompt.length, this.options.pageTokens, extras);
  }

  // Makes a running sequence keep its state at block boundary `point` (not computed yet): another sequence whose
  // prompt shares the prefix up to there resumes from it.
  addSnapshotPoint(h: Holdings, point: number): void {
    if (!this.options.prefixCache || h.snapshotPoints.includes(point)) return;
    h.snapshotPoints.push(point);
    h.snapshotPoints.sort((a, b) => a - b);
  }

  // The first snapshot point after `from`, where the current prefill chunk must end.
  nextSnapshotPoint(h: Holdings, from: number): number | undefined {
    return h.snapshotPoints.find((p) => p > from);
  }

  // Returns everything the sequence holds: pages in reverse (tails become evictable first), then its slot.
  free(h: Holdings): void {
    this.outstanding -= h.worstPages - h.nPages;
    this.pool.releasePages(h.pages, h.nPages);
    this.pool.releaseSlot(h.slot);
    h.nPages = 0;
  }

  // Bytes held by sequences (not evictable).
  get heldBytes(): number {
    return this.pool.heldPages * this.options.pageBytes + this.pool.workingSlots * this.options.slotBytes;
  }

  // Bytes held by the prefix cache (evictable): cached pages and snapshots.
  get cachedBytes(): number {
    return this.pool.cachedPages * this.options.pageBytes + this.pool.snapshotSlots * this.options.slotBytes;
  }

  get peakHeldBytes(): number {
    return this.peakHeld;
  }

  // ---- internal ----

  // The longest cached prefix that can be resumed: a run of cached pages from the root, cut back to the last block
  // boundary that has a snapshot. The resume point stays at most L − 1: when every token hits, the last one is
  // recomputed to get the logits to sample from (the state after it is the snapshot, but not its logits).
  // diskTo: the longest prefix beyond that whose snapshot and pages past the memory resume point are on disk (0:
  // none longer).
  private lookup(prompt: Int32Array, hashes: BlockHash[], extras?: BlockExtras): { resume: number; diskTo: number } {
    const B = this.options.pageTokens;
    extendChain(this.options.root, hashes, prompt, prompt.length, B, extras);
    if (!this.options.prefixCache) return { resume: 0, diskTo: 0 };
    let hit = 0;
    while (hit < hashes.length && this.pool.findPage(hashes[hit]!) !== undefined) hit++;
    const last = Math.floor((prompt.length - 1) / B);
    let k = Math.min(hit, last);
    while (k > 0 && this.pool.findSnapshot(hashes[k - 1]!) === undefined) k--;
    const disk = this.options.disk?.tier;
    for (let j = last; disk && j > k; j--) {
      if (!disk.has("state", hashes[j - 1]!)) continue;
      let i = k;
      while (i < j && disk.has("page", hashes[i]!)) i++;
      if (i === j) return { resume: k * B, diskTo: j * B };
    }
    return { resume: k * B, diskTo: 0 };
  }

  // A working slot holding the state after the prefix `hash` (or an empty state). The snapshot is pinned while a
  // slot is found, so finding one cannot evict it; when it is the only slot left, it becomes the working slot.
  private restoreSlot(hash: BlockHash | undefined): number {
    if (hash === undefined) {
      const slot = this.pool.allocateSlot()!;
      this.ops.clearSlot(slot);
      return slot;
    }
    const snap = this.pool.findSnapshot(hash)!;
    this.pool.pinSnapshot(snap);
    const slot = this.pool.allocateSlot();
    if (slot === undefined) {
      this.pool.adoptSnapshot(snap);
      return snap;
    }
    this.ops.copySlot(snap, slot);
    this.pool.unpinSnapshot(snap);
    return slot;
  }

  // Where this prompt's GDN state is worth keeping: every snapshotInterval tokens, the last block boundary before
  // the prompt's last token (where the next turn of the conversation continues), and the block boundaries at or
  // before the caller's hints. Only block boundaries: a resumed sequence must restart exactly where a fresh one
  // cut its prefill, so that both compute the rest in the same chunks (bit-identical results).
  private snapshotPoints(L: number, resume: number, hints: readonly number[]): number[] {
    if (!this.options.prefixCache) return [];
    const B = this.options.pageTokens;
    const last = Math.floor((L - 1) / B) * B;
    const points = new Set<number>([last]);
    for (let p = this.options.snapshotInterval; p < last; p += this.options.snapshotInterval) points.add(p);
    for (const hint of hints) points.add(Math.min(last, Math.floor(hint / B) * B));
    return [...points].filter((p) => p > resume).sort((a, b) => a - b);
  }

  private notePeak(): void {
    this.peakHeld = Math.max(this.peakHeld, this.heldBytes);
  }
}
