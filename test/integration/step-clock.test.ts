// How the speculation policy times a native step: CPU time where the CPU backend computes it, wall time where a GPU
// backend does (the host waits for the device without using a core, so its CPU time says nothing of the step).
import { expect, test } from "bun:test";
import { join } from "node:path";
import { nativeStepModel } from "../../src/engine/native-runner.ts";
import { Model } from "../../src/native/model.ts";
import { FIXTURE_MODELS } from "../helpers/parity.ts";

const DIR = join(FIXTURE_MODELS, "qwen35-dense-tiny");

test.each([["cpu", "cpu"], ["vulkan", "wall"]] as const)("a model on %s: steps timed by the %s clock", async (backend, clock) => {
  const model = await Model.load(DIR, { backend });
  try {
    expect(nativeStepModel(model).stepClock).toBe(clock);
  } finally {
    model.free();
  }
}, 60_000);
