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
