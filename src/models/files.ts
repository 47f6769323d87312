// Checks on a checkpoint directory's files. The fast one runs on every load and listing: libsplash opens the
// checkpoint as its loader does (src/native/checkpoint.ts) — every file the index names is there, inside the
// directory, each safetensors header parses and fits its file, index and headers agree — without reading the
// weights, so a cut or partial download is named before anything loads. The full one (`splash verify`) hashes
// every file against the hash the hub recorded for it, which the cache keeps as the blob's name.
import { lstatSync, readdirSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { CliError } from "../cli/_command.ts";
import { checkpointFiles } from "../native/checkpoint.ts";
import { NativeError } from "../native/errors.ts";
import { hashFile } from "./hub/download.ts";

export class CheckpointFilesError extends CliError {
  override name = "CheckpointFilesError";
}

export type WeightFiles = { files: string[]; tensors: number; bytes: number };

const HINT = "the download is incomplete or damaged: run `splash verify MODEL` to see which file, then `splash pull MODEL` to fetch it again";

// The fast check. Throws CheckpointFilesError with libsplash's message (the file, and the tensor where there is one).
export function checkWeightFiles(dir: string, hint = HINT): WeightFiles {
  try {
    const { files, tensors } = checkpointFiles(dir);
    return { files: files.map((f) => f.name), tensors, bytes: files.reduce((a, f) => a + f.bytes, 0) };
  } catch (e) {
    if (e instanceof NativeError) throw new CheckpointFilesError(e.detail.replace(/^[\w.]+:\d+: /, ""), hint);
    throw e;
  }
}

export type FileCheck = { path: string; bytes: number; status: "ok" | "mismatch" | "unchecked"; algorithm?: "sha256" | "git-sha1"; expected?: string; actual?: string; blob?: string };

function walk(dir: string, root = dir): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? walk(p, root) : [relative(root, p)];
  });
}

// The full check: every file under dir, hashed. A file in a hub-cache snapshot is a symlink to blobs/<etag>, and
// the etag is the hub's sha256 (LFS files) or git blob sha1 (small files); a plain file has no recorded hash and is
// reported unchecked. `onFile` is called as each file is done (hashing a 50 GB model takes minutes).
export function verifyChecksums(dir: string, onFile: (c: FileCheck) => void = () => {}): FileCheck[] {
  const out: FileCheck[] = [];
  for (const path of walk(dir).sort()) {
    const full = join(dir, path);
    const size = statSync(full).size;
    const blob = lstatSync(full).isSymbolicLink() ? basename(readlinkSync(full)) : undefined;
    const algorithm = blob && /^[0-9a-f]{64}$/.test(blob) ? "sha256" : blob && /^[0-9a-f]{40}$/.test(blob) ? "git-sha1" : undefined;
    let check: FileCheck;
    if (!algorithm || !blob) check = { path, bytes: size, status: "unchecked" };
    else {
      const actual = hashFile(full, { hash: algorithm, size });
      check = { path, bytes: size, status: actual === blob ? "ok" : "mismatch", algorithm, expected: blob, actual, blob: realpathSync(full) };
    }
    out.push(check);
    onFile(check);
  }
  return out;
}
