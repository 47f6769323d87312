// Small process helpers for launchers: is a pid alive, a free loopback port, the last line of a log.
import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { createServer } from "node:net";

// kill(pid, 0) checks existence without sending anything; EPERM means it exists but belongs to someone else.
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// Waits until the process is gone; true if it went within the time.
export async function waitExit(pid: number, timeoutMs: number): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (pidAlive(pid)) {
    if (Date.now() >= end) return false;
    await sleep(50);
  }
  return true;
}

// A port nobody listens on right now: the kernel picks one, we let it go. Another process could take it before the
// server binds; the server then exits with "cannot listen", which the launcher reports from the log.
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

// The last non-empty line of a file (reads only its tail), without ANSI colour codes.
export function lastLine(path: string): string | undefined {
  let fd: number | undefined;
  try {
    const size = statSync(path).size;
    const length = Math.min(size, 8192);
    const buf = Buffer.alloc(length);
    fd = openSync(path, "r");
    readSync(fd, buf, 0, length, size - length);
    const lines = buf.toString("utf8").replace(/\x1b\[[0-9;]*m/g, "").split(/\r?\n/).map((l) => l.trim()).filter(Boolean);
    return lines.at(-1);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

// A process's command line: /proc on Linux, `ps` elsewhere (split on spaces there, enough to find flags); undefined
// when it cannot be read.
export function commandLine(pid: number): string[] | undefined {
  try {
    if (process.platform === "linux") return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    const ps = Bun.spawnSync(["ps", "-o", "command=", "-p", String(pid)]);
    const text = ps.stdout.toString().trim();
    return ps.exitCode === 0 && text ? text.split(/\s+/) : undefined;
  } catch {
    return undefined;
  }
}
