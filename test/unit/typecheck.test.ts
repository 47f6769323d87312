// TypeScript strict mode over src, test and scripts: a type error fails the suite like any other test.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { repoRoot } from "../helpers/cli.ts";

test("tsc --noEmit passes", async () => {
  const tsc = Bun.spawn([join(repoRoot, "node_modules/.bin/tsc"), "--noEmit", "-p", repoRoot], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(tsc.stdout).text();
  expect(out).toBe("");
  expect(await tsc.exited).toBe(0);
}, 120_000);
