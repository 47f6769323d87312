// A lock file so that two launches at once do not start two servers for one model. The file is created exclusively
// and holds the owner's pid; a lock whose owner has died is taken over. The owner holds it while it checks for a
// server, starts one and waits until it answers, so a second launch waits and then finds the server ready.
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { pidAlive, sleep } from "./process.ts";

export class LockTimeout extends Error {
  override name = "LockTimeout";
  constructor(readonly owner: number | undefined) {
    super(`timed out waiting for the lock held by pid ${owner ?? "unknown"}`);
  }
}

function owner(path: string): number | undefined {
  try {
    const pid = Number.parseInt(readFileSync(path, "utf8"), 10);
    return Number.isFinite(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function ageMs(path: string): number {
  try {
    return Date.now() - statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

function tryCreate(path: string): boolean {
  try {
    const fd = openSync(path, "wx", 0o600);
    writeSync(fd, String(process.pid));
    closeSync(fd);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw e;
  }
}

// Removes a lock left by a dead process. It is renamed first, so of two launches that both saw it dead only one
// removes it, and a fresh lock created in between is not the one deleted.
function breakStale(path: string, deadPid: number | undefined): void {
  const aside = `${path}.${process.pid}.stale`;
  try {
    renameSync(path, aside);
  } catch {
    return; // someone else broke it first
  }
  if (owner(aside) === deadPid) rmSync(aside, { force: true });
  else renameSync(aside, path); // it changed hands in between: put it back
}

export type LockOptions = {
  timeoutMs: number;
  onWait?: (owner: number | undefined) => void; // called once when the lock is busy
};

export async function withLock<T>(path: string, fn: () => Promise<T>, options: LockOptions): Promise<T> {
  mkdirSync(dirname(path), { recursive: true });
  const end = Date.now() + options.timeoutMs;
  let told = false;
  for (;;) {
    if (tryCreate(path)) break;
    const pid = owner(path);
    // A lock without a pid is being written right now, unless it has been so for seconds (its owner died between
    // creating and writing it).
    if (pid === undefined ? ageMs(path) > 5000 : !pidAlive(pid)) {
      breakStale(path, pid);
      continue;
    }
    if (Date.now() >= end) throw new LockTimeout(pid);
    if (!told) options.onWait?.(pid);
    told = true;
    await sleep(100);
  }
  try {
    return await fn();
  } finally {
    rmSync(path, { force: true });
  }
}
