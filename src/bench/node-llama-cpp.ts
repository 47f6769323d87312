// node-llama-cpp (llama.cpp as a Node addon), the peer engine of the GGUF parity tests and `splash bench peers`,
// installed on demand instead of being a dependency: as a devDependency every `npm ci` (the README's serve command
// too) installed all fourteen of its prebuilt builds, ≈680 MB (CUDA 181 MB and its fallback 357 MB, Vulkan 81 MB,
// ARM, …), for a benchmark most users never run. Here the first use installs node-llama-cpp, its JavaScript
// dependencies and the one prebuilt build asked for (its CPU build unless a GPU is named) from the npm registry into
// build/node-llama-cpp-<version>/<build>/, and later uses find it there.
//
// Only that build: `--omit=optional` leaves out all of node-llama-cpp's optional platform packages and the build is
// named explicitly, so it is a plain dependency of the install. `--ignore-scripts` skips node-llama-cpp's postinstall,
// which tries the best build for this machine and may start compiling llama.cpp from source; the peer only ever
// loads a prebuilt build (getLlama's `build: "never"`).
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { withLock } from "../launch/lock.ts";
import { log } from "../log.ts";

export const NODE_LLAMA_CPP_VERSION = "3.21.1";
export type LlamaGpu = false | "vulkan" | "cuda";

// For a first install on a slow link, and for a second process waiting on the lock meanwhile.
export const NODE_LLAMA_CPP_INSTALL_TIMEOUT_MS = 10 * 60_000;

const root = join(import.meta.dir, "../..");
const versionDir = join(root, "build", `node-llama-cpp-${NODE_LLAMA_CPP_VERSION}`);

// The package of node-llama-cpp's prebuilt build for a platform and GPU, as its loader picks them
// (getPrebuiltBinariesPackageDirectoryForBuildOptions in dist/bindings/utils/compileLLamaCpp.js), for the platforms
// Splash runs on. CUDA's "-ext" companion (357 MB, a fallback the loader uses only when it is installed) is left out.
// macOS on Apple silicon has a Metal build only.
const PREBUILT: Record<string, Partial<Record<"cpu" | "vulkan" | "cuda", string>>> = {
  "linux-x64": { cpu: "linux-x64", vulkan: "linux-x64-vulkan", cuda: "linux-x64-cuda" },
  "linux-arm64": { cpu: "linux-arm64" },
  "darwin-x64": { cpu: "mac-x64" },
};

export class NodeLlamaCppInstallError extends Error {
  override name = "NodeLlamaCppInstallError";
}

export function prebuiltBuild(gpu: LlamaGpu, platform: string = process.platform, arch: string = process.arch): string {
  const build = PREBUILT[`${platform}-${arch}`]?.[gpu || "cpu"];
  if (!build) throw new NodeLlamaCppInstallError(`node-llama-cpp ${NODE_LLAMA_CPP_VERSION} has no prebuilt ${gpu || "CPU"} build of llama.cpp for ${platform}-${arch}`);
  return build;
}

type Run = { code: number; stdout: string; output: string };

async function npm(args: string[], onLine?: (line: string) => void): Promise<Run> {
  let p;
  try {
    p = Bun.spawn(["npm", ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  } catch (e) {
    throw new NodeLlamaCppInstallError(`npm could not be run (${e instanceof Error ? e.message : String(e)}): node-llama-cpp is installed with npm, which comes with Node ≥ 20`);
  }
  let stdout = "";
  let output = "";
  const read = async (stream: ReadableStream<Uint8Array>, isStdout: boolean) => {
    const decoder = new TextDecoder();
    let pending = "";
    for await (const bytes of stream) {
      const chunk = decoder.decode(bytes, { stream: true });
      if (isStdout) stdout += chunk;
      output += chunk;
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const l of lines) onLine?.(l);
    }
  };
  const [code] = await Promise.all([p.exited, read(p.stdout, true), read(p.stderr, false)]);
  return { code, stdout, output };
}

function diskBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) n += statSync(join(e.parentPath, e.name)).size;
  return n;
}

// One metadata request with a short timeout and no retries, so an unreachable registry fails in seconds with a
// message saying what is needed, rather than after npm's minutes of retries.
async function checkRegistry(): Promise<void> {
  const registry = (await npm(["config", "get", "registry"])).stdout.trim();
  const r = await npm(["view", `node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`, "version", "--json", "--fetch-retries=0", "--fetch-timeout=20000"]);
  let answer: unknown;
  try {
    answer = JSON.parse(r.stdout);
  } catch {
    answer = undefined;
  }
  if (r.code === 0 && answer === NODE_LLAMA_CPP_VERSION) return;
  const error = (answer as { error?: { summary?: string } } | undefined)?.error?.summary ?? (r.output.trim().split("\n").at(-1) || `npm exit ${r.code}`);
  throw new NodeLlamaCppInstallError(
    `node-llama-cpp ${NODE_LLAMA_CPP_VERSION} could not be fetched from the npm registry (${registry}): ${error}\n` +
      `llama.cpp, the peer of the GGUF parity tests and \`splash bench peers\`, comes from node-llama-cpp, installed on first use ` +
      `into ${versionDir}. Connect this machine to the registry (or point npm at a mirror: npm config set registry URL; HTTPS_PROXY for a proxy) and run again.`,
  );
}

async function install(dir: string, build: string): Promise<void> {
  const start = performance.now();
  const seconds = () => `${((performance.now() - start) / 1000).toFixed(0)} s`;
  log.info(`node-llama-cpp ${NODE_LLAMA_CPP_VERSION}: installing it with its prebuilt llama.cpp build @node-llama-cpp/${build} from the npm registry into ${dir} (≈85 MB on disk, once per version and build)`);
  await checkRegistry();
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  // The install's own root, so that npm does not take the repository's package.json for it.
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ private: true, description: "node-llama-cpp for Splash's peer benchmarks (src/bench/node-llama-cpp.ts)" })}\n`);
  let fetched = 0;
  let told = performance.now();
  const r = await npm(
    ["install", "--prefix", dir, "--no-save", "--no-audit", "--no-fund", "--omit=optional", "--ignore-scripts", "--loglevel=http", `node-llama-cpp@${NODE_LLAMA_CPP_VERSION}`, `@node-llama-cpp/${build}@${NODE_LLAMA_CPP_VERSION}`],
    (line) => {
      if (!/^npm http fetch /.test(line)) return;
      fetched++;
      if (performance.now() - told < 5000) return;
      told = performance.now();
      log.info(`node-llama-cpp: ${fetched} registry requests so far, ${seconds()}`);
    },
  );
  if (r.code !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new NodeLlamaCppInstallError(`npm install of node-llama-cpp ${NODE_LLAMA_CPP_VERSION} and @node-llama-cpp/${build} into ${dir} failed (exit ${r.code}):\n${r.output.trim().slice(-3000)}`);
  }
  log.info(`node-llama-cpp: installed in ${seconds()} (${(diskBytes(dir) / 1e6).toFixed(0)} MB in ${dir})`);
}

// The directory holding node_modules/node-llama-cpp and the build for `gpu`, installing them first if needed.
export async function installNodeLlamaCpp(gpu: LlamaGpu = false): Promise<string> {
  const build = prebuiltBuild(gpu);
  const dir = join(versionDir, build);
  const marker = join(dir, ".installed");
  if (existsSync(marker)) return dir;
  await withLock(
    `${dir}.lock`,
    async () => {
      if (existsSync(marker)) return;
      await install(dir, build);
      writeFileSync(marker, `${new Date().toISOString()}\n`);
      // earlier versions' installs
      for (const name of readdirSync(join(root, "build"))) {
        if (name.startsWith("node-llama-cpp-") && join(root, "build", name) !== versionDir) rmSync(join(root, "build", name), { recursive: true, force: true });
      }
    },
    { timeoutMs: NODE_LLAMA_CPP_INSTALL_TIMEOUT_MS, onWait: (pid) => log.info(`node-llama-cpp: waiting for pid ${pid ?? "?"}, which is installing it into ${dir}`) },
  );
  return dir;
}
