// `--draft auto|none|mtp|dflash|dflash2` (src/models/drafter.ts): auto follows the speedups the spec records as
// measured on the backend the model runs on, else the spec's default; explicit choices must be available and say
// what to do when they are not.
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { CliError } from "../../../src/cli/_command.ts";
import { chooseDrafter } from "../../../src/models/drafter.ts";
import { findSpec } from "../../../src/models/registry.ts";
import type { ResolvedModel } from "../../../src/models/resolve.ts";
import { isHubSpec, type ModelSpec } from "../../../src/models/spec.ts";

const tiny = findSpec("splash-tiny")!;
const tinyWith2 = { ...tiny, draft: { ...tiny.draft, dflash2: "dflash2" } }; // both DFlash drafters beside it
const embedded = (spec: ModelSpec): ResolvedModel => ({ kind: "embedded", id: spec.id, spec, dir: "/m/splash-tiny" });
const hub = findSpec("qwen3.8-27b")!;
const hubResolved = (spec: ModelSpec, drafterDir?: string) => ({ kind: "hub", id: spec.id, spec, dir: "/m/q", drafterDir }) as unknown as ResolvedModel;

test("auto on the embedded model: the drafter with the best speedup measured on its backend, when it is a real gain", () => {
  for (const backend of ["cpu", "vulkan"] as const) {
    const measured = tiny.measuredSpeedup![backend]!;
    const best = (["mtp", "dflash", "dflash2"] as const).reduce((a, b) => ((measured[b] ?? 0) > (measured[a] ?? 0) ? b : a));
    expect(chooseDrafter(embedded(tinyWith2), "auto", true, backend)?.kind).toBe(best);
  }
  const dflashWins = { ...tinyWith2, measuredSpeedup: { cpu: { mtp: 1.1, dflash: 1.6, dflash2: 1.3, command: "test" } } };
  expect(chooseDrafter(embedded(dflashWins), "auto", true, "cpu")).toEqual({ kind: "dflash", dir: join("/m/splash-tiny", "dflash") });
  expect(chooseDrafter(embedded(dflashWins), "auto", false, "cpu")).toEqual({ kind: "dflash", dir: join("/m/splash-tiny", "dflash") });
  const dflash2Wins = { ...tinyWith2, measuredSpeedup: { cpu: { mtp: 1.1, dflash: 1.2, dflash2: 1.5, command: "test" } } };
  expect(chooseDrafter(embedded(dflash2Wins), "auto", true, "cpu")).toEqual({ kind: "dflash2", dir: join("/m/splash-tiny", "dflash2") });
  const noGain = { ...tinyWith2, measuredSpeedup: { cpu: { mtp: 1.01, dflash: 0.9, dflash2: 1.04, command: "test" } } };
  expect(chooseDrafter(embedded(noGain), "auto", true, "cpu")).toBeNull();
});

test("Qwen3.8-27B: auto picks its DFlash2 drafter where it is downloaded and measured faster, else the spec's default", () => {
  expect(isHubSpec(hub) && hub.draft.default).toBe("mtp");
  expect(hub.measuredSpeedup).toBeUndefined(); // not measured here yet: the default decides
  expect(chooseDrafter(hubResolved(hub, "/m/d"), "auto", true, "cpu")).toEqual({ kind: "mtp" });
  expect(chooseDrafter(hubResolved(hub, "/m/d"), "auto", false, "cpu")).toBeNull(); // an MLX download without mtp.*
  const measured = { ...hub, measuredSpeedup: { cpu: { mtp: 1.4, dflash2: 2.1, command: "test" } } };
  expect(chooseDrafter(hubResolved(measured, "/m/d"), "auto", true, "cpu")).toEqual({ kind: "dflash2", dir: "/m/d" });
  expect(chooseDrafter(hubResolved(measured), "auto", true, "cpu")).toEqual({ kind: "mtp" }); // not downloaded
  expect(chooseDrafter(hubResolved(hub, "/m/d"), "dflash2", false, "cpu")).toEqual({ kind: "dflash2", dir: "/m/d" });
  const missing = (() => {
    try {
      chooseDrafter(hubResolved(hub), "dflash2", true, "cpu");
    } catch (e) {
      return e as CliError;
    }
  })();
  expect(missing?.message).toMatch(/no DFlash2 drafter here/);
  expect(missing?.hint).toMatch(/splash pull qwen3.8-27b --drafter/);
  expect(() => chooseDrafter(hubResolved(hub, "/m/d"), "dflash", true, "cpu")).toThrow(/no DFlash drafter here/); // its drafter is DFlash2
});

test("explicit choices: none, and clear errors for what is missing", () => {
  expect(chooseDrafter(embedded(tiny), "none", true, "cpu")).toBeNull();
  expect(chooseDrafter(embedded(tiny), "mtp", true, "cpu")).toEqual({ kind: "mtp" });
  expect(chooseDrafter(embedded(tinyWith2), "dflash2", true, "cpu")).toEqual({ kind: "dflash2", dir: join("/m/splash-tiny", "dflash2") });
  expect(() => chooseDrafter(embedded(tiny), "mtp", false, "cpu")).toThrow(/no MTP layer/);
  const local = { kind: "local", id: "x", spec: undefined, format: "bf16", dir: "/m/x" } as unknown as ResolvedModel;
  expect(() => chooseDrafter(local, "dflash", true, "cpu")).toThrow(/no DFlash drafter/);
  expect(() => chooseDrafter(local, "dflash2", true, "cpu")).toThrow(/no DFlash2 drafter/);
  expect(chooseDrafter(local, "dflash", true, "cpu", "/d")).toEqual({ kind: "dflash", dir: "/d" });
  expect(chooseDrafter(local, "dflash2", true, "cpu", "/d")).toEqual({ kind: "dflash2", dir: "/d" });
});

test("auto reads the speedups measured on the backend the model runs on; unmeasured there, the spec's default", () => {
  const both = { ...tinyWith2, measuredSpeedup: { cpu: { mtp: 1.3, dflash: 1.1, command: "test" }, vulkan: { mtp: 1.2, dflash: 2.4, command: "test" } } };
  expect(chooseDrafter(embedded(both), "auto", true, "cpu")).toEqual({ kind: "mtp" });
  expect(chooseDrafter(embedded(both), "auto", true, "vulkan")).toEqual({ kind: "dflash", dir: join("/m/splash-tiny", "dflash") });
  expect(chooseDrafter(embedded(both), "auto", true, "metal")).toBeNull(); // no measurement and no default
  const withDefault = { ...both, draft: { ...both.draft, default: "mtp" as const } };
  expect(chooseDrafter(embedded(withDefault), "auto", true, "metal")).toEqual({ kind: "mtp" });
  expect(chooseDrafter(embedded(tiny), "auto", true, "metal")).toBeNull(); // splash-tiny is measured on the CPU and Vulkan only
});
