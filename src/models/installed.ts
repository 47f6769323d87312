// What of a hub model is on this machine: for each format its repository's snapshot in the hub cache (ours or
// another tool's), complete when config.json, tokenizer.json and every weight file are there and pass the fast check.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { checkWeightFiles, CheckpointFilesError } from "./files.ts";
import { RepoCache } from "./hub/cache.ts";
import { FORMATS, hubDrafter, type Format, type HubModelSpec } from "./spec.ts";

export type Installed = { repo: string; commit: string; dir: string; complete: boolean; bytes: number; problem?: string };

function snapshotState(repo: string, revision: string, needsTokenizer: boolean): Installed | undefined {
  const snap = new RepoCache(repo).snapshot(revision);
  if (!snap) return undefined;
  const base = { repo, commit: snap.commit, dir: snap.dir };
  for (const f of ["config.json", ...(needsTokenizer ? ["tokenizer.json"] : [])]) {
    if (!existsSync(join(snap.dir, f))) return { ...base, complete: false, bytes: 0, problem: `${f} is missing` };
  }
  try {
    return { ...base, complete: true, bytes: checkWeightFiles(snap.dir).bytes };
  } catch (e) {
    if (e instanceof CheckpointFilesError) return { ...base, complete: false, bytes: 0, problem: e.message };
    throw e;
  }
}

export function installedFormats(spec: HubModelSpec): Partial<Record<Format, Installed>> {
  const out: Partial<Record<Format, Installed>> = {};
  for (const f of FORMATS) {
    const src = spec.sources[f];
    const state = src && snapshotState(src.repo, src.revision, true);
    if (state) out[f] = state;
  }
  return out;
}

export function installedDrafter(spec: HubModelSpec): Installed | undefined {
  const d = hubDrafter(spec)?.repo;
  return d ? snapshotState(d.repo, d.revision, false) : undefined;
}

// Formats in the order a command picks among installed ones: the spec's default first.
export function formatPreference(spec: HubModelSpec): Format[] {
  return [spec.defaultFormat, ...FORMATS.filter((f) => f !== spec.defaultFormat && spec.sources[f])];
}
