// Downloads one file into its `.incomplete` blob, resuming what is already there with a Range request, hashing as
// the bytes arrive (a resumed file's existing part is hashed first), and checking the hash before the blob is kept.
// Every chunk is written with a synchronous write, so a killed process (Ctrl-C) leaves a partial that the next
// run resumes. A dropped connection is retried from where it stopped.
import { closeSync, existsSync, mkdirSync, openSync, readSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { HubError, type HubClient, type HubFile } from "./client.ts";

export type DownloadOptions = {
  signal?: AbortSignal;
  onBytes?: (n: number) => void; // bytes received (negative when a partial is discarded)
  retries?: number; // attempts after a dropped connection (default 5)
  retryDelayMs?: number; // first backoff, doubled each attempt (default 1000)
};

function hasherFor(file: HubFile): Bun.CryptoHasher {
  if (file.hash === "sha256") return new Bun.CryptoHasher("sha256");
  // git's blob id: sha1("blob <size>\0" + content).
  const h = new Bun.CryptoHasher("sha1");
  h.update(`blob ${file.size}\0`);
  return h;
}

// Feeds the first `length` bytes of a file to the hasher.
function hashPrefix(path: string, length: number, hasher: Bun.CryptoHasher): void {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(8 << 20);
    for (let pos = 0; pos < length; ) {
      const n = readSync(fd, buf, 0, Math.min(buf.length, length - pos), pos);
      if (n === 0) break;
      hasher.update(buf.subarray(0, n));
      pos += n;
    }
  } finally {
    closeSync(fd);
  }
}

// The hash of a whole file as the hub names it (sha256, or git's blob sha1 for small non-LFS files).
export function hashFile(path: string, file: Pick<HubFile, "hash" | "size">): string {
  const h = hasherFor({ ...file, path, etag: "" });
  hashPrefix(path, statSync(path).size, h);
  return h.digest("hex");
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(t), resolve()), { once: true });
  });
}

// Downloads `file` of repo@commit into `dest` (the blob's .incomplete path). On return dest holds the whole file
// and its hash is the file's etag; a mismatch deletes dest and throws HubError("checksum").
export async function downloadFile(client: HubClient, repo: string, commit: string, file: HubFile, dest: string, opts: DownloadOptions = {}): Promise<void> {
  mkdirSync(dirname(dest), { recursive: true });
  const retries = opts.retries ?? 5;
  let delay = opts.retryDelayMs ?? 1000;
  let attempt = 0;
  const interrupted = () => new HubError("interrupted", `interrupted while downloading ${repo}/${file.path}`);
  const retry = async (err: HubError) => {
    if (attempt++ >= retries) throw err;
    await sleep(delay, opts.signal);
    delay *= 2;
  };

  if (!existsSync(dest) || statSync(dest).size > file.size) closeSync(openSync(dest, "w"));
  let have = statSync(dest).size;
  let hasher = hasherFor(file);
  hashPrefix(dest, have, hasher);
  const restart = () => {
    opts.onBytes?.(-have);
    have = 0;
    hasher = hasherFor(file);
    closeSync(openSync(dest, "w"));
  };
  const url = client.fileUrl(repo, commit, file.path);

  while (have < file.size) {
    if (opts.signal?.aborted) throw interrupted();
    const headers: Record<string, string> = { "accept-encoding": "identity" };
    if (have > 0) headers.range = `bytes=${have}-`;
    let res: Response;
    try {
      res = await client.request(url, { headers, signal: opts.signal });
    } catch (e) {
      if (opts.signal?.aborted) throw interrupted();
      if (e instanceof HubError && e.kind === "offline") {
        await retry(e);
        continue;
      }
      throw e;
    }
    if (res.status === 429 || res.status >= 500) {
      await retry(await client.failure(res, repo, file.path));
      continue;
    }
    if (res.status === 416) {
      // The partial is not a prefix the server can continue: start over.
      await res.body?.cancel();
      restart();
      await retry(new HubError("server", `the hub cannot resume ${repo}/${file.path} (416)`));
      continue;
    }
    if (!res.ok) throw await client.failure(res, repo, file.path);
    const linked = res.headers.get("x-linked-etag")?.replace(/^W\//, "").replace(/"/g, "");
    if (linked && file.hash === "sha256" && linked !== file.etag) {
      await res.body?.cancel();
      throw new HubError("server", `the hub serves ${repo}/${file.path} with sha256 ${linked} but listed ${file.etag}: the repository changed during the download`, "run the command again");
    }
    // A server that ignores Range answers 200 with the whole file: start over.
    const start = res.status === 206 ? Number(/bytes (\d+)-/.exec(res.headers.get("content-range") ?? "")?.[1] ?? NaN) : 0;
    if (start !== have) {
      if (start !== 0) throw new HubError("server", `the hub resumed ${repo}/${file.path} at byte ${start}, not ${have}`);
      restart();
    }
    const fd = openSync(dest, "r+");
    try {
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (have + value.length > file.size) throw new HubError("server", `the hub sent more than the ${file.size} bytes listed for ${repo}/${file.path}`);
        writeSync(fd, value, 0, value.length, have);
        hasher.update(value);
        have += value.length;
        opts.onBytes?.(value.length);
      }
    } catch (e) {
      if (opts.signal?.aborted) throw interrupted();
      if (e instanceof HubError) throw e;
      await retry(new HubError("offline", `the download of ${repo}/${file.path} broke off at byte ${have} of ${file.size} (${(e as Error).message})`, "run the command again: it resumes where it stopped"));
      continue;
    } finally {
      closeSync(fd);
    }
    if (have < file.size) await retry(new HubError("offline", `the download of ${repo}/${file.path} ended at byte ${have} of ${file.size}`, "run the command again: it resumes where it stopped"));
  }

  const actual = hasher.digest("hex");
  if (actual === file.etag) return;
  rmSync(dest, { force: true });
  throw new HubError("checksum", `${repo}/${file.path}: ${file.hash} ${actual} does not match the hub's ${file.etag}; the corrupt download was deleted`, "run the command again to download it afresh");
}
