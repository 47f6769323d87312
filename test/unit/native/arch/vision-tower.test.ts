// The native vision tower against the fixture goldens (native/tests/vision_test.c): each image's tower output before
// and after the merger (≤ 1e-4 of the largest golden value), the multimodal prompts' logits whole, in chunks of 5
// and token by token (≤ 1e-3 × std, same argmax), and the ABI's refusals.
import { expect, test } from "bun:test";
import { buildNative, failures, runProgram, summary } from "../programs.ts";

test("vision tower and multimodal logits match transformers", async () => {
  await buildNative(false);
  const r = await runProgram(false, "tests", "vision_test");
  expect(failures(r.stdout)).toEqual([]);
  expect(summary("vision_test", r.stdout)).toMatchObject({ failed: 0 });
  expect(summary("vision_test", r.stdout)!.checks).toBeGreaterThanOrEqual(25);
  expect(r.code).toBe(0);
}, 120_000);
