// `splash pull`'s machinery against a local stand-in for the hub (test/helpers/mock-hub.ts): the cache layout,
// reuse of what is there, resume after a cut connection or an interrupted run, checksum mismatch, 404s, gated
// repositories and tokens, the disk-space refusal, an unreachable hub.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoFolderName } from "../../src/models/hub/cache.ts";
import { HubClient, HubError, hubEndpoint, hubToken } from "../../src/models/hub/client.ts";
import { downloadFile } from "../../src/models/hub/download.ts";
import type { PullProgress } from "../../src/models/hub/progress.ts";
import { pullRepo } from "../../src/models/hub/pull.ts";
import { fixtureFiles, MockHub } from "../helpers/mock-hub.ts";
import { MLX_FIXTURES_TIMEOUT_MS, mlxFixtures, skipMlxFixtures } from "../helpers/mlx-fixtures.ts";
import { Model } from "../../src/native/model.ts";
import { compare, promptLogits } from "../helpers/parity.ts";
import { tensor } from "./mlx-lib.ts";
import { repoRoot } from "../helpers/cli.ts";

const fixtures = join(repoRoot, "test/fixtures/models");
const sharded = fixtureFiles(join(fixtures, "qwen35-dense-tiny-sharded"));
const drafter = fixtureFiles(join(fixtures, "qwen35-dense-tiny-dflash"));
const BIG = "model-00009-of-00009.safetensors"; // 264,504 bytes
const tmp = mkdtempSync(join(tmpdir(), "splash-pull-"));
let hub: MockHub;
let cache: string;

beforeAll(async () => {
  hub = await new MockHub({
    "org/tiny": { files: sharded },
    "org/draft": { files: drafter },
    "org/gated": { files: drafter, gated: true },
    "org/private": { files: drafter, private: true },
  }).start();
  hub.tokens.add("hf_good");
  hub.tokens.add("hf_accepted");
  hub.access.add("hf_accepted");
});
afterAll(async () => {
  await hub.stop();
  rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  cache = mkdtempSync(join(tmp, "hub-"));
  hub.log.length = 0;
  hub.faults.cutAfter!.clear();
  hub.faults.corrupt!.clear();
  hub.faults.bytesPerSecond = undefined;
});

const client = (token: string | null = null) => new HubClient({ endpoint: hub.url, token });
const pull = (repo = "org/tiny", extra: Partial<Parameters<typeof pullRepo>[0]> = {}) => pullRepo({ client: client(), repo, cacheRoot: cache, retryDelayMs: 5, ...extra });
const fileGets = () => hub.requests((r) => r.method === "GET" && (r.path.startsWith("/cdn/") || r.path.includes("/resolve/")));
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

async function failure(p: Promise<unknown>): Promise<HubError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof HubError) return e;
    throw e;
  }
  throw new Error("expected a HubError");
}

describe("pull", () => {
  // An mlx-lm 4-bit conversion (MoE, router and shared-expert gate at 8 bits), as mlx-community publishes them: made by
  // the real mlx-lm at test time (test/helpers/mlx-fixtures.ts).
  describe.skipIf(skipMlxFixtures)("an mlx-lm conversion", () => {
    let mlx: Record<string, Uint8Array> = {};
    beforeAll(async () => {
      mlx = fixtureFiles(join(await mlxFixtures(), "qwen35-moe-tiny-mlx-4bit"));
      hub.setRepo("mlx-community/tiny-4bit", { files: mlx });
    }, MLX_FIXTURES_TIMEOUT_MS);

    test("an MLX-format repository pulls into the hub layout and loads from the snapshot as it is", async () => {
      const r = await pull("mlx-community/tiny-4bit");
      expect(readdirSync(r.dir).sort()).toEqual(Object.keys(mlx).sort());
      const model = await Model.load(r.dir, { threads: 2, backend: "cpu" });
      try {
        const golden = join(r.dir, "golden.safetensors");
        const ids = tensor(golden, "input_ids");
        const a = compare([tensor(golden, "logits") as Float32Array], [promptLogits(model, ids)], model.info.vocabSize);
        expect(a.meanOverStd).toBeLessThan(0.25); // as test/integration/mlx.test.ts holds this fixture to
      } finally {
        model.free();
      }
    });
  });

  test("a sharded checkpoint lands in the hub layout: blobs by hash, relative snapshot links, refs/main", async () => {
    const events: string[] = [];
    const progress: PullProgress = { start: (n, b, p) => events.push(`start ${n} ${b} ${p}`), bytes: () => {}, fileDone: (f) => events.push(`done ${f}`), finish: () => events.push("finish") };
    const r = await pull("org/tiny", { progress });
    const repoDir = join(cache, repoFolderName("org/tiny"));
    expect(r.commit).toBe(hub.commitOf("org/tiny"));
    expect(r.dir).toBe(join(repoDir, "snapshots", r.commit));
    expect(readFileSync(join(repoDir, "refs", "main"), "utf8")).toBe(r.commit);
    expect(readdirSync(r.dir).sort()).toEqual(Object.keys(sharded).sort());
    for (const [name, data] of Object.entries(sharded)) {
      const link = join(r.dir, name);
      expect(lstatSync(link).isSymbolicLink()).toBe(true);
      const target = readlinkSync(link);
      expect(target.startsWith("../../blobs/")).toBe(true);
      const etag = target.slice("../../blobs/".length);
      expect(etag).toBe(name.endsWith(".safetensors") ? sha256(data) : createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex"));
      expect(Buffer.compare(readFileSync(link), Buffer.from(data))).toBe(0);
    }
    expect(readdirSync(join(repoDir, "blobs")).some((f) => f.endsWith(".incomplete"))).toBe(false);
    expect(events[0]).toBe(`start 12 ${Object.values(sharded).reduce((a, b) => a + b.length, 0)} 0`);
    expect(events.filter((e) => e.startsWith("done")).length).toBe(12);
    expect(events.at(-1)).toBe("finish");
  }, 30_000);

  test("what the cache holds is not downloaded again; a blob from another revision is linked", async () => {
    await pull();
    hub.log.length = 0;
    const again = await pull();
    expect(again).toMatchObject({ downloaded: 0, reused: 12, bytes: 0 });
    expect(fileGets()).toEqual([]);

    const changed = { ...sharded, "generation_config.json": new TextEncoder().encode('{"eos_token_id": 1}') };
    hub.setRepo("org/tiny", { files: changed, commit: "c".repeat(40) });
    hub.log.length = 0;
    const next = await pull();
    expect(next).toMatchObject({ commit: "c".repeat(40), downloaded: 1, reused: 11 });
    expect(fileGets().map((r) => r.path)).toEqual([`/org/tiny/resolve/${"c".repeat(40)}/generation_config.json`]);
    hub.setRepo("org/tiny", { files: sharded });
  }, 30_000);

  test("a connection cut mid-file is resumed with a Range request", async () => {
    hub.faults.cutAfter!.set(BIG, 100_000);
    const r = await pull();
    expect(Buffer.compare(readFileSync(join(r.dir, BIG)), Buffer.from(sharded[BIG]!))).toBe(0);
    // The Range header goes to the hub's resolve URL and on to the CDN it redirects to.
    const ranged = hub.requests((q) => q.range !== null);
    expect(ranged.map((q) => [q.path, q.range])).toEqual([
      [`/org/tiny/resolve/${hub.commitOf("org/tiny")}/${BIG}`, "bytes=100000-"],
      [`/cdn/${sha256(sharded[BIG]!)}`, "bytes=100000-"],
    ]);
  }, 30_000);

  test("an interrupted run leaves a partial that the next run resumes", async () => {
    hub.faults.bytesPerSecond = 400_000;
    const stop = new AbortController();
    const partial = join(cache, repoFolderName("org/tiny"), "blobs", `${sha256(sharded[BIG]!)}.incomplete`);
    const running = pull("org/tiny", { signal: stop.signal, concurrency: 1 });
    while (!existsSync(partial) || statSync(partial).size < 40_000) await Bun.sleep(10);
    stop.abort();
    expect((await failure(running)).kind).toBe("interrupted");
    const kept = statSync(partial).size;
    expect(kept).toBeGreaterThanOrEqual(40_000);
    expect(kept).toBeLessThan(sharded[BIG]!.length);
    expect(existsSync(join(cache, repoFolderName("org/tiny"), "refs", "main"))).toBe(false);

    hub.faults.bytesPerSecond = undefined;
    hub.log.length = 0;
    const r = await pull();
    expect(hub.requests((q) => q.range !== null && q.path.startsWith("/cdn/")).map((q) => q.range)).toEqual([`bytes=${kept}-`]);
    expect(Buffer.compare(readFileSync(join(r.dir, BIG)), Buffer.from(sharded[BIG]!))).toBe(0);
  }, 30_000);

  test("a checksum mismatch deletes the download, names the file and records no ref", async () => {
    hub.faults.corrupt!.add("model-00003-of-00009.safetensors");
    const e = await failure(pull());
    expect(e.kind).toBe("checksum");
    expect(e.message).toMatch(/^org\/tiny\/model-00003-of-00009\.safetensors: sha256 [0-9a-f]{64} does not match the hub's [0-9a-f]{64}; the corrupt download was deleted$/);
    const blobs = readdirSync(join(cache, repoFolderName("org/tiny"), "blobs"));
    expect(blobs).not.toContain(sha256(sharded["model-00003-of-00009.safetensors"]!));
    expect(blobs.some((b) => b.startsWith(sha256(sharded["model-00003-of-00009.safetensors"]!)))).toBe(false);
    expect(existsSync(join(cache, repoFolderName("org/tiny"), "refs", "main"))).toBe(false);
  }, 30_000);

  test("the disk-space check refuses before the first byte, against the total still to fetch", async () => {
    // Its own repository, so requests still in flight from an earlier test cannot be mistaken for its own.
    const e = await failure(pull("org/draft", { freeBytes: () => 1000 }));
    expect(e.kind).toBe("disk");
    expect(e.message).toBe(`org/draft needs 148.0 KiB more, but ${cache} has 1000 B free`);
    expect(e.hint).toMatch(/HF_HUB_CACHE/);
    expect(fileGets().filter((r) => r.path.startsWith("/org/draft/"))).toEqual([]);
    // Files already there do not count: with everything present no space is needed.
    await pull("org/draft");
    await pull("org/draft", { freeBytes: () => 0 });
  }, 30_000);
});

describe("errors", () => {
  test("an unknown repository: 401 without a token (as the hub answers), 404 with one", async () => {
    const e1 = await failure(pull("org/nope"));
    expect([e1.kind, e1.message]).toEqual(["not-found", `repository org/nope not found on ${hub.url} (401)`]);
    expect(e1.hint).toMatch(/if it is private, set HF_TOKEN/);
    const e2 = await failure(pullRepo({ client: client("hf_good"), repo: "org/nope", cacheRoot: cache }));
    expect(e2.message).toBe(`repository org/nope not found on ${hub.url} (404)`);
    expect((await failure(pull("org/private"))).kind).toBe("not-found");
  }, 30_000);

  test("a missing file and a missing revision are named", async () => {
    const c = client();
    const commit = hub.commitOf("org/tiny");
    const e = await failure(downloadFile(c, "org/tiny", commit, { path: "nope.safetensors", size: 10, etag: "0".repeat(64), hash: "sha256" }, join(cache, "x.incomplete")));
    expect([e.kind, e.message]).toEqual(["not-found", "org/tiny has no file nope.safetensors (404)"]);
    const r = await failure(pull("org/tiny", { revision: "v9" }));
    expect(r.message).toBe("org/tiny has no revision v9 (404)");
  }, 30_000);

  test("a gated repository: what to do without a token, with one that has no access, with a bad one", async () => {
    const none = await failure(pull("org/gated"));
    expect([none.kind, none.message]).toEqual(["gated", "org/gated is gated: the hub wants a token (401)"]);
    expect(none.hint).toBe(`accept the conditions at ${hub.url}/org/gated, then set HF_TOKEN to a token from https://huggingface.co/settings/tokens (or run \`hf auth login\`)`);
    const noAccess = await failure(pullRepo({ client: client("hf_good"), repo: "org/gated", cacheRoot: cache }));
    expect([noAccess.kind, noAccess.message]).toEqual(["gated", "org/gated is gated and your token has no access to it yet (403)"]);
    const bad = await failure(pullRepo({ client: client("hf_wrong"), repo: "org/gated", cacheRoot: cache }));
    expect([bad.kind, bad.message]).toEqual(["unauthorized", "the hub refused the token (401 invalid credentials)"]);
  }, 30_000);

  test("with access the token goes to the hub, never to the CDN", async () => {
    const r = await pullRepo({ client: client("hf_accepted"), repo: "org/gated", cacheRoot: cache });
    expect(r.downloaded).toBe(2);
    const cdn = hub.requests((q) => q.path.startsWith("/cdn/"));
    expect(cdn.length).toBe(1);
    expect(cdn.every((q) => q.authorization === null && q.host.startsWith("localhost:"))).toBe(true);
    expect(hub.requests((q) => q.host.startsWith("127.0.0.1:")).every((q) => q.authorization === "Bearer hf_accepted")).toBe(true);
  }, 30_000);

  test("a listing whose file names would leave the cache is refused before anything is written", async () => {
    for (const name of ["../../../escaped.json", "/etc/escaped.json", "sub/../../x.json", "a\\..\\b.json"]) {
      hub.setRepo("org/evil", { files: { "config.json": new TextEncoder().encode("{}"), [name]: new TextEncoder().encode("x") } });
      const e = await failure(pull("org/evil"));
      expect(e.kind).toBe("server");
      expect(e.message).toBe(`${hub.url} listed org/evil with a file named ${JSON.stringify(name)}, which cannot be a path in the cache: refusing the listing`);
      expect(fileGets()).toEqual([]);
      expect(existsSync(join(cache, repoFolderName("org/evil")))).toBe(false);
      expect(existsSync(join(cache, "escaped.json")) || existsSync(join(tmp, "escaped.json"))).toBe(false);
    }
  }, 30_000);

  test("an unreachable hub is reported as offline", async () => {
    const dead = new HubClient({ endpoint: "http://127.0.0.1:1", token: null });
    const e = await failure(pullRepo({ client: dead, repo: "org/tiny", cacheRoot: cache }));
    expect(e.kind).toBe("offline");
    expect(e.message).toMatch(/^cannot reach the hub at http:\/\/127\.0\.0\.1:1 \(/);
    expect(e.hint).toMatch(/models already downloaded work offline/);
  }, 30_000);
});

describe("environment", () => {
  const saved = { ...process.env };
  afterAll(() => {
    for (const k of ["HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HOME", "HF_TOKEN_PATH"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  }, 30_000);
  test("HF_ENDPOINT overrides the hub (trailing slash ignored)", async () => {
    process.env.HF_ENDPOINT = `${hub.url}/`;
    expect(hubEndpoint()).toBe(hub.url);
    const r = await pullRepo({ client: new HubClient({ token: null }), repo: "org/tiny", cacheRoot: cache });
    expect(r.downloaded).toBe(12);
    delete process.env.HF_ENDPOINT;
    expect(hubEndpoint()).toBe("https://huggingface.co");
  }, 30_000);
  test("HF_HUB_OFFLINE=1 refuses before any request", async () => {
    process.env.HF_HUB_OFFLINE = "1";
    try {
      const e = await failure(pull());
      expect([e.kind, e.message]).toEqual(["offline", "HF_HUB_OFFLINE is set, so the hub is not contacted"]);
      expect(hub.log).toEqual([]);
    } finally {
      delete process.env.HF_HUB_OFFLINE;
    }
  }, 30_000);
  test("HF_TOKEN, else the token file under HF_HOME (or HF_TOKEN_PATH)", () => {
    delete process.env.HF_TOKEN;
    delete process.env.HUGGING_FACE_HUB_TOKEN;
    delete process.env.HF_TOKEN_PATH;
    process.env.HF_HOME = mkdtempSync(join(tmp, "home-"));
    expect(hubToken()).toBeUndefined();
    writeFileSync(join(process.env.HF_HOME, "token"), "hf_file\n");
    expect(hubToken()).toBe("hf_file");
    mkdirSync(join(tmp, "elsewhere"), { recursive: true });
    writeFileSync(join(tmp, "elsewhere", "tok"), "hf_path");
    process.env.HF_TOKEN_PATH = join(tmp, "elsewhere", "tok");
    expect(hubToken()).toBe("hf_path");
    process.env.HF_TOKEN = "hf_env";
    expect(hubToken()).toBe("hf_env");
  }, 30_000);
});
