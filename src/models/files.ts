// Checks on a checkpoint directory's files. The fast one runs on every load: every weight file the index names is
// there, each safetensors header parses and the file is exactly as long as its header says, and every tensor of
// the index is in its shard — a cut or partial download never reaches native. The full one (`splash verify`)
// hashes every file against the hash the hub recorded for it, which the cache keeps as the blob's name.
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { CliError } from "../cli/_command.ts";
import { hashFile } from "./hub/download.ts";
import { readSafetensorsHeader, SafetensorsError } from "./safetensors.ts";

export class CheckpointFilesError extends CliError {
  override name = "CheckpointFilesError";
}

export type WeightFiles = { files: string[]; tensors: number; bytes: number };

const HINT = "the download is incomplete or damaged: run `splash verify MODEL` to see which file, then `splash pull MODEL` to fetch it again";

// The fast check. Throws CheckpointFilesError naming the file and what is wrong.
export function checkWeightFiles(dir: string, hint = HINT): WeightFiles {
  const indexPath = join(dir, "model.safetensors.index.json");
  let shards: Map<string, string[]>;
  if (existsSync(indexPath)) {
    let index: { weight_map?: Record<string, string> };
    try {
      index = JSON.parse(readFileSync(indexPath, "utf8"));
    } catch (e) {
      throw new CheckpointFilesError(`${indexPath} is not valid JSON (${(e as Error).message})`, hint);
    }
    if (!index.weight_map || typeof index.weight_map !== "object") throw new CheckpointFilesError(`${indexPath} has no weight_map`, hint);
    shards = new Map();
    for (const [tensor, file] of Object.entries(index.weight_map)) shards.set(file, [...(shards.get(file) ?? []), tensor]);
  } else if (existsSync(join(dir, "model.safetensors"))) {
    shards = new Map([["model.safetensors", []]]);
  } else {
    const any = readdirSync(dir).filter((f) => f.endsWith(".safetensors"));
    if (any.length === 0) throw new CheckpointFilesError(`${dir} has no safetensors weights`, hint);
    shards = new Map(any.map((f) => [f, []]));
  }
  let tensors = 0;
  let bytes = 0;
  for (const [file, names] of shards) {
    const path = join(dir, file);
    if (!existsSync(path)) throw new CheckpointFilesError(`${path} is missing (the index names ${names.length} tensors in it)`, hint);
    let header;
    try {
      header = readSafetensorsHeader(path);
    } catch (e) {
      if (e instanceof SafetensorsError) throw new CheckpointFilesError(e.message, hint);
      throw e;
    }
    const absent = names.find((n) => !header.tensors.has(n));
    if (absent) throw new CheckpointFilesError(`${path} lacks tensor ${absent}, which the index puts there`, hint);
    tensors += header.tensors.size;
    bytes += header.fileSize;
  }
  return { files: [...shards.keys()], tensors, bytes };
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
