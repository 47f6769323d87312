// The sequence-state memory of one model, as ids: KV pages (one page = pageTokens positions of every full-attention
// layer) and GDN state slots (one slot = the recurrent and conv state of every linear-attention layer). The pool owns
// ref counts, the prefix-cache maps (BlockHash → page, BlockHash → snapshot slot) and the LRU orders; it decides
// nothing about requests (that is the KVCacheManager's job) and never touches the state itself.
//
// Pages:  ref > 0        held by one or more sequences (a shared prefix page is held by all its readers)
//         ref = 0, hash  cached: evictable, found by hash, in the free queue by last use
//         ref = 0        free: at the front of the free queue
// A page leaves the free queue when allocated (evicting its hash) or when a prefix hit takes it.
// Slots:  working        a running sequence's state
//         snapshot       cached GDN state after a prefix, keyed by the prefix's BlockHash, in LRU order
//         free
import type { BlockHash } from "./block-hash.ts";
import { FreeQueue } from "./free-queue.ts";

const FREE = 0;
const WORKING = 1;
const SNAPSHOT = 2;

export class BlockPool {
  private readonly refs: Int32Array;
  private readonly pageHash: (BlockHash | undefined)[];
  private readonly pageByHash = new Map<BlockHash, number>();
  private readonly freePageQueue: FreeQueue;
  private cachedFree = 0;

  private readonly slotKind: Uint8Array;
  private readonly slotHash: (BlockHash | undefined)[];
  private readonly snapshotByHash = new Map<BlockHash, number>();
  private readonly freeSlotQueue: FreeQueue;
  private readonly snapshotLru: FreeQueue;
  private working = 0;

  evictedPages = 0;
  evictedSnapshots = 0;

  constructor(
    readonly nPages: number,
    readonly nSlots: number,
  ) {
    this.refs = new Int32Array(nPages);
    this.pageHash = new Array<BlockHash | undefined>(nPages).fill(undefined);
    this.freePageQueue = new FreeQueue(nPages);
    for (let p = 0; p < nPages; p++) this.freePageQueue.pushBack(p);
    this.slotKind = new Uint8Array(nSlots);
    this.slotHash = new Array<BlockHash | undefined>(nSlots).fill(undefined);
    this.freeSlotQueue = new FreeQueue(nSlots);
    this.snapshotLru = new FreeQueue(nSlots);
    for (let s = 0; s < nSlots; s++) this.freeSlotQueue.pushBack(s);
  }

  // ---- pages ----

  // Pages with ref 0, cached or not: what allocation can draw on.
  get availablePages(): number {
    return this.freePageQueue.size;
  }

  // Pages with ref 0 that still hold a cached block.
  get cachedPages(): number {
    return this.cachedFree;
  }

  get heldPages(): number {
    return this.nPages - this.freePageQueue.size;
  }

  refCount(page: number): number {
    return this.refs[page]!;
  }

  // The front of the free queue, its cached block (if any) evicted; undefined when every page is held.
  allocatePage(): number | undefined {
    const page = this.freePageQueue.popFront();
    if (page === undefined) return undefined;
    const hash = this.pageHash[page];
    if (hash !== undefined) this.evictPage(page, hash);
    this.refs[page] = 1;
    return page;
  }

  findPage(hash: BlockHash): number | undefined {
    return this.pageByHash.get(hash);
  }

  // The block a page holds for the cache (undefined while it is a sequence's anonymous page). A named page is full
  // and final: nothing may write it again.
  pageHashOf(page: number): BlockHash | undefined {
    return this.pageHash[page];
  }

  // A prefix hit: one more reader of a cached or held page.
  takePage(page: number): void {
    if (this.refs[page] === 0) {
      this.freePageQueue.remove(page);
      if (this.pageHash[page] !== undefined) this.cachedFree--;
    }
    this.refs[page]!++;
  }

  // Releases a sequence's pages in reverse, so that when they become evictable its tail goes before its root:
  // cached pages join the back of the queue tail-first (the root last, so kept longest); pages without a hash hold
  // nothing reusable and go to the front.
  releasePages(pages: Int32Array, count: number): void {
    for (let i = count - 1; i >= 0; i--) {
      const page = pages[i]!;
      if (this.refs[page]! <= 0) throw new Error(`block pool: page ${page} released with ref ${this.refs[page]}`);
      if (--this.refs[page]! > 0) continue;
      if (this.pageHash[page] !== undefined) {
        this.freePageQueue.pushBack(page);
        this.cachedFree++;
      } else {
        this.freePageQueue.pushFront(page);
      }
    }
  }

  // Names a full, computed page by its block hash. False when another page already holds that block (the other
  // copy stays the cached one and this page stays anonymous, as vLLM does).
  cachePage(page: number, hash: BlockHash): boolean {
    if (this.pageByHash.has(hash) || this.pageHash[page] !== undefined) return false;
    this.pageHash[page] = hash;
    this.pageByHash.set(hash, page);
    return true;
  }

  // Every cached page, front (next to evict) to back; for tests and stats.
  *cachedPageOrder(): IterableIterator<number> {
    for (const p of this.freePageQueue) if (this.pageHash[p] !== undefined) yield p;
  }

  // ---- slots ----

  get workingSlots(): number {
    return this.working;
  }

  get snapshotSlots(): number {
    return this.snapshotByHash.size;
  }

  // A slot for a running sequence: a free one, else the least recently used snapshot's. Undefined when every slot
  // is working (or pinned).
  allocateSlot(): number | undefined {
    const slot = this.takeSlot();
    if (slot === undefined) return undefined;
    this.slotKind[slot] = WORKING;
    this.working++;
    return slot;
  }

  releaseSlot(slot: number): void {
    if (this.slotKind[slot] !== WORKING) throw new Error(`block pool: slot ${slot} released but not working`);
    this.slotKind[slot] = FREE;
    this.working--;
    this.freeSlotQueue.pushBack(slot);
  }

  findSnapshot(hash: BlockHash): number | undefined {
    return this.snapshotByHash.get(hash);
  }

  // Marks a snapshot as just used.
  touchSnapshot(slot: number): void {
    this.snapshotLru.remove(slot);
    this.snapshotLru.pushBack(slot);
  }

  // Keeps a snapshot from being evicted while it is being restored; unpin puts it back as the most recent.
  pinSnapshot(slot: number): void {
    this.snapshotLru.remove(slot);
  }

  unpinSnapshot(slot: number): void {
    this.snapshotLru.pushBack(slot);
  }

  // Turns a pinned snapshot into a working slot (when no other slot is left to restore it into).
  adoptSnapshot(slot: number): void {
    this.snapshotByHash.delete(this.slotHash[slot]!);
    this.slotHash[slot] = undefined;
    this.slotKind[slot] = WORKING;
    this.working++;
  }

  // A slot to save the snapshot keyed `hash` into, the LRU snapshot evicted if needed. Undefined when that
  // snapshot exists already (it is touched instead) or every slot is working.
  addSnapshot(hash: BlockHash): number | undefined {
    const existing = this.snapshotByHash.get(hash);
    if (existing !== undefined) {
      if (this.snapshotLru.has(existing)) this.touchSnapshot(existing);
      return undefined;
    }
    const slot = this.takeSlot();
    if (slot === undefined) return undefined;
    this.slotKind[slot] = SNAPSHOT;
    this.slotHash[slot] = hash;
    this.snapshotByHash.set(hash, slot);
    this.snapshotLru.pushBack(slot);
    return slot;
  }

  // Snapshots, least recently used first; for tests and stats.
  snapshotOrder(): BlockHash[] {
    return [...this.snapshotLru].map((s) => this.slotHash[s]!);
  }

  // ---- internal ----

  private takeSlot(): number | undefined {
    const free = this.freeSlotQueue.popFront();
    if (free !== undefined) return free;
    const lru = this.snapshotLru.popFront();
    if (lru === undefined) return undefined;
    this.snapshotByHash.delete(this.slotHash[lru]!);
    this.slotHash[lru] = undefined;
    this.slotKind[lru] = FREE;
    this.evictedSnapshots++;
    return lru;
  }

  // A page's block leaves the cache; the snapshot taken at its end cannot be reached any more (a lookup walks the
  // pages from the root), so its slot is freed too.
  private evictPage(page: number, hash: BlockHash): void {
    this.pageByHash.delete(hash);
    this.pageHash[page] = undefined;
    this.cachedFree--;
    this.evictedPages++;
    const snap = this.snapshotByHash.get(hash);
    if (snap !== undefined && this.snapshotLru.has(snap)) {
      this.snapshotLru.remove(snap);
      this.snapshotByHash.delete(hash);
      this.slotHash[snap] = undefined;
      this.slotKind[snap] = FREE;
      this.freeSlotQueue.pushBack(snap);
      this.evictedSnapshots++;
    }
  }
}
