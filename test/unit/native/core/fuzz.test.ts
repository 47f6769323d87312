// Fuzzes the safetensors header and JSON parsers for a bounded time in the sanitizer build
// (native/tests/fuzz_safetensors.c): random and mutated images must never crash, read out of bounds, hit undefined
// behaviour, or be accepted while breaking an invariant. A fixed seed keeps the run reproducible.
import { beforeAll, expect, test } from "bun:test";
import { buildNative, runProgram } from "../programs.ts";

beforeAll(() => buildNative(true), 120_000);

test("fuzz_safetensors: 8 s of mutated images, no crash, no sanitizer report", async () => {
  const r = await runProgram(true, "tests", "fuzz_safetensors", ["--seconds", "8", "--seed", "20261130"]);
  expect(r.stderr).not.toContain("runtime error");
  expect(r.stderr).not.toContain("AddressSanitizer");
  expect(r.stderr).not.toContain("invariant broken");
  expect(r.code).toBe(0);
  const m = /(\d+) inputs, (\d+) accepted, (\d+) refused, no crash/.exec(r.stdout);
  expect(m).not.toBeNull();
  const [inputs, accepted, refused] = [Number(m![1]), Number(m![2]), Number(m![3])];
  console.log(`fuzz_safetensors: ${inputs} inputs (${accepted} accepted, ${refused} refused) in 8 s`);
  expect(inputs).toBeGreaterThan(5000);
  // Both sides of the parser are exercised: the mutations are neither all fatal nor all harmless.
  expect(accepted).toBeGreaterThan(inputs / 100);
  expect(refused).toBeGreaterThan(inputs / 2);
}, 60_000);

test("fuzz_safetensors: one input reproduces from its seed and iteration", async () => {
  const r = await runProgram(true, "tests", "fuzz_safetensors", ["--seed", "20261130", "--iter", "17"]);
  expect(r.code).toBe(0);
  expect(r.stderr).toBe("");
});
