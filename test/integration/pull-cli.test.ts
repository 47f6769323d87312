// `splash pull`, `splash models` and `splash verify` as a user runs them, against the mock hub through HF_ENDPOINT,
// plus Ctrl-C during a pull, the download offer of serve/run (ensureModelFiles), and interoperability with Python's
// huggingface_hub in both directions (from the tests' pinned Python environment, test/helpers/python-env.ts, installed
// on first use).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoFolderName } from "../../src/models/hub/cache.ts";
import { HubClient } from "../../src/models/hub/client.ts";
import { findSpec } from "../../src/models/registry.ts";
import { ensureModelFiles } from "../../src/models/resolve.ts";
import type { HubModelSpec } from "../../src/models/spec.ts";
import { fixtureFiles, MockHub, specConfigJson } from "../helpers/mock-hub.ts";
import { repoRoot, splash } from "../helpers/cli.ts";
import { TEST_PYTHON_TIMEOUT_MS, testPython } from "../helpers/python-env.ts";

const fixtures = join(repoRoot, "test/fixtures/models");
const spec27 = findSpec("qwen3.8-27b") as HubModelSpec;
const tmp = mkdtempSync(join(tmpdir(), "splash-pull-cli-"));
const any = fixtureFiles(join(fixtures, "qwen35-dense-tiny"));
let hub: MockHub;

function env(cache: string, extra: Record<string, string> = {}): Record<string, string> {
  return { HF_ENDPOINT: hub.url, HF_HUB_CACHE: cache, HF_HOME: join(tmp, "hf-home"), HF_TOKEN: "", SPLASH_LOG: "info", ...extra };
}

beforeAll(async () => {
  hub = await new MockHub({
    "Qwen/Qwen3.8-27B": { files: fixtureFiles(join(fixtures, "qwen35-dense-tiny-sharded"), { "config.json": specConfigJson(spec27), "tokenizer.json": "{}" }) },
    "z-lab/Qwen3.8-27B-DFlash2": { files: fixtureFiles(join(fixtures, "qwen35-dense-tiny-dflash2")), gated: true },
    "Qwen/Qwen3.6-35B-A3B": { files: fixtureFiles(join(fixtures, "qwen35-moe-tiny"), { "tokenizer.json": "{}" }) },
    "org/any": { files: any },
  }).start();
  hub.tokens.add("hf_ok");
  hub.access.add("hf_ok");
});
afterAll(async () => {
  await hub.stop();
  rmSync(tmp, { recursive: true, force: true });
});

describe("splash pull / models / verify", () => {
  const cache = join(tmp, "main-cache");

  test("pull a supported model: progress lines off a terminal, then where it is and how to serve it", async () => {
    const r = await splash(["pull", "qwen3.8-27b"], { env: env(cache) });
    expect(r.stderr).toContain("Qwen3.8-27B bf16 (Qwen/Qwen3.8-27B): 13 files, 1.2 MiB");
    expect(r.stderr).toContain("model-00009-of-00009.safetensors done (");
    expect(r.stderr).toContain("13 files (1.2 MiB) downloaded, 0 already here");
    expect(r.stdout).toBe("ready: splash serve qwen3.8-27b\n");
    expect(r.code).toBe(0);
    const again = await splash(["pull", "Qwen/Qwen3.8-27B"], { env: env(cache) });
    expect(again.stderr).toContain("all 13 files were already here");
  }, 30_000);

  test("models shows what is installed and where", async () => {
    const r = await splash(["models", "--json"], { env: env(cache) });
    expect(r.code).toBe(0);
    const list = JSON.parse(r.stdout) as { id: string; files: { format: string; installed: { dir: string; complete: boolean } | null }[] }[];
    const m = list.find((x) => x.id === "qwen3.8-27b")!;
    const bf16 = m.files.find((f) => f.format === "bf16")!;
    expect(bf16.installed).toMatchObject({ complete: true, dir: join(cache, repoFolderName("Qwen/Qwen3.8-27B"), "snapshots", hub.commitOf("Qwen/Qwen3.8-27B")) });
    expect(m.files.find((f) => f.format === "mlx-4bit")!.installed).toBeNull();
    const text = await splash(["models"], { env: env(cache) });
    expect(text.stdout).toMatch(/qwen3\.8-27b\s+bf16\s+Qwen\/Qwen3\.8-27B\s+51\.7 GiB\s+1\.2 MiB in .*models--Qwen--Qwen3\.8-27B\/snapshots\//);
  }, 30_000);

  test("verify hashes every file; a damaged blob fails with what to do", async () => {
    const ok = await splash(["verify", "qwen3.8-27b"], { env: env(cache) });
    expect(ok.stdout).toContain("13 files match their checksums");
    expect(ok.code).toBe(0);
    const blobs = join(cache, repoFolderName("Qwen/Qwen3.8-27B"), "blobs");
    const victim = readdirSync(blobs).map((b) => join(blobs, b)).find((p) => statSync(p).size === 145440)!; // shard 2
    const data = readFileSync(victim);
    data[data.length - 1]! ^= 1;
    writeFileSync(victim, data);
    const bad = await splash(["verify", "qwen3.8-27b"], { env: env(cache) });
    expect(bad.code).toBe(1);
    expect(bad.stdout).toMatch(/MISMATCH model-00002-of-00009\.safetensors/);
    expect(bad.stderr).toContain("1 file(s) of qwen3.8-27b do not match the hub's checksums: model-00002-of-00009.safetensors");
    expect(bad.stderr).toContain(`rm ${victim}`);
    // After removing the damaged blob, pull fetches just that file again.
    rmSync(victim);
    const fix = await splash(["pull", "qwen3.8-27b"], { env: env(cache) });
    expect(fix.stderr).toContain("1 files (142.0 KiB) downloaded, 12 already here");
  }, 30_000);

  test("--drafter pulls the gated DFlash2 drafter: what to do without a token, done with one; models lists it", async () => {
    const denied = await splash(["pull", "qwen3.8-27b", "--drafter"], { env: env(cache) });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("z-lab/Qwen3.8-27B-DFlash2 is gated: the hub wants a token (401)");
    expect(denied.stderr).toContain(`accept the conditions at ${hub.url}/z-lab/Qwen3.8-27B-DFlash2, then set HF_TOKEN`);
    const ok = await splash(["pull", "qwen3.8-27b", "--drafter"], { env: env(cache, { HF_TOKEN: "hf_ok" }) });
    expect(ok.code).toBe(0);
    expect(ok.stderr).toContain("Qwen3.8-27B DFlash2 drafter (z-lab/Qwen3.8-27B-DFlash2)");
    const models = JSON.parse((await splash(["models", "--json"], { env: env(cache) })).stdout) as { id: string; files: { format: string; installed: { complete: boolean } | null }[] }[];
    const row = models.find((m) => m.id === "qwen3.8-27b")!.files.find((f) => f.format === "dflash2");
    expect(row?.installed?.complete).toBe(true);
  }, 30_000);

  test("a repository whose config is not the supported model is refused, naming the key", async () => {
    const r = await splash(["pull", "qwen3.6-35b-a3b"], { env: env(cache) });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("Qwen/Qwen3.6-35B-A3B is not the Qwen3.6-35B-A3B Splash knows: text_config.vocab_size: expected 248320, found 512; text_config.hidden_size: expected 2048, found 64");
  }, 30_000);

  test("any hub repository by org/name", async () => {
    const r = await splash(["pull", "org/any"], { env: env(cache) });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`ready: splash serve ${join(cache, "models--org--any", "snapshots", hub.commitOf("org/any"))}\n`);
  }, 30_000);

  test("bad arguments", async () => {
    const f = await splash(["pull", "qwen3.8-27b", "--format", "fp8"], { env: env(cache) });
    expect([f.code, f.stderr]).toEqual([2, expect.stringContaining('--format "fp8": expected one of bf16, mlx-4bit, mlx-8bit')]);
    const n = await splash(["pull", "nosuch"], { env: env(cache) });
    expect([n.code, n.stderr]).toEqual([1, expect.stringContaining("no supported model named nosuch")]);
    const d = await splash(["pull", "org/any", "--drafter"], { env: env(cache) });
    expect([d.code, d.stderr]).toEqual([2, expect.stringContaining("--format and --drafter apply to supported models only")]);
    const off = await splash(["pull", "org/any"], { env: env(join(tmp, "off-cache"), { HF_ENDPOINT: "http://127.0.0.1:1" }) });
    expect([off.code, off.stderr]).toEqual([1, expect.stringContaining("cannot reach the hub at http://127.0.0.1:1")]);
  }, 30_000);
});

describe("Ctrl-C", () => {
  test("stops the pull, keeps the partial, and the next run resumes it", async () => {
    const cache = join(tmp, "sigint-cache");
    hub.faults.bytesPerSecond = 200_000;
    const proc = Bun.spawn([process.execPath, join(repoRoot, "src/main.ts"), "pull", "org/any"], { env: { ...process.env, ...env(cache) }, stdout: "pipe", stderr: "pipe" });
    const blobs = join(cache, "models--org--any", "blobs");
    const partial = () => (existsSync(blobs) ? readdirSync(blobs).filter((b) => b.endsWith(".incomplete")).map((b) => join(blobs, b)) : []);
    const deadline = Date.now() + 20_000;
    while (!partial().some((p) => statSync(p).size >= 50_000) && Date.now() < deadline) await Bun.sleep(20);
    proc.kill("SIGINT");
    const [code, stderr] = await Promise.all([proc.exited, new Response(proc.stderr).text()]);
    hub.faults.bytesPerSecond = undefined;
    expect(code).toBe(130);
    expect(stderr).toContain("interrupted: the partial download is kept");
    expect(stderr).toContain("run `splash pull org/any` again to resume it");
    const [kept] = partial();
    expect(kept).toBeDefined();
    const size = statSync(kept!).size;
    expect(size).toBeGreaterThanOrEqual(50_000);
    hub.log.length = 0;
    const again = await splash(["pull", "org/any"], { env: env(cache) });
    expect(again.code).toBe(0);
    expect(hub.requests((q) => q.path.startsWith("/cdn/")).map((q) => q.range)).toEqual([`bytes=${size}-`]);
  }, 30_000);
});

describe("serve/run's download offer", () => {
  test("on a terminal, yes pulls the model and resolves it", async () => {
    const saved = process.env.HF_HUB_CACHE;
    process.env.HF_HUB_CACHE = join(tmp, "offer-cache");
    try {
      const questions: string[] = [];
      const r = await ensureModelFiles("qwen3.8-27b", { interactive: true, ask: (q) => (questions.push(q), true), client: new HubClient({ endpoint: hub.url, token: null }), quiet: true });
      expect(questions).toHaveLength(1);
      expect(r).toMatchObject({ kind: "hub", id: "qwen3.8-27b", format: "bf16", commit: hub.commitOf("Qwen/Qwen3.8-27B") });
    } finally {
      if (saved === undefined) delete process.env.HF_HUB_CACHE;
      else process.env.HF_HUB_CACHE = saved;
    }
  }, 30_000);
});

let python: string;

async function py(code: string, pyEnv: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  // Asynchronous: the mock hub lives in this process and must keep answering while Python runs.
  const p = Bun.spawn([python, "-c", code], { env: { ...process.env, ...pyEnv }, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, exit] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code: exit, stdout, stderr };
}

describe("interop with Python huggingface_hub (scripts/fixtures/test-requirements.txt)", () => {
  beforeAll(async () => {
    python = await testPython();
  }, TEST_PYTHON_TIMEOUT_MS);

  test("a snapshot splash wrote is what huggingface_hub finds offline", async () => {
    const cache = join(tmp, "interop-ours");
    expect((await splash(["pull", "org/any"], { env: env(cache) })).code).toBe(0);
    const snap = join(cache, "models--org--any", "snapshots", hub.commitOf("org/any"));
    const r = await py(
      [
        "from huggingface_hub import snapshot_download, try_to_load_from_cache",
        `print(snapshot_download("org/any", cache_dir=${JSON.stringify(cache)}, local_files_only=True))`,
        `print(try_to_load_from_cache("org/any", "model.safetensors", cache_dir=${JSON.stringify(cache)}))`,
      ].join("\n"),
      { HF_HUB_OFFLINE: "1" },
    );
    expect(r.stderr).toBe("");
    expect(r.stdout).toBe(`${snap}\n${join(snap, "model.safetensors")}\n`);
  }, 30_000);

  test("files huggingface_hub downloaded are found by splash pull and not fetched again", async () => {
    const cache = join(tmp, "interop-theirs");
    const r = await py(`from huggingface_hub import snapshot_download\nprint(snapshot_download("org/any", cache_dir=${JSON.stringify(cache)}))`, {
      HF_ENDPOINT: hub.url,
      HF_HUB_DISABLE_XET: "1",
      HF_HUB_DISABLE_TELEMETRY: "1",
    });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(join(cache, "models--org--any", "snapshots", hub.commitOf("org/any")));
    hub.log.length = 0;
    const ours = await splash(["pull", "org/any"], { env: env(cache) });
    expect(ours.code).toBe(0);
    expect(ours.stderr).toContain(`all ${Object.keys(any).length} files were already here`);
    expect(hub.requests((q) => q.path.startsWith("/cdn/") || q.path.includes("/resolve/"))).toEqual([]);
  }, 30_000);
});
