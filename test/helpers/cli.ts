// Runs the CLI as a user would (a child process of `bun src/main.ts`), capturing its output.
import { join } from "node:path";

export const repoRoot = join(import.meta.dir, "..", "..");

export type CliResult = { code: number; stdout: string; stderr: string };

export async function splash(args: string[], opts: { env?: Record<string, string>; stdin?: string; cwd?: string } = {}): Promise<CliResult> {
  const proc = Bun.spawn([process.execPath, join(repoRoot, "src/main.ts"), ...args], {
    cwd: opts.cwd ?? repoRoot,
    env: { ...process.env, ...opts.env },
    stdin: opts.stdin === undefined ? "ignore" : new Blob([opts.stdin]),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

// The CLI on a pseudo-terminal, as a user at a shell sees it: stdout and stderr both reach the terminal, so the
// output is the two interleaved, escape sequences included.
export async function splashOnTerminal(args: string[], opts: { env?: Record<string, string | undefined> } = {}): Promise<{ code: number; output: string }> {
  const chunks: Uint8Array[] = [];
  let closed!: () => void;
  const eof = new Promise<void>((r) => (closed = r));
  const env = { ...process.env, ...opts.env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const proc = Bun.spawn([process.execPath, join(repoRoot, "src/main.ts"), ...args], {
    cwd: repoRoot,
    env,
    terminal: { cols: 250, rows: 50, data: (_t, d) => void chunks.push(d), exit: () => closed() },
  });
  const code = await proc.exited;
  await Promise.race([eof, Bun.sleep(2000)]);
  proc.terminal?.close();
  return { code, output: Buffer.concat(chunks).toString("utf8") };
}
