// The thread pool (native/core/threadpool.c) through its C test in the sanitizer build: every item once, the
// documented static split for pools of 1-8 threads, sleeping workers wake, dispatch latency (median, printed).
import { beforeAll, expect, test } from "bun:test";
import { buildNative, failures, runProgram, summary } from "../programs.ts";

beforeAll(() => buildNative(true), 120_000);

test("threadpool_test: coverage, static split, wake-up, latency", async () => {
  const r = await runProgram(true, "tests", "threadpool_test");
  expect(failures(r.stdout)).toEqual([]);
  expect(r.stderr).toBe("");
  expect(r.code).toBe(0);
  expect(summary("threadpool_test", r.stdout)?.checks).toBeGreaterThanOrEqual(40);
  console.log(r.stdout.split("\n").find((l) => l.includes("dispatch latency")));
}, 60_000);
