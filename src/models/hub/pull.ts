// `splash pull` without the CLI: lists a repository at a revision, skips what the cache already holds (ours or
// another tool's), refuses before the first byte when the disk cannot take the rest, downloads the missing files a
// few at a time (each resumable and checksummed), links the snapshot and records the ref.
import { existsSync, statSync, statfsSync } from "node:fs";
import { dirname } from "node:path";
import { formatBytes } from "../../format.ts";
import { RepoCache } from "./cache.ts";
import { HubError, type HubClient, type HubFile } from "./client.ts";
import { downloadFile } from "./download.ts";
import type { PullProgress } from "./progress.ts";

// Weight formats Splash does not read; a repository may carry them beside the safetensors (llama.cpp, PyTorch).
const SKIPPED = /\.(bin|pt|pth|ckpt|h5|msgpack|onnx|gguf|ot|tflite|mlmodel)$|^original\//;

export type PullOptions = {
  client: HubClient;
  repo: string;
  revision?: string;
  cacheRoot?: string;
  concurrency?: number;
  progress?: PullProgress;
  signal?: AbortSignal;
  retryDelayMs?: number;
  // Free bytes on the filesystem holding `dir` (statfs); tests pass a small value.
  freeBytes?: (dir: string) => number;
};

export type PullResult = { repo: string; commit: string; dir: string; files: HubFile[]; downloaded: number; reused: number; bytes: number };

function freeBytesAt(dir: string): number {
  let d = dir;
  while (!existsSync(d) && dirname(d) !== d) d = dirname(d);
  const s = statfsSync(d);
  return s.bavail * s.bsize;
}

function sizeOf(path: string): number | undefined {
  try {
    return statSync(path).size;
  } catch {
    return undefined;
  }
}

export async function pullRepo(opts: PullOptions): Promise<PullResult> {
  const revision = opts.revision ?? "main";
  const cache = new RepoCache(opts.repo, opts.cacheRoot);
  const listing = await opts.client.listFiles(opts.repo, revision, opts.signal);
  const files = listing.files.filter((f) => !SKIPPED.test(f.path));
  const commit = listing.commit;

  // What is there already: a snapshot file of the right size, or a blob to link (another revision's, or a
  // download that finished before the snapshot link was made). Partials count toward what is present.
  const todo: HubFile[] = [];
  let present = 0;
  let reused = 0;
  for (const f of files) {
    const inSnapshot = sizeOf(`${cache.snapshotDir(commit)}/${f.path}`);
    if (inSnapshot === f.size) {
      reused++;
      present += f.size;
      continue;
    }
    if (cache.blobSize(f.etag) === f.size) {
      cache.link(f.etag, commit, f.path);
      reused++;
      present += f.size;
      continue;
    }
    todo.push(f);
    present += Math.min(sizeOf(cache.incomplete(f.etag)) ?? 0, f.size);
  }
  const total = files.reduce((a, f) => a + f.size, 0);
  const needed = total - present;
  const free = (opts.freeBytes ?? freeBytesAt)(cache.dir);
  if (needed > free) {
    throw new HubError(
      "disk",
      `${opts.repo} needs ${formatBytes(needed)} more, but ${cache.root} has ${formatBytes(free)} free`,
      "free some space, or set HF_HUB_CACHE to a directory on a disk with room (other tools will find the files there too)",
    );
  }

  // Downloads run `concurrency` at a time; the first failure stops the others, whose partials stay resumable.
  const stop = new AbortController();
  const onAbort = () => stop.abort();
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  opts.progress?.start(files.length, total, present);
  const queue = [...todo].sort((a, b) => b.size - a.size); // biggest first: the tail is short files
  let failure: unknown;
  const worker = async () => {
    for (let f = queue.shift(); f && !stop.signal.aborted; f = queue.shift()) {
      try {
        await downloadFile(opts.client, opts.repo, commit, f, cache.incomplete(f.etag), {
          signal: stop.signal,
          onBytes: (n) => opts.progress?.bytes(n),
          retryDelayMs: opts.retryDelayMs,
        });
        cache.commitBlob(f.etag, commit, f.path);
        opts.progress?.fileDone(f.path);
      } catch (e) {
        failure ??= opts.signal?.aborted ? new HubError("interrupted", "interrupted") : e;
        stop.abort();
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(opts.concurrency ?? 4, todo.length)) }, worker));
  } finally {
    opts.progress?.finish();
    opts.signal?.removeEventListener("abort", onAbort);
  }
  if (failure) throw failure;
  cache.writeRef(revision, commit);
  return { repo: opts.repo, commit, dir: cache.snapshotDir(commit), files, downloaded: todo.length, reused, bytes: needed };
}
