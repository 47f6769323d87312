// `splash logits` (the foundation issue's contract): float32 little-endian [T, vocab] for every position, for a
// checkpoint directory, all at once or in chunks; wrong input is a one-line error with exit code 1 or 2.
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splash } from "../helpers/cli.ts";

const FIXTURE = join(import.meta.dir, "../fixtures/models/qwen35-moe-tiny");
type Prompt = { tokens: number[]; std_logits: number; logits: { file: string } };
const prompt = (JSON.parse(readFileSync(join(FIXTURE, "golden/manifest.json"), "utf8")) as { prompts: Prompt[] }).prompts[2]!;

function f32(path: string): Float32Array {
  const b = readFileSync(path);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

test.each([[[]], [["--chunk", "1"]], [["--chunk", "7"]], [["--backend", "cpu"]], [["--backend", "vulkan", "--chunk", "7"]]])("splash logits %p writes [T, vocab] float32 matching the golden", async (extra) => {
  const out = join(mkdtempSync(join(tmpdir(), "splash-logits-")), "logits.f32");
  const r = await splash(["logits", FIXTURE, "--tokens", prompt.tokens.join(","), "--out", out, ...extra]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  const got = f32(out);
  const want = f32(join(FIXTURE, "golden", prompt.logits.file));
  expect(got.length).toBe(want.length);
  let md = 0;
  for (let i = 0; i < want.length; i++) md = Math.max(md, Math.abs(got[i]! - want[i]!));
  expect(md / prompt.std_logits).toBeLessThan(1e-3);
});

test("splash logits refuses what it cannot run, in one line", async () => {
  const out = join(tmpdir(), "never-written.f32");
  const bad = await splash(["logits", FIXTURE, "--tokens", "1,x", "--out", out]);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("--tokens");
  const big = await splash(["logits", FIXTURE, "--tokens", "1,99999", "--out", out]);
  expect(big.code).toBe(1);
  expect(big.stderr).toContain("tokens[1] = 99999");
  expect(big.stderr.trim().split("\n").length).toBeLessThanOrEqual(2);
  const missing = await splash(["logits", "/nonexistent", "--tokens", "1", "--out", out]);
  expect(missing.code).toBe(2);
});

test("an unknown --backend is a usage error naming the choices", async () => {
  const r = await splash(["logits", FIXTURE, "--tokens", "1,2", "--out", join(tmpdir(), "never-written.f32"), "--backend", "gpu"]);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain("auto, cpu, vulkan, metal");
});
