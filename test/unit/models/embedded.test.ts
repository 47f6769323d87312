// The embedded model's file table must name every file the model directory holds (and nothing else), or the
// binary would ship a model missing a file that `bun run` finds on disk.
import { expect, test } from "bun:test";
import { join, relative } from "node:path";
import { EMBEDDED_FILES, embeddedModelDir } from "../../../src/models/embedded.ts";
import { repoRoot } from "../../helpers/cli.ts";

const dir = join(repoRoot, "models", "splash-tiny");
// Documentation and the spec (imported as JSON by the registry) are not runtime files of the checkpoint.
const NOT_EMBEDDED = new Set(["README.md", "spec.json"]);

test("every runtime file of models/splash-tiny is embedded under its own name", async () => {
  const onDisk: string[] = [];
  for await (const f of new Bun.Glob("**/*").scan({ cwd: dir })) if (!NOT_EMBEDDED.has(f)) onDisk.push(f);
  expect(Object.keys(EMBEDDED_FILES).sort()).toEqual(onDisk.sort());
  for (const [name, path] of Object.entries(EMBEDDED_FILES)) expect(relative(dir, path)).toBe(name);
});

test("from a checkout the model is used where it is", () => {
  expect(embeddedModelDir(dir)).toBe(dir);
});
