// The product stays apart from the tooling: nothing under src/ (what `splash` is built from) imports scripts/ (build,
// training, fixture and one-off benchmark programs), so the binary never carries a development tool.
import { expect, test } from "bun:test";
import { Glob } from "bun";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../helpers/cli.ts";

test("no source under src/ imports from scripts/", () => {
  const offenders: string[] = [];
  for (const file of new Glob("src/**/*.{ts,mjs,js}").scanSync({ cwd: repoRoot })) {
    const text = readFileSync(join(repoRoot, file), "utf8");
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g))
      if (/(^|\/)scripts\//.test(m[1]!)) offenders.push(`${file}: ${m[1]}`);
  }
  expect(offenders).toEqual([]);
});
