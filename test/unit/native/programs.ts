// Builds and runs the C library's test programs (native/tests/*_test.c, native/tests/fuzz_safetensors.c) for the
// test/unit/native/ files that run them. Each program prints one OK/NOT OK line per check and a summary line
// "<name>: N checks, F failed", and exits non-zero when anything failed.
import { join } from "node:path";

export const root = join(import.meta.dir, "..", "..", "..");

export type ProgramResult = { code: number; stdout: string; stderr: string };

/** Brings build/ (release) or build/debug/ (ASan + UBSan) up to date; fast when nothing changed. */
export async function buildNative(debug: boolean): Promise<void> {
  const args = [process.execPath, join(root, "scripts/build/native.ts"), ...(debug ? ["--debug"] : [])];
  const proc = Bun.spawn(args, { cwd: root, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0) throw new Error(`native build failed:\n${out}${err}`);
}

/** Runs build[/debug]/<dir>/<name> with args. */
export async function runProgram(debug: boolean, dir: "tests" | "tools", name: string, args: string[] = []): Promise<ProgramResult> {
  const exe = join(root, "build", debug ? "debug" : "", dir, name);
  return run([exe, ...args]);
}

export async function run(cmd: string[]): Promise<ProgramResult> {
  const proc = Bun.spawn(cmd, { cwd: root, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

/** The "N checks, F failed" summary of a C test program, or null when it did not get that far. */
export function summary(name: string, stdout: string): { checks: number; failed: number } | null {
  const m = new RegExp(`^${name}: (\\d+) checks, (\\d+) failed$`, "m").exec(stdout);
  return m ? { checks: Number(m[1]), failed: Number(m[2]) } : null;
}

/** The lines of a C test program that failed, for the assertion message. */
export function failures(stdout: string): string[] {
  return stdout.split("\n").filter((l) => l.startsWith("NOT OK"));
}
