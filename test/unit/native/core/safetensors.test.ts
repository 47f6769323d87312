// Safetensors files and checkpoint directories (native/core/safetensors.c, checkpoint.c) through their C test, in
// the sanitizer build: single file, index + shards, bare drafter directory, and 30-odd broken variants, each refused
// with the right status and a message that names the file (and the tensor, where there is one); files named or
// linked outside the directory; non-finite values in every float dtype and in a packed row's scale.
import { beforeAll, expect, test } from "bun:test";
import { buildNative, failures, runProgram, summary } from "../programs.ts";

beforeAll(() => buildNative(true), 120_000);

test("safetensors_test: good checkpoints open, bad ones are refused naming tensor and file", async () => {
  const r = await runProgram(true, "tests", "safetensors_test");
  expect(failures(r.stdout)).toEqual([]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(summary("safetensors_test", r.stdout)?.checks).toBeGreaterThanOrEqual(84);

  const refusals = r.stdout.split("\n").filter((l) => /-> status [1-9]/.test(l));
  expect(refusals.length).toBeGreaterThanOrEqual(30);
  for (const line of refusals) {
    // Every message names a file or directory under the test's temporary directory.
    expect(line).toMatch(/\/splash-st-\w+\/[\w.-]+/);
    // Messages about one tensor name it; the test's tensors are w, u, v, x.w, x.v, z.
    if (/dtype|shape|data_offsets|overlap|appears twice|listed|dimensions/.test(line)) expect(line).toMatch(/tensors? [\w.]+/);
  }
  expect(r.stdout).toContain("expected shape [2, 4] got [2, 3]");
  expect(r.stdout).toMatch(/tensor w in \S+\/bad0\/model\.safetensors: dtype "F4" is not supported/);
  // a weight_map entry or a link never opens a file outside the checkpoint; the refusal names the entry
  expect(r.stdout).toContain('the weight_map entry for tensor x.v names "../../../etc/passwd", not a plain file name in the directory');
  expect(r.stdout).toMatch(/link-out-index\/model-00001-of-00001\.safetensors is a link to \S+\/outside\/secret\.safetensors, outside the checkpoint directory \(the weight_map entry for tensor w names it\)/);
  expect(r.stdout).toMatch(/OK {6}a hub snapshot's link into blobs\/ +-> status 0/);
  // NaN and infinity are refused naming the tensor, in every float dtype and in a packed row's scale
  for (const dir of ["nan-f32", "inf-bf16", "nan-f16", "inf-f64", "nan-e4m3", "inf-e5m2", "nan-e8m0", "nan-big"])
    expect(r.stdout).toMatch(new RegExp(`tensor w in \\S+/${dir}/model\\.safetensors: element \\d+ is not a finite number`));
  expect(r.stdout).toMatch(/tensor w in \S+\/pack-nan\/model\.splash: element 0 is not a finite number/);
}, 60_000);
