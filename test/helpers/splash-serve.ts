// Starts the real `splash serve` (a child process of `bun src/main.ts`) on a free port and waits for its
// "listening" line on stdout. For end-to-end tests of the whole stack: model loading, engine, chat, server. The
// prefix cache's disk tier is off unless the args set --disk-cache: entries from earlier runs would make a test's
// cold request hit.
import { join } from "node:path";
import { repoRoot } from "./cli.ts";

export type ServeProcess = { url: string; model: string; proc: Bun.Subprocess<"ignore", "pipe", "pipe">; log: () => string; stop: () => Promise<void> };

export async function splashServe(args: string[] = [], env: Record<string, string> = {}): Promise<ServeProcess> {
  const disk = args.some((a) => a.startsWith("--disk-cache")) ? [] : ["--disk-cache", "0"];
  const proc = Bun.spawn([process.execPath, join(repoRoot, "src/main.ts"), "serve", "--port", "0", ...disk, ...args], {
    cwd: repoRoot,
    env: { ...process.env, ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let stderr = "";
  void (async () => {
    for await (const chunk of proc.stderr) stderr += new TextDecoder().decode(chunk);
  })();
  const reader = proc.stdout.getReader();
  let buf = "";
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`splash serve exited before listening:\n${stderr}`);
    buf += new TextDecoder().decode(value);
    const line = buf.split("\n").find((l) => l.startsWith("{") && l.includes('"listening"'));
    if (line) {
      const { url, model } = JSON.parse(line) as { url: string; model: string };
      reader.releaseLock();
      return {
        url,
        model,
        proc,
        log: () => stderr,
        stop: async () => {
          proc.kill("SIGTERM");
          await proc.exited;
        },
      };
    }
  }
  proc.kill();
  throw new Error(`splash serve did not listen within 60 s:\n${stderr}`);
}
