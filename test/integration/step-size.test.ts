// The prompt tokens a step carries: the caller's, else what the backend measured for the model (a GPU's tuning,
// models/<id>/vulkan.json "prefillChunk", or the file SPLASH_VULKAN_TUNING names), else 512 — and the engine steps at
// what the model's scratch was sized for. The Vulkan cases run in a child process: the backend reads its environment
// through the C library, which a test's process.env does not reach.
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Model } from "../../src/native/model.ts";
import { FIXTURE_MODELS } from "../helpers/parity.ts";

const DIR = join(FIXTURE_MODELS, "qwen35-dense-tiny");
const tmp = mkdtempSync(join(tmpdir(), "splash-step-size-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// The step size a load on Vulkan reports, and the engine's, with this tuning file (or none) and load option.
function vulkanStep(tuning: object | null, maxStepTokens?: number): { model: number; engine: number } {
  const env: Record<string, string> = { ...process.env } as Record<string, string>;
  delete env.SPLASH_VULKAN_TUNING;
  if (tuning) {
    const file = join(tmp, `tuning-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(file, JSON.stringify(tuning));
    env.SPLASH_VULKAN_TUNING = file;
  }
  const script = `
    import { Model } from ${JSON.stringify(join(import.meta.dir, "../../src/native/model.ts"))};
    import { createEngine } from ${JSON.stringify(join(import.meta.dir, "../../src/engine/engine.ts"))};
    import { nativeStepModel } from ${JSON.stringify(join(import.meta.dir, "../../src/engine/native-runner.ts"))};
    const model = await Model.load(${JSON.stringify(DIR)}, { backend: "vulkan"${maxStepTokens ? `, maxStepTokens: ${maxStepTokens}` : ""} });
    const engine = createEngine(nativeStepModel(model), { kvBudget: 64 << 20, prefixCache: false });
    console.log(JSON.stringify({ model: model.info.maxStepTokens, engine: engine.scheduler.options.maxStepTokens }));
    await engine.close();
    model.free();`;
  const r = Bun.spawnSync([process.execPath, "-e", script], { env, stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`child failed: ${r.stderr.toString()}`);
  return JSON.parse(r.stdout.toString().trim().split("\n").at(-1)!);
}

test("the CPU backend has no measured step: 512 unless the caller sets one", async () => {
  for (const [option, want] of [[undefined, 512], [96, 96]] as const) {
    const model = await Model.load(DIR, { backend: "cpu", ...(option ? { maxStepTokens: option } : {}) });
    expect(model.info.maxStepTokens).toBe(want);
    model.free();
  }
});

test("on Vulkan a measured prefill chunk is the model's step size and the engine's; the caller's option wins", () => {
  expect(vulkanStep(null)).toEqual({ model: 512, engine: 512 });
  expect(vulkanStep({ measured: null, prefillChunk: 256 })).toEqual({ model: 256, engine: 256 });
  expect(vulkanStep({ measured: null, prefillChunk: 256 }, 128)).toEqual({ model: 128, engine: 128 });
  expect(vulkanStep({ measured: null, prefillChunk: 8 })).toEqual({ model: 512, engine: 512 }); // out of range: ignored
}, 120_000);
