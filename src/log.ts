// The process-wide logger. consola/core with a reporter writing plain lines to stderr: the full `consola` import
// is a noticeable part of start-up under Bun (bun-stack.md), stdout stays free for command output (`splash run` streams the
// answer there), and Bun's console.error would colour every line red on a terminal, information included.
import { createConsola, type ConsolaReporter, type LogObject } from "consola/core";

const reporter: ConsolaReporter = {
  log(entry: LogObject) {
    const text = entry.args.map((a) => (a instanceof Error ? (a.stack ?? a.message) : String(a))).join(" ");
    const tag = entry.level <= 0 ? "error" : entry.level === 1 ? "warn" : "";
    process.stderr.write(`${tag ? `splash ${tag}: ${text}` : text}\n`);
  },
};

// Level 3 = info; SPLASH_LOG=debug raises it, SPLASH_LOG=quiet keeps warnings and errors only.
const level = process.env.SPLASH_LOG === "debug" ? 4 : process.env.SPLASH_LOG === "quiet" ? 1 : 3;

export const log = createConsola({ level, reporters: [reporter] });
