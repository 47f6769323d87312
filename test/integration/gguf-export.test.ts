// `splash export-gguf` files checked independently: test/integration/gguf-check.py re-derives every tensor from the
// safetensors with llama.cpp's converter rules (numpy) and compares them (F32 exactly, F16/BF16/Q8_0/Q4_0 against
// gguf-py's reference encoders) and checks the metadata keys, through gguf-py's GGUFReader. Also: what llama.cpp's
// qwen35 cannot express is refused with a message, and the per-expert and fused MoE layouts give the same bytes.
// numpy and gguf come from the tests' pinned Python environment (test/helpers/python-env.ts), installed on first use.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exportGguf, type ExportType } from "../../src/gguf/export.ts";
import { ExportError } from "../../src/gguf/qwen35.ts";
import { TEST_PYTHON_TIMEOUT_MS, testPython } from "../helpers/python-env.ts";
import { DENSE_TEXT, MOE_TEXT, writeCheckpoint } from "./gguf-checkpoints.ts";

const root = join(import.meta.dir, "../..");
let dir: string;
let python: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "splash-gguf-export-"));
  writeCheckpoint(join(dir, "dense"), DENSE_TEXT);
  writeCheckpoint(join(dir, "moe"), MOE_TEXT);
  writeCheckpoint(join(dir, "moe-per-expert"), MOE_TEXT, { perExpert: true });
  python = await testPython();
}, TEST_PYTHON_TIMEOUT_MS);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function check(model: string, file: string): { tensors: number; arch: string } {
  const r = Bun.spawnSync([python, join(root, "test/integration/gguf-check.py"), model, file], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`gguf-check.py failed: ${r.stderr.toString()}`);
  return JSON.parse(r.stdout.toString()) as { tensors: number; arch: string };
}

const TYPES: ExportType[] = ["f32", "f16", "bf16", "q8_0", "q4_0"];

describe.each([
  ["dense", "qwen35", 109],
  ["moe", "qwen35moe", 111],
])("%s checkpoint", (name, arch, tensors) => {
  test.each(TYPES)("%s: every tensor and key as llama.cpp's converter makes them", (type) => {
    const model = join(dir, name);
    const file = join(dir, `${name}-${type}.gguf`);
    const r = exportGguf(model, file, type, { name: "test" });
    expect(r.arch).toBe(arch);
    expect(check(model, file)).toEqual({ tensors, arch });
  }, 60_000);
});

test("the embedded model (tokenizer, chat template, q8_0) passes the same check", () => {
  const file = join(dir, "splash-tiny-q8_0.gguf");
  exportGguf(join(root, "models/splash-tiny"), file, "q8_0");
  expect(check(join(root, "models/splash-tiny"), file).arch).toBe("qwen35");
}, 60_000);

test("per-expert and fused MoE checkpoints export to the same bytes", () => {
  for (const n of ["moe", "moe-per-expert"]) exportGguf(join(dir, n), join(dir, `${n}-same.gguf`), "q8_0", { name: "same" });
  const a = readFileSync(join(dir, "moe-same.gguf"));
  const b = readFileSync(join(dir, "moe-per-expert-same.gguf"));
  expect(a.length).toBeGreaterThan(0);
  expect(a.equals(b)).toBe(true);
});

test("layouts llama.cpp's qwen35 cannot express are refused, naming why", () => {
  // irregular layer types (full attention at 1 and 4)
  expect(() => exportGguf(join(root, "test/fixtures/models/qwen35-moe-tiny"), join(dir, "x.gguf"), "f16")).toThrow(/full_attention_interval/);
  // GDN key head dim 16 ≠ value head dim 24
  expect(() => exportGguf(join(root, "test/fixtures/models/qwen35-dense-tiny"), join(dir, "y.gguf"), "f16")).toThrow(ExportError);
});

test("splash export-gguf: writes the file, refuses a bad --type (exit 2) and an existing OUT without --force", () => {
  const out = join(dir, "cli.gguf");
  const cli = (...args: string[]) => Bun.spawnSync(["bun", join(root, "src/main.ts"), "export-gguf", ...args], { stdout: "pipe", stderr: "pipe" });
  const ok = cli("splash-tiny", out, "--type", "q4_0");
  expect(ok.exitCode).toBe(0);
  expect(ok.stdout.toString()).toContain("qwen35, 109 tensors, q4_0");
  expect(readFileSync(out).subarray(0, 4).toString()).toBe("GGUF");
  const again = cli("splash-tiny", out);
  expect(again.exitCode).toBe(1);
  expect(again.stderr.toString()).toContain("--force");
  expect(cli("splash-tiny", join(dir, "z.gguf"), "--type", "q5_k").exitCode).toBe(2);
}, 60_000);
