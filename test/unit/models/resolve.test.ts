// Resolution of MODEL against a hub cache laid out by hand in a temporary directory (as huggingface_hub lays it
// out), the fast weight-file check, and the full checksum over blob names.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { CliError } from "../../../src/cli/_command.ts";
import { checkWeightFiles, CheckpointFilesError, verifyChecksums } from "../../../src/models/files.ts";
import { repoFolderName } from "../../../src/models/hub/cache.ts";
import { findSpec } from "../../../src/models/registry.ts";
import { ensureModelFiles, ModelNotDownloaded, resolveModel } from "../../../src/models/resolve.ts";
import type { HubModelSpec } from "../../../src/models/spec.ts";
import { fixtureFiles, specConfigJson } from "../../helpers/mock-hub.ts";
import { repoRoot, splash } from "../../helpers/cli.ts";

const spec27 = findSpec("qwen3.8-27b") as HubModelSpec;
const fixtures = join(repoRoot, "test/fixtures/models");
const tmp = mkdtempSync(join(tmpdir(), "splash-resolve-"));
const savedCache = process.env.HF_HUB_CACHE;
let cache = "";

// Writes files into the cache as huggingface_hub would: blobs named by sha256 (safetensors) or git blob sha1,
// snapshot symlinks, refs/main.
function installSnapshot(repo: string, files: Record<string, Uint8Array>, commit = "a".repeat(40)): string {
  const dir = join(cache, repoFolderName(repo));
  const snap = join(dir, "snapshots", commit);
  mkdirSync(join(dir, "blobs"), { recursive: true });
  mkdirSync(join(dir, "refs"), { recursive: true });
  for (const [path, data] of Object.entries(files)) {
    const etag = path.endsWith(".safetensors")
      ? createHash("sha256").update(data).digest("hex")
      : createHash("sha1").update(`blob ${data.length}\0`).update(data).digest("hex");
    writeFileSync(join(dir, "blobs", etag), data);
    mkdirSync(join(snap, path, ".."), { recursive: true });
    symlinkSync(relative(join(snap, path, ".."), join(dir, "blobs", etag)), join(snap, path));
  }
  writeFileSync(join(dir, "refs", "main"), commit);
  return snap;
}

function tiny27Files(): Record<string, Uint8Array> {
  return fixtureFiles(join(fixtures, "qwen35-dense-tiny-sharded"), { "config.json": specConfigJson(spec27), "tokenizer.json": "{}" });
}

beforeEach(() => {
  cache = mkdtempSync(join(tmp, "hub-"));
  process.env.HF_HUB_CACHE = cache;
});
afterAll(() => {
  if (savedCache === undefined) delete process.env.HF_HUB_CACHE;
  else process.env.HF_HUB_CACHE = savedCache;
  rmSync(tmp, { recursive: true, force: true });
});

describe("a supported model id", () => {
  test("not downloaded: an error whose hint is the exact pull command", () => {
    expect(() => resolveModel("qwen3.8-27b")).toThrow(ModelNotDownloaded);
    try {
      resolveModel("qwen3.8-27b");
    } catch (e) {
      expect((e as CliError).message).toMatch(/^Qwen3\.8-27B is not downloaded \(51\.7 GiB in bf16 from Qwen\/Qwen3\.8-27B\)$/);
      expect((e as CliError).hint).toBe("run `splash pull qwen3.8-27b` to download it");
    }
  });

  test("ensureModelFiles off a terminal does not ask and throws the pull command", async () => {
    let asked = false;
    const r = ensureModelFiles("qwen3.8-27b", { interactive: false, ask: () => (asked = true) });
    await expect(r).rejects.toThrow(ModelNotDownloaded);
    expect(asked).toBe(false);
  });

  test("ensureModelFiles on a terminal asks; no means the same error", async () => {
    let question = "";
    await expect(ensureModelFiles("qwen3.8-27b", { interactive: true, ask: (q) => ((question = q), false) })).rejects.toThrow(ModelNotDownloaded);
    expect(question).toMatch(/Qwen3\.8-27B is not downloaded .*Download it now\?/);
  });

  test("found in the hub cache (written by another tool), by id and by alias", () => {
    const snap = installSnapshot("Qwen/Qwen3.8-27B", tiny27Files());
    for (const name of ["qwen3.8-27b", "Qwen/Qwen3.8-27B"]) {
      const r = resolveModel(name);
      expect(r.kind).toBe("hub");
      if (r.kind !== "hub") return;
      expect(r).toMatchObject({ id: "qwen3.8-27b", format: "bf16", repo: "Qwen/Qwen3.8-27B", commit: "a".repeat(40), dir: snap });
    }
  });

  test("an MLX download is found and loaded when it is the only format there; --format picks among several", () => {
    const cfg = { ...specConfigJson(spec27), quantization: { group_size: 64, bits: 4 } };
    installSnapshot("mlx-community/Qwen3.8-27B-4bit", fixtureFiles(join(fixtures, "qwen35-dense-tiny"), { "config.json": cfg, "tokenizer.json": "{}" }));
    expect(resolveModel("qwen3.8-27b", { format: "mlx-4bit" })).toMatchObject({ kind: "hub", format: "mlx-4bit", repo: "mlx-community/Qwen3.8-27B-4bit" });
    expect(() => resolveModel("qwen3.8-27b", { format: "bf16" })).toThrow(/Qwen3\.8-27B bf16 is not downloaded/);
    expect(resolveModel("qwen3.8-27b", { anyFormat: true })).toMatchObject({ format: "mlx-4bit" });
    expect(resolveModel("qwen3.8-27b")).toMatchObject({ kind: "hub", format: "mlx-4bit" });
  });

  test("a partial snapshot is not installed; asking for that format says what is missing", () => {
    const files = tiny27Files();
    delete files["model-00004-of-00009.safetensors"];
    installSnapshot("Qwen/Qwen3.8-27B", files);
    expect(() => resolveModel("qwen3.8-27b")).toThrow(ModelNotDownloaded);
    expect(() => resolveModel("qwen3.8-27b", { format: "bf16" })).toThrow(/only partly downloaded: .*model-00004-of-00009\.safetensors is missing \(the weight_map entry for tensor [\w.]+ names it\)/);
  });

  test("files that do not match the spec are refused, naming the key", () => {
    const cfg = specConfigJson(spec27) as { text_config: Record<string, unknown> };
    cfg.text_config.num_hidden_layers = 48;
    installSnapshot("Qwen/Qwen3.8-27B", fixtureFiles(join(fixtures, "qwen35-dense-tiny-sharded"), { "config.json": cfg, "tokenizer.json": "{}" }));
    expect(() => resolveModel("qwen3.8-27b")).toThrow(/does not match Qwen3\.8-27B: text_config\.num_hidden_layers: expected 64, found 48/);
  });
});

describe("a directory", () => {
  test("any family checkpoint runs generically", () => {
    const r = resolveModel(join(fixtures, "qwen35-moe-tiny"));
    expect(r).toMatchObject({ kind: "local", id: "qwen35-moe-tiny", spec: undefined, format: "bf16" });
  });
  test("a checkpoint whose config matches a spec is that model", () => {
    const dir = mkdtempSync(join(tmp, "dir-"));
    cpSync(join(fixtures, "qwen35-dense-tiny"), dir, { recursive: true });
    writeFileSync(join(dir, "config.json"), JSON.stringify(specConfigJson(spec27)));
    expect(resolveModel(dir)).toMatchObject({ kind: "local", id: "qwen3.8-27b", format: "bf16" });
  });
  test("a directory of another family is refused by model type", () => {
    const dir = mkdtempSync(join(tmp, "dir-"));
    writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "llama" }));
    expect(() => resolveModel(dir)).toThrow(/"llama" is not a Qwen3\.5-family checkpoint/);
  });
  test("an unknown name lists the supported models", () => {
    expect(() => resolveModel("llama-3")).toThrow(/no model or directory named llama-3/);
    try {
      resolveModel("llama-3");
    } catch (e) {
      expect((e as CliError).hint).toMatch(/qwen3\.8-27b, qwen3\.6-35b-a3b/);
    }
  });
  test("omitted: the embedded default model, whose files sit beside its spec", () => {
    const r = resolveModel();
    expect(r).toMatchObject({ kind: "embedded", id: "splash-tiny", dir: join(repoRoot, "models", "splash-tiny") });
    expect(checkWeightFiles(r.dir).tensors).toBeGreaterThan(0);
  });
});

describe("fast check of the weight files", () => {
  const copy = (name: string) => {
    const dir = mkdtempSync(join(tmp, "ck-"));
    cpSync(join(fixtures, name), dir, { recursive: true });
    return dir;
  };
  test("a good sharded checkpoint: every shard and tensor", () => {
    expect(checkWeightFiles(join(fixtures, "qwen35-dense-tiny-sharded"))).toMatchObject({ files: expect.any(Array), tensors: 145 });
  });
  test("a truncated shard", () => {
    const dir = copy("qwen35-dense-tiny-sharded");
    truncateSync(join(dir, "model-00003-of-00009.safetensors"), 100_000);
    expect(() => checkWeightFiles(dir)).toThrow(/tensor [\w.]+ in \S+\/model-00003-of-00009\.safetensors: data_offsets \[\d+, \d+\] run past the end of the data \(97696 bytes\): the file is truncated/);
  });
  test("a missing shard names a tensor the index puts there", () => {
    const dir = copy("qwen35-dense-tiny-sharded");
    rmSync(join(dir, "model-00009-of-00009.safetensors"));
    expect(() => checkWeightFiles(dir)).toThrow(/model-00009-of-00009\.safetensors is missing \(the weight_map entry for tensor [\w.]+ names it\)/);
  });
  test("an index that puts a tensor in the wrong shard", () => {
    const dir = copy("qwen35-dense-tiny-sharded");
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"));
    index.weight_map["lm_head.weight"] = "model-00001-of-00009.safetensors";
    writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify(index));
    expect(() => checkWeightFiles(dir)).toThrow(/tensor lm_head\.weight: \S+ lists it in \S+\/model-00001-of-00009\.safetensors, but it is in \S+\/model-00009-of-00009\.safetensors/);
  });
  test("a header that is not JSON", () => {
    const dir = copy("qwen35-dense-tiny");
    const path = join(dir, "model.safetensors");
    const data = readFileSync(path);
    data[8] = 0x58; // the header's opening '{' becomes 'X'
    writeFileSync(path, data);
    expect(() => checkWeightFiles(dir)).toThrow(CheckpointFilesError);
    expect(() => checkWeightFiles(dir)).toThrow(/model\.safetensors: the header is not a JSON object/);
  });
});

describe("a checkpoint never names a file outside its directory", () => {
  const sharded = () => {
    const dir = mkdtempSync(join(tmp, "ck-"));
    cpSync(join(fixtures, "qwen35-dense-tiny-sharded"), dir, { recursive: true });
    return dir;
  };
  const setEntry = (dir: string, tensor: string, file: string) => {
    const index = JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8"));
    index.weight_map[tensor] = file;
    writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify(index));
  };
  test("a weight_map entry ../../../etc/passwd is refused naming the entry, for the fast check and at serve", async () => {
    const dir = sharded();
    setEntry(dir, "lm_head.weight", "../../../etc/passwd");
    expect(() => checkWeightFiles(dir)).toThrow(CheckpointFilesError);
    expect(() => checkWeightFiles(dir)).toThrow('the weight_map entry for tensor lm_head.weight names "../../../etc/passwd", not a plain file name in the directory');
    const r = await splash(["run", dir, "hi"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the weight_map entry for tensor lm_head.weight names "../../../etc/passwd"');
  });
  test("an absolute path in the index is refused the same way", () => {
    const dir = sharded();
    setEntry(dir, "lm_head.weight", "/etc/passwd");
    expect(() => checkWeightFiles(dir)).toThrow('the weight_map entry for tensor lm_head.weight names "/etc/passwd"');
  });
  test("a shard that is a link to a file outside the directory is refused, after symlinks", async () => {
    const dir = sharded();
    const elsewhere = mkdtempSync(join(tmp, "elsewhere-"));
    const shard = "model-00009-of-00009.safetensors";
    cpSync(join(dir, shard), join(elsewhere, shard));
    rmSync(join(dir, shard));
    symlinkSync(join(elsewhere, shard), join(dir, shard));
    expect(() => checkWeightFiles(dir)).toThrow(new RegExp(`${shard} is a link to ${elsewhere}/${shard}, outside the checkpoint directory \\(the weight_map entry for tensor [\\w.]+ names it\\)`));
    const r = await splash(["run", dir, "hi"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("outside the checkpoint directory");
  });
  test("links inside the directory, and a hub snapshot's links into its blobs/, are followed", () => {
    const dir = sharded();
    const shard = "model-00009-of-00009.safetensors";
    cpSync(join(dir, shard), join(dir, "real.bin"));
    rmSync(join(dir, shard));
    symlinkSync("real.bin", join(dir, shard));
    expect(checkWeightFiles(dir).tensors).toBe(145);
    expect(checkWeightFiles(installSnapshot("Qwen/Qwen3.8-27B", tiny27Files())).tensors).toBe(145);
  });
});

describe("full checksum", () => {
  test("every file of a cache snapshot is hashed against its blob name; a flipped byte is found", () => {
    const snap = installSnapshot("Qwen/Qwen3.8-27B", tiny27Files());
    const ok = verifyChecksums(snap);
    expect(ok.length).toBe(13);
    expect(ok.every((c) => c.status === "ok")).toBe(true);
    expect(new Set(ok.map((c) => c.algorithm))).toEqual(new Set(["sha256", "git-sha1"]));
    const victim = ok.find((c) => c.path === "model-00002-of-00009.safetensors")!;
    const data = readFileSync(victim.blob!);
    data[data.length - 1]! ^= 1;
    writeFileSync(victim.blob!, data);
    const bad = verifyChecksums(snap).filter((c) => c.status === "mismatch");
    expect(bad.map((c) => c.path)).toEqual(["model-00002-of-00009.safetensors"]);
  });
  test("a plain directory has no recorded hashes", () => {
    expect(verifyChecksums(join(fixtures, "qwen35-dense-tiny-dflash")).every((c) => c.status === "unchecked")).toBe(true);
  });
});
