// Progress of a pull on stderr: on a terminal one line redrawn in place (files, bytes, rate, ETA, a bar); otherwise
// a line per finished file and a status line every 10 s, so logs stay readable.
import { formatBytes } from "../../format.ts";

export type PullProgress = {
  start(files: number, bytes: number, present: number): void; // present: bytes already on disk (reused or partial)
  bytes(n: number): void;
  fileDone(path: string): void;
  finish(): void;
};

function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "--";
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

export function pullProgress(label: string, out: { isTTY?: boolean; write(s: string): unknown } = process.stderr, now: () => number = () => performance.now()): PullProgress {
  let files = 0;
  let done = 0;
  let total = 0;
  let have = 0;
  let last = 0;
  let timer: ReturnType<typeof setInterval> | undefined;
  // (time, bytes) samples over the last 5 s give the rate.
  const samples: [number, number][] = [];
  const rate = () => {
    const t = now();
    samples.push([t, have]);
    while (samples.length > 2 && t - samples[0]![0] > 5000) samples.shift();
    const [t0, b0] = samples[0]!;
    return t > t0 ? ((have - b0) * 1000) / (t - t0) : 0;
  };
  const status = () => {
    const r = rate();
    const eta = r > 0 ? (total - have) / r : Infinity;
    return `${label}: ${done}/${files} files, ${formatBytes(have)} / ${formatBytes(total)}, ${formatBytes(r)}/s, ETA ${duration(eta)}`;
  };
  const draw = () => {
    if (out.isTTY) {
      const width = 24;
      const fill = total > 0 ? Math.round((have / total) * width) : width;
      out.write(`\r\x1b[2K[${"#".repeat(fill)}${".".repeat(width - fill)}] ${status()}`);
    } else if (now() - last >= 10_000) {
      last = now();
      out.write(`${status()}\n`);
    }
  };
  return {
    start(n, bytes, present) {
      files = n;
      total = bytes;
      have = present;
      last = now();
      samples.length = 0;
      if (!out.isTTY) out.write(`${label}: ${n} files, ${formatBytes(bytes)}${present ? ` (${formatBytes(present)} already here)` : ""}\n`);
      timer = setInterval(draw, out.isTTY ? 200 : 1000);
    },
    bytes(n) {
      have += n;
    },
    fileDone(path) {
      done++;
      if (!out.isTTY) out.write(`${label}: ${path} done (${done}/${files})\n`);
    },
    finish() {
      if (timer) clearInterval(timer);
      if (out.isTTY) out.write(`\r\x1b[2K`);
    },
  };
}
