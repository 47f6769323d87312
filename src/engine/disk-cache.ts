// The prefix cache's disk tier: copies of KV pages and GDN state snapshots in files, so a cached prefix outlives
// memory pressure and restarts. One directory per model state (its name is the root block hash, which covers the
// model, weights, quantization, KV type, drafter, backend and library: src/models/load.ts), one file per entry,
// named by the block hash it holds (content-addressed: the same hash is the same bytes):
//
//   <hash>.page    the K/V (target and drafter) of one block of pageTokens positions after that prefix
//   <hash>.state   the GDN state (recurrent S, conv tail; the drafter's) after the prefix ending with that block
//
// Each file is a 64-byte header (magic, kind, payload length, CRC-32 of the payload, the hash) then the payload; a
// file that does not check out is refused (a miss) and deleted. Files appear by atomic rename of a complete
// temporary file, so two servers sharing the directory never read a partial entry; a reader that loses a file to
// the other's eviction sees a miss. The tier is LRU under a byte budget: a hit touches the file's mtime, and when the
// files exceed the budget the least recently used go, under a lock file (one evictor at a time across processes).
// Everything here is best effort: a failed write or read costs a prefill, never a request.
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statfsSync, statSync, utimesSync } from "node:fs";
import { basename, join } from "node:path";
import { withLock } from "../launch/lock.ts";
import { pidAlive } from "../launch/process.ts";
import { log } from "../log.ts";
import type { BlockHash } from "./block-hash.ts";

export type EntryKind = "page" | "state";

const MAGIC = "SPLSHPC1";
const HEADER = 64;
const KIND_CODE: Record<EntryKind, number> = { page: 1, state: 2 };
// A default budget of this share of the free disk space where the cache lives.
export const DEFAULT_DISK_SHARE = 0.1;
// Writes queued but not yet on disk, at most: past it new entries are dropped (the tier must not hold memory).
const MAX_PENDING_BYTES = 1 << 30;
// How long the list of entries on disk is trusted before the directory is listed again (another server's writes
// and evictions become visible then).
const LIST_TTL_MS = 2000;

export type DiskTierStats = { bytes: number; budget: number; files: number; hits: number; misses: number; reads: number; readBytes: number; writes: number; writtenBytes: number; refused: number; evicted: number };

export type DiskCacheOptions = {
  dir: string; // this model state's directory
  budget: number; // bytes of files at most
  entryBytes: Record<EntryKind, number>; // the payload of each kind: a page's and a slot's host copy
};

// The default budget: a share of the free space on the file system that holds `dir` (0 when it cannot be read).
export function defaultDiskBudget(dir: string): number {
  try {
    mkdirSync(dir, { recursive: true });
    const s = statfsSync(dir);
    return Math.floor(s.bavail * s.bsize * DEFAULT_DISK_SHARE);
  } catch {
    return 0;
  }
}

function header(kind: EntryKind, hash: BlockHash, payload: Uint8Array): Uint8Array<ArrayBuffer> {
  const h = new Uint8Array(HEADER);
  const view = new DataView(h.buffer);
  h.set(new TextEncoder().encode(MAGIC), 0);
  view.setUint32(8, KIND_CODE[kind], true);
  view.setBigUint64(12, BigInt(payload.byteLength), true);
  view.setUint32(20, Bun.hash.crc32(payload), true);
  h.set(new TextEncoder().encode(hash), 24);
  return h;
}

export class DiskPrefixCache {
  private bytes = 0;
  private files = 0;
  private names = new Set<string>(); // entry files on disk, as last listed plus this process's changes
  private readonly writing = new Set<string>(); // entries this process is writing
  private listedAt = 0;
  private pendingBytes = 0;
  private evicting = false;
  private readonly counts = { hits: 0, misses: 0, reads: 0, readBytes: 0, writes: 0, writtenBytes: 0, refused: 0, evicted: 0 };

  constructor(readonly options: DiskCacheOptions) {
    mkdirSync(options.dir, { recursive: true });
    this.rescan();
  }

  private path(kind: EntryKind, hash: BlockHash): string {
    return join(this.options.dir, `${hash}.${kind}`);
  }

  // Whether an entry is on disk (another server's count too, once listed: lookups ask this for every block).
  has(kind: EntryKind, hash: BlockHash): boolean {
    if (performance.now() - this.listedAt > LIST_TTL_MS) this.rescan();
    return this.names.has(`${hash}.${kind}`);
  }

  // Whether an entry is on disk or being written: what need not be written again.
  holds(kind: EntryKind, hash: BlockHash): boolean {
    return this.has(kind, hash) || this.writing.has(`${hash}.${kind}`);
  }

  // The entry's payload, checked; undefined when it is missing or does not check out (then it is deleted).
  async read(kind: EntryKind, hash: BlockHash): Promise<Uint8Array | undefined> {
    const path = this.path(kind, hash);
    let data: Uint8Array;
    try {
      data = new Uint8Array(await Bun.file(path).arrayBuffer());
    } catch {
      this.names.delete(`${hash}.${kind}`); // evicted by another server
      this.counts.misses++;
      return undefined;
    }
    this.counts.reads++;
    this.counts.readBytes += data.byteLength;
    const payload = data.subarray(HEADER);
    const ok = data.byteLength === HEADER + this.options.entryBytes[kind] && header(kind, hash, payload).every((b, i) => b === data[i]);
    if (!ok) {
      this.counts.refused++;
      log.warn(`prefix cache: ${path} is damaged or from another build; deleted`);
      this.remove(path, data.byteLength);
      return undefined;
    }
    this.counts.hits++;
    try {
      const now = new Date();
      utimesSync(path, now, now); // most recently used
    } catch {
      // evicted by another server meanwhile: the bytes read are still good
    }
    return payload;
  }

  // Stores an entry unless it is there already, in the background: the payload is the caller's no more (a fresh host
  // copy of a page or slot).
  write(kind: EntryKind, hash: BlockHash, payload: Uint8Array): void {
    if (payload.byteLength !== this.options.entryBytes[kind]) throw new Error(`prefix cache: a ${kind} entry is ${this.options.entryBytes[kind]} bytes, not ${payload.byteLength}`);
    const path = this.path(kind, hash);
    const name = `${hash}.${kind}`;
    const size = HEADER + payload.byteLength;
    if (this.options.budget < size || this.pendingBytes + size > MAX_PENDING_BYTES || this.writing.has(name) || existsSync(path)) return;
    this.pendingBytes += size;
    this.writing.add(name);
    const file = new Blob([header(kind, hash, payload), new Uint8Array(payload.buffer as ArrayBuffer, payload.byteOffset, payload.byteLength)]);
    const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    Bun.write(tmp, file)
      .then(() => {
        renameSync(tmp, path);
        this.names.add(name);
        this.bytes += size;
        this.files++;
        this.counts.writes++;
        this.counts.writtenBytes += size;
        if (this.bytes > this.options.budget) void this.evict();
      })
      .catch((e: unknown) => {
        rmSync(tmp, { force: true });
        log.warn(`prefix cache: could not write ${path}: ${e instanceof Error ? e.message : String(e)}`);
      })
      .finally(() => {
        this.pendingBytes -= size;
        this.writing.delete(name);
      });
  }

  stats(): DiskTierStats {
    return { bytes: this.bytes, budget: this.options.budget, files: this.files, ...this.counts };
  }

  // Resolves once every write queued so far is on disk (tests, and a clean shutdown).
  async flush(): Promise<void> {
    while (this.pendingBytes > 0 || this.evicting) await Bun.sleep(5);
  }

  // ---- internal ----

  // The entries on disk now, least recently used first.
  private entries(): { path: string; size: number; mtime: number }[] {
    const out: { path: string; size: number; mtime: number }[] = [];
    for (const name of readdirSync(this.options.dir)) {
      if (!name.endsWith(".page") && !name.endsWith(".state")) continue;
      try {
        const st = statSync(join(this.options.dir, name));
        out.push({ path: join(this.options.dir, name), size: st.size, mtime: st.mtimeMs });
      } catch {
        // removed meanwhile
      }
    }
    return out.sort((a, b) => a.mtime - b.mtime);
  }

  // Lists the directory: the entries, their bytes; temporary files of writers that died before renaming them
  // (<entry>.<pid>.<random>.tmp) are removed.
  private rescan(): void {
    for (const name of readdirSync(this.options.dir)) {
      const pid = /\.(\d+)\.\w+\.tmp$/.exec(name)?.[1];
      if (pid && !pidAlive(Number(pid))) rmSync(join(this.options.dir, name), { force: true });
    }
    const all = this.entries();
    this.bytes = all.reduce((n, e) => n + e.size, 0);
    this.files = all.length;
    this.names = new Set(all.map((e) => basename(e.path)));
    this.listedAt = performance.now();
  }

  private remove(path: string, size: number): void {
    this.names.delete(basename(path));
    try {
      rmSync(path);
      this.bytes -= size;
      this.files--;
    } catch {
      // gone already
    }
  }

  // Deletes the least recently used entries until the files fit the budget, counting every server's files; skipped
  // when another process is evicting (it brings the directory under the same budget).
  private async evict(): Promise<void> {
    if (this.evicting) return;
    this.evicting = true;
    try {
      await withLock(join(this.options.dir, "evict.lock"), async () => {
        const all = this.entries();
        let total = all.reduce((n, e) => n + e.size, 0);
        for (const e of all) {
          if (total <= this.options.budget) break;
          try {
            rmSync(e.path);
            total -= e.size;
            this.counts.evicted++;
          } catch {
            // another server removed it
          }
        }
        this.rescan();
      }, { timeoutMs: 0 });
    } catch {
      // the lock is busy: its holder evicts
    } finally {
      this.evicting = false;
    }
  }
}
