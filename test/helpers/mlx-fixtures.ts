// The MLX-format fixture checkpoints (scripts/fixtures/mlx_fixtures.py), made at test time by the real mlx-lm instead
// of being committed (≈21 MB, and the device machine's runs carry the whole tracked tree). The first call installs the
// packages pinned in scripts/fixtures/mlx-requirements.txt from PyPI into a virtual environment under
// build/mlx-fixtures/ (≈50 MB of wheels, 15–30 s here) and runs the script (15–25 s on 2 cores); later runs reuse
// both. The environment is keyed by the pins and the Python version, the fixtures additionally by the script and the
// input files their content comes from, so a retrained models/splash-tiny or an edited script regenerates them. The
// generation is deterministic: the same inputs and pins give bit-identical files (checked against the once-committed
// copies).
//
// Without PyPI the tests that need these fail with a message saying so; SPLASH_SKIP_MLX_FIXTURES=1 skips them instead.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { withLock } from "../../src/launch/lock.ts";
import { repoRoot } from "./cli.ts";

export const SKIP_ENV = "SPLASH_SKIP_MLX_FIXTURES";
export const skipMlxFixtures = process.env[SKIP_ENV] === "1";
if (skipMlxFixtures) console.error(`mlx fixtures: ${SKIP_ENV}=1, the tests that need them are skipped`);

// For the beforeAll that calls mlxFixtures(): a first run installs and generates; a second test run waits on the lock.
export const MLX_FIXTURES_TIMEOUT_MS = 10 * 60_000;

const ROOT = join(repoRoot, "build", "mlx-fixtures");
const SCRIPT = join(repoRoot, "scripts/fixtures/mlx_fixtures.py");
const REQUIREMENTS = join(repoRoot, "scripts/fixtures/mlx-requirements.txt");
// What the fixtures are made of: the config and weights of the checkpoints the script converts (it keeps neither their
// tokenizer nor anything else, and reads no subfolder such as models/splash-tiny/dflash) and the prompts of the
// splash-tiny golden.
const INPUT_DIRS = [join(repoRoot, "test/fixtures/models/qwen35-dense-tiny"), join(repoRoot, "models/splash-tiny")];
const INPUT_NAME = /^(config\.json|.*\.safetensors|.*\.safetensors\.index\.json)$/;
const INPUT_FILES = [join(repoRoot, "test/fixtures/models/splash-tiny-golden/golden.safetensors")];
// Fails fast when the index cannot be reached, instead of the environment's long default timeout and retries.
const PIP_NETWORK = ["--timeout", "30", "--retries", "2"];

const short = (p: string) => relative(repoRoot, p);
const hash = (parts: (string | Uint8Array)[]) => {
  const h = createHash("sha256");
  for (const p of parts) h.update(p).update("\0");
  return h.digest("hex").slice(0, 16);
};

class MlxFixturesError extends Error {
  override name = "MlxFixturesError";
}

async function exec(cmd: string[], onLine?: (line: string) => void): Promise<{ code: number; output: string }> {
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

function say(text: string): void {
  console.error(`mlx fixtures: ${text}`);
}

function seconds(since: number): string {
  return `${((performance.now() - since) / 1000).toFixed(0)} s`;
}

// Removes what earlier keys left under ROOT (a superseded environment or fixture set) next to the current one.
function pruneSiblings(prefix: string, keep: string): void {
  for (const name of readdirSync(ROOT)) if (name.startsWith(prefix) && name !== keep) rmSync(join(ROOT, name), { recursive: true, force: true });
}

async function pythonVersion(): Promise<string> {
  let r: { code: number; output: string };
  try {
    r = await exec(["python3", "-c", "import platform, sys; print(sys.version, platform.machine())"]);
  } catch (e) {
    throw new MlxFixturesError(`python3 could not be run (${e instanceof Error ? e.message : String(e)}): the MLX fixtures are made with mlx-lm in Python. Install python3 ≥ 3.11 (with pip ≥ 22.3), or set ${SKIP_ENV}=1 to skip the MLX tests.`);
  }
  if (r.code !== 0) throw new MlxFixturesError(`python3 failed (exit ${r.code}): ${r.output.trim()}`);
  return r.output.trim();
}

// The virtual environment's python, installing the pinned packages first if this key has none yet.
async function environment(python: string): Promise<string> {
  const requirements = readFileSync(REQUIREMENTS, "utf8");
  const name = `venv-${hash([requirements, python])}`;
  const dir = join(ROOT, name);
  const bin = join(dir, "bin", "python");
  if (existsSync(join(dir, ".installed"))) return bin;
  rmSync(dir, { recursive: true, force: true });
  const start = performance.now();
  say(`installing the pinned mlx, mlx-lm and dependencies (${short(REQUIREMENTS)}) from PyPI into ${short(dir)} — about 50 MB, once per pin set`);
  // No pip inside the environment (creating it with one costs ~15 s): the host's pip installs into it (--python).
  const venv = await exec(["python3", "-m", "venv", "--without-pip", dir]);
  if (venv.code !== 0) throw new MlxFixturesError(`python3 -m venv failed (exit ${venv.code}):\n${venv.output.trim().slice(-2000)}`);
  const pip = await exec(["python3", "-m", "pip", "--python", bin, "install", "--no-deps", "--no-compile", "--disable-pip-version-check", "--progress-bar", "off", ...PIP_NETWORK, "-r", REQUIREMENTS]);
  if (pip.code !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new MlxFixturesError(
      `could not install the packages pinned in ${short(REQUIREMENTS)} (pip exit ${pip.code}):\n${pip.output.trim().slice(-2000)}\n` +
        `The MLX tests compare against checkpoints and logits made by the real mlx-lm at test time, so they need PyPI ` +
        `(or an index or wheel folder through PIP_INDEX_URL / PIP_FIND_LINKS) and python3 ≥ 3.11 with pip ≥ 22.3. ` +
        `Set ${SKIP_ENV}=1 to skip them on a machine without it.`,
    );
  }
  writeFileSync(join(dir, ".installed"), `${new Date().toISOString()}\n`);
  say(`installed in ${seconds(start)}`);
  pruneSiblings("venv-", name);
  return bin;
}

function inputsKey(python: string): string {
  const files = [...INPUT_DIRS.flatMap((d) => readdirSync(d).filter((f) => INPUT_NAME.test(f)).map((f) => join(d, f))), ...INPUT_FILES].sort();
  return hash([readFileSync(SCRIPT), readFileSync(REQUIREMENTS), python, ...files.flatMap((f) => [short(f), readFileSync(f)])]);
}

async function generate(): Promise<string> {
  const python = await pythonVersion();
  const name = `fixtures-${inputsKey(python)}`;
  const dir = join(ROOT, name);
  if (existsSync(dir)) return dir;
  mkdirSync(ROOT, { recursive: true });
  return withLock(join(ROOT, ".lock"), async () => {
    if (existsSync(dir)) return dir;
    const bin = await environment(python);
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    const start = performance.now();
    say(`generating the checkpoints and mlx-lm goldens with ${short(SCRIPT)} into ${short(dir)}`);
    const r = await exec([bin, SCRIPT, "--out", tmp], (line) => line.startsWith("mlx_fixtures: ") && say(line.slice("mlx_fixtures: ".length)));
    if (r.code !== 0) {
      rmSync(tmp, { recursive: true, force: true });
      throw new MlxFixturesError(`${short(SCRIPT)} failed (exit ${r.code}):\n${r.output.trim().slice(-3000)}`);
    }
    renameSync(tmp, dir);
    say(`generated in ${seconds(start)}`);
    pruneSiblings("fixtures-", name);
    return dir;
  }, { timeoutMs: MLX_FIXTURES_TIMEOUT_MS, onWait: (pid) => say(`waiting for pid ${pid ?? "?"}, which is making them`) });
}

let made: Promise<string> | undefined;

// The folder holding qwen35-dense-tiny-mlx-4bit, qwen35-dense-tiny-mlx-8bit, qwen35-moe-tiny-mlx-4bit,
// splash-tiny-mlx-4bit and splash-tiny-mlx-8bit (each config.json, model.safetensors + index, golden.safetensors).
export function mlxFixtures(): Promise<string> {
  made ??= generate();
  return made;
}
