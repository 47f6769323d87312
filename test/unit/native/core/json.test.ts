// The strict JSON parser (native/core/json.c) through its C test, in the sanitizer build: exact values, every
// refusal with its byte offset, lookups, locale independence.
import { beforeAll, expect, test } from "bun:test";
import { buildNative, failures, runProgram, summary } from "../programs.ts";

beforeAll(() => buildNative(true), 120_000);

test("json_test: accepts, refuses with byte offsets, looks up", async () => {
  const r = await runProgram(true, "tests", "json_test");
  expect(failures(r.stdout)).toEqual([]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(summary("json_test", r.stdout)?.checks).toBeGreaterThanOrEqual(70);
  // A few refusals, as the user would read them.
  expect(r.stdout).toContain('"byte 7: expected a string key, found \'}\'"');
  expect(r.stdout).toContain('"byte 1: leading zero in number"');
  expect(r.stdout).toContain('"byte 64: nesting deeper than 64"');
  expect(r.stdout).toContain("INT64_MIN exact (-9223372036854775808)");
}, 60_000);
