// `--draft auto|none|mtp|dflash` (src/models/drafter.ts): auto follows the speedups the spec records as measured,
// else the spec's default; explicit choices must be available and say what to do when they are not.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { chooseDrafter } from "../../src/models/drafter.ts";
import { findSpec } from "../../src/models/registry.ts";
import type { ResolvedModel } from "../../src/models/resolve.ts";
import { isHubSpec, type ModelSpec } from "../../src/models/spec.ts";

const tiny = findSpec("splash-tiny")!;
const embedded = (spec: ModelSpec): ResolvedModel => ({ kind: "embedded", id: spec.id, spec, dir: "/m/splash-tiny" });

test("auto on the embedded model: the drafter with the best measured speedup, when it is a real gain", () => {
  expect(tiny.measuredSpeedup).toBeDefined();
  const best = tiny.measuredSpeedup!.mtp! >= tiny.measuredSpeedup!.dflash! ? "mtp" : "dflash";
  expect(chooseDrafter(embedded(tiny), "auto", true)?.kind).toBe(best);
  const dflashWins = { ...tiny, measuredSpeedup: { mtp: 1.1, dflash: 1.6, command: "test" } };
  expect(chooseDrafter(embedded(dflashWins), "auto", true)).toEqual({ kind: "dflash", dir: join("/m/splash-tiny", "dflash") });
  expect(chooseDrafter(embedded(dflashWins), "auto", false)).toEqual({ kind: "dflash", dir: join("/m/splash-tiny", "dflash") });
  const noGain = { ...tiny, measuredSpeedup: { mtp: 1.01, dflash: 0.9, command: "test" } };
  expect(chooseDrafter(embedded(noGain), "auto", true)).toBeNull();
});

test("auto without measurements: the spec's default where it is available; a DFlash2 drafter is never picked", () => {
  const hub = findSpec("qwen3.8-27b")!;
  expect(isHubSpec(hub) && hub.draft.default).toBe("mtp");
  const resolved = { kind: "hub", id: hub.id, spec: hub, dir: "/m/q", drafterDir: "/m/d" } as unknown as ResolvedModel;
  expect(chooseDrafter(resolved, "auto", true)).toEqual({ kind: "mtp" });
  expect(chooseDrafter(resolved, "auto", false)).toBeNull(); // an MLX download without mtp.*; DFlash2 is not auto
  expect(chooseDrafter(resolved, "dflash", false)).toEqual({ kind: "dflash", dir: "/m/d" }); // asked: the loader refuses it with its reason
});

test("explicit choices: none, and clear errors for what is missing", () => {
  expect(chooseDrafter(embedded(tiny), "none", true)).toBeNull();
  expect(chooseDrafter(embedded(tiny), "mtp", true)).toEqual({ kind: "mtp" });
  expect(() => chooseDrafter(embedded(tiny), "mtp", false)).toThrow(/no MTP layer/);
  const local = { kind: "local", id: "x", spec: undefined, format: "bf16", dir: "/m/x" } as unknown as ResolvedModel;
  expect(() => chooseDrafter(local, "dflash", true)).toThrow(/no DFlash drafter/);
  expect(chooseDrafter(local, "dflash", true, "/d")).toEqual({ kind: "dflash", dir: "/d" });
});
