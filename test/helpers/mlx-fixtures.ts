// The MLX-format fixture checkpoints (scripts/fixtures/mlx_fixtures.py), made at test time by the real mlx-lm instead
// of being committed (≈21 MB, and the device machine's runs carry the whole tracked tree). The first call installs the
// packages pinned in scripts/fixtures/mlx-requirements.txt from PyPI into a virtual environment under
// build/mlx-fixtures/ (≈50 MB of wheels, 15–30 s here; made by venv() of test/helpers/python-env.ts) and runs the
// script (15–25 s on 2 cores); later runs reuse both. The environment is keyed by the pins and the Python version, the
// fixtures additionally by the script and the input files their content comes from, so a retrained models/splash-tiny
// or an edited script regenerates them. The generation is deterministic: the same inputs and pins give bit-identical
// files (checked against the once-committed copies).
//
// Without PyPI the tests that need these fail with a message saying so; SPLASH_SKIP_MLX_FIXTURES=1 skips them instead.
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { withLock } from "../../src/launch/lock.ts";
import { repoRoot } from "./cli.ts";
import { exec, hash, pruneSiblings, pythonVersion, say as sayAs, seconds, short, venv, type VenvSpec } from "./python-env.ts";

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

class MlxFixturesError extends Error {
  override name = "MlxFixturesError";
}

// The environment in ROOT/venv-<key>, installed under the same lock as the fixtures.
const ENV: VenvSpec = {
  label: "mlx fixtures",
  root: ROOT,
  requirements: REQUIREMENTS,
  contents: "the pinned mlx, mlx-lm and dependencies",
  size: "about 50 MB",
  why: "the MLX fixtures are made with mlx-lm in Python",
  needs: "The MLX tests compare against checkpoints and logits made by the real mlx-lm at test time, so they need",
  skip: `set ${SKIP_ENV}=1 to skip them`,
  error: MlxFixturesError,
};

const say = (text: string) => sayAs(ENV, text);

function inputsKey(python: string): string {
  const files = [...INPUT_DIRS.flatMap((d) => readdirSync(d).filter((f) => INPUT_NAME.test(f)).map((f) => join(d, f))), ...INPUT_FILES].sort();
  return hash([readFileSync(SCRIPT), readFileSync(REQUIREMENTS), python, ...files.flatMap((f) => [short(f), readFileSync(f)])]);
}

async function generate(): Promise<string> {
  const python = await pythonVersion(ENV);
  const name = `fixtures-${inputsKey(python)}`;
  const dir = join(ROOT, name);
  if (existsSync(dir)) return dir;
  mkdirSync(ROOT, { recursive: true });
  return withLock(join(ROOT, ".lock"), async () => {
    if (existsSync(dir)) return dir;
    const bin = await venv(ENV, python);
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
    pruneSiblings(ROOT, "fixtures-", name);
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
