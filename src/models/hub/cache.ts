// The Hugging Face hub cache, laid out exactly as huggingface_hub does it, so files downloaded by other tools are
// found and ours are usable by them:
//
//   $HF_HUB_CACHE (or $HF_HOME/hub, or $XDG_CACHE_HOME/huggingface/hub, or ~/.cache/huggingface/hub)
//     models--{org}--{name}/
//       blobs/{etag}                  file contents; etag = sha256 for LFS files, the git blob sha1 otherwise
//       blobs/{etag}.incomplete       a download in progress (resumed with a Range request)
//       snapshots/{commit}/{path}     relative symlinks to ../../blobs/{etag}
//       refs/{revision}               the commit a branch or tag pointed to when last resolved
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync, lstatSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join, relative } from "node:path";

export const COMMIT_RE = /^[0-9a-f]{40}$/;

export function hfHome(): string {
  if (process.env.HF_HOME) return process.env.HF_HOME;
  return join(process.env.XDG_CACHE_HOME || join(process.env.HOME || homedir(), ".cache"), "huggingface");
}

export function hubCacheDir(): string {
  return process.env.HF_HUB_CACHE || process.env.HUGGINGFACE_HUB_CACHE || join(hfHome(), "hub");
}

// "Qwen/Qwen3.8-27B" → "models--Qwen--Qwen3.8-27B" (huggingface_hub's repo_folder_name).
export function repoFolderName(repo: string): string {
  return ["models", ...repo.split("/")].join("--");
}

export class RepoCache {
  readonly dir: string;
  constructor(
    readonly repo: string,
    readonly root = hubCacheDir(),
  ) {
    this.dir = join(root, repoFolderName(repo));
  }

  blob(etag: string): string {
    return join(this.dir, "blobs", etag);
  }

  incomplete(etag: string): string {
    return `${this.blob(etag)}.incomplete`;
  }

  snapshotDir(commit: string): string {
    return join(this.dir, "snapshots", commit);
  }

  // The commit a revision names: itself when it is a commit hash, else what refs/{revision} says.
  commitOf(revision: string): string | undefined {
    if (COMMIT_RE.test(revision)) return revision;
    const ref = join(this.dir, "refs", revision);
    if (!existsSync(ref)) return undefined;
    const commit = readFileSync(ref, "utf8").trim();
    return COMMIT_RE.test(commit) ? commit : undefined;
  }

  // The snapshot directory of a revision, when one is on disk.
  snapshot(revision = "main"): { commit: string; dir: string } | undefined {
    const commit = this.commitOf(revision);
    if (!commit) return undefined;
    const dir = this.snapshotDir(commit);
    return existsSync(dir) ? { commit, dir } : undefined;
  }

  writeRef(revision: string, commit: string): void {
    if (COMMIT_RE.test(revision)) return;
    const ref = join(this.dir, "refs", revision);
    mkdirSync(dirname(ref), { recursive: true });
    // huggingface_hub writes the bare hash without a newline.
    writeFileSync(ref, commit);
  }

  // Size of a complete blob on disk, or undefined.
  blobSize(etag: string): number | undefined {
    try {
      return statSync(this.blob(etag)).size;
    } catch {
      return undefined;
    }
  }

  // Moves a finished download into blobs/ and links the snapshot path to it, relatively, as huggingface_hub does.
  commitBlob(etag: string, commit: string, path: string): void {
    renameSync(this.incomplete(etag), this.blob(etag));
    this.link(etag, commit, path);
  }

  link(etag: string, commit: string, path: string): void {
    const target = join(this.snapshotDir(commit), path);
    mkdirSync(dirname(target), { recursive: true });
    try {
      lstatSync(target);
      rmSync(target); // a dangling or stale link
    } catch {
      // nothing there
    }
    symlinkSync(relative(dirname(target), this.blob(etag)), target);
  }
}
