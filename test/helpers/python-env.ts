// Pinned Python environments for the tests, installed on demand from PyPI into build/ (a fresh machine needs only
// python3 ≥ 3.11 with pip ≥ 22.3). Each is a virtual environment named by a hash of its pins file and the host's Python
// version, so an edited pin set or another Python makes a new one (and the superseded one is removed); the host's pip
// installs every pinned package with --no-deps into it, so that a new release of a dependency changes nothing.
//
// testPython(): the environment of scripts/fixtures/test-requirements.txt (numpy, gguf, transformers without torch,
// jinja2, tokenizers, huggingface_hub; ≈37 MB of wheels, 146 MB installed, about 10 s) in build/test-python/, for the tests that check
// Splash against those libraries (gguf-export, template, tokenizer-parity, pull-cli). The first call installs it under
// a lock, so test files or test runs at once wait for one install; later runs reuse it. Without PyPI those tests fail
// with a message saying so (an index or wheel folder can stand in through PIP_INDEX_URL / PIP_FIND_LINKS).
//
// The MLX fixtures (test/helpers/mlx-fixtures.ts) keep their own environment and pins through venv() below.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { withLock } from "../../src/launch/lock.ts";
import { repoRoot } from "./cli.ts";

// Fails fast when the index cannot be reached, instead of the environment's long default timeout and retries.
const PIP_NETWORK = ["--timeout", "30", "--retries", "2"];

export type VenvSpec = {
  label: string; // prefix of the progress lines on stderr
  root: string; // the folder under build/ that holds venv-<key>
  requirements: string; // the pins file
  contents: string; // what is installed, for the progress line ("the pinned …")
  size: string; // how much is downloaded, for the same line ("about N MB")
  why: string; // why the tests need Python, for the error when python3 cannot be run
  needs: string; // the start of the sentence "… need PyPI (…)" in the error when the install fails
  skip?: string; // how to skip the tests instead ("set X=1 to skip them")
  error: new (message: string) => Error;
};

export const short = (p: string) => relative(repoRoot, p);

export function hash(parts: (string | Uint8Array)[]): string {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex").slice(0, 16);
}

export function seconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(0)} s`;
}

export function say(spec: Pick<VenvSpec, "label">, text: string): void {
  console.error(`${spec.label}: ${text}`);
}

export async function exec(cmd: string[], onLine?: (line: string) => void): Promise<{ code: number; output: string }> {
  const p = Bun.spawn(cmd, { cwd: repoRoot, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  let output = "";
  const read = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const bytes of stream) {
      const chunk = decoder.decode(bytes, { stream: true });
      output += chunk;
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const l of lines) onLine?.(l);
    }
  };
  const [code] = await Promise.all([p.exited, read(p.stdout), read(p.stderr)]);
  return { code, output };
}

// Removes what earlier keys left in root (a superseded environment or fixture set) next to the current one.
export function pruneSiblings(root: string, prefix: string, keep: string): void {
  for (const name of readdirSync(root)) if (name.startsWith(prefix) && name !== keep) rmSync(join(root, name), { recursive: true, force: true });
}

// The host's Python, as part of the keys: "3.11.7 (main, …) [GCC …] x86_64".
export async function pythonVersion(spec: VenvSpec): Promise<string> {
  let r: { code: number; output: string };
  try {
    r = await exec(["python3", "-c", "import platform, sys; print(sys.version, platform.machine())"]);
  } catch (e) {
    const skip = spec.skip ? `, or ${spec.skip}` : "";
    throw new spec.error(`python3 could not be run (${e instanceof Error ? e.message : String(e)}): ${spec.why}. Install python3 ≥ 3.11 (with pip ≥ 22.3)${skip}.`);
  }
  if (r.code !== 0) throw new spec.error(`python3 failed (exit ${r.code}): ${r.output.trim()}`);
  return r.output.trim();
}

function venvDir(spec: VenvSpec, python: string): { name: string; dir: string; bin: string } {
  const name = `venv-${hash([readFileSync(spec.requirements, "utf8"), python])}`;
  const dir = join(spec.root, name);
  return { name, dir, bin: join(dir, "bin", "python") };
}

function installed(dir: string): boolean {
  return existsSync(join(dir, ".installed"));
}

// The environment's python, installing the pinned packages first if this key has none yet. The caller holds a lock
// that covers spec.root.
export async function venv(spec: VenvSpec, python: string): Promise<string> {
  const { name, dir, bin } = venvDir(spec, python);
  if (installed(dir)) return bin;
  rmSync(dir, { recursive: true, force: true });
  const start = performance.now();
  say(spec, `installing ${spec.contents} (${short(spec.requirements)}) from PyPI into ${short(dir)} — ${spec.size}, once per pin set`);
  // No pip inside the environment (creating it with one costs ~15 s): the host's pip installs into it (--python).
  const made = await exec(["python3", "-m", "venv", "--without-pip", dir]);
  if (made.code !== 0) throw new spec.error(`python3 -m venv failed (exit ${made.code}):\n${made.output.trim().slice(-2000)}`);
  const pip = await exec(["python3", "-m", "pip", "--python", bin, "install", "--no-deps", "--no-compile", "--disable-pip-version-check", "--progress-bar", "off", ...PIP_NETWORK, "-r", spec.requirements]);
  if (pip.code !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new spec.error(
      `could not install the packages pinned in ${short(spec.requirements)} (pip exit ${pip.code}):\n${pip.output.trim().slice(-2000)}\n` +
        `${spec.needs} PyPI (or an index or wheel folder through PIP_INDEX_URL / PIP_FIND_LINKS) and python3 ≥ 3.11 with pip ≥ 22.3` +
        `${spec.skip ? `, or ${spec.skip}` : ""}.`,
    );
  }
  writeFileSync(join(dir, ".installed"), `${new Date().toISOString()}\n`);
  say(spec, `installed in ${seconds(start)}`);
  pruneSiblings(spec.root, "venv-", name);
  return bin;
}

class TestPythonError extends Error {
  override name = "TestPythonError";
}

// For the beforeAll that awaits testPython(): a first run installs; another test run at once waits on the lock.
export const TEST_PYTHON_TIMEOUT_MS = 5 * 60_000;

const TEST_PYTHON: VenvSpec = {
  label: "test python",
  root: join(repoRoot, "build", "test-python"),
  requirements: join(repoRoot, "scripts/fixtures/test-requirements.txt"),
  contents: "the pinned numpy, gguf, transformers, tokenizers, huggingface_hub and dependencies",
  size: "about 37 MB",
  why: "the GGUF, chat template, tokenizer and hub interop tests compare against the Python libraries",
  needs: "These tests check Splash against numpy/gguf, transformers' jinja2 rendering, tokenizers and huggingface_hub, so they need",
  error: TestPythonError,
};

async function install(): Promise<string> {
  const python = await pythonVersion(TEST_PYTHON);
  const { dir, bin } = venvDir(TEST_PYTHON, python);
  if (installed(dir)) return bin;
  mkdirSync(TEST_PYTHON.root, { recursive: true });
  return withLock(join(TEST_PYTHON.root, ".lock"), () => venv(TEST_PYTHON, python), {
    timeoutMs: TEST_PYTHON_TIMEOUT_MS,
    onWait: (pid) => say(TEST_PYTHON, `waiting for pid ${pid ?? "?"}, which is installing it`),
  });
}

let made: Promise<string> | undefined;

// The python of the tests' pinned environment (scripts/fixtures/test-requirements.txt); the first call installs it.
export function testPython(): Promise<string> {
  made ??= install();
  return made;
}
