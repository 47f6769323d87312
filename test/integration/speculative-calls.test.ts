// A speculative step is one native call: verifying the drafts of a sequence's previous step, the acceptance and the
// next drafts all happen inside the one splash_step the engine makes per step, on the model's call thread. On
// splash-tiny with each drafter, four requests at once (greedy and sampled) through the engine: every call on the
// thread is a splash_step, there are exactly as many as engine steps, and speculation ran (cycles with accepted
// drafts), so a second call per step (a separate draft) would fail the count.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { createEngine } from "../../src/engine/engine.ts";
import { nativeStepModel } from "../../src/engine/native-runner.ts";
import type { EngineEvent, Sampling } from "../../src/engine/types.ts";
import { Model } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };

for (const drafter of [{ kind: "mtp" as const }, { kind: "dflash" as const, dir: join(TINY, "dflash") }, { kind: "dflash2" as const, dir: join(TINY, "dflash2") }]) {
  test(`${drafter.kind}: one splash_step per engine step, four streams, greedy and sampled`, async () => {
    const model = await Model.load(TINY, { threads: 2, backend: "cpu", drafter });
    const calls: string[] = [];
    const thread = model.thread;
    const run = thread.run.bind(thread);
    thread.run = (call) => (calls.push(call.fn), run(call));
    let steps = 0;
    const stepModel = nativeStepModel(model);
    const engine = createEngine(
      {
        ...stepModel,
        createRunner: (geometry) => {
          const runner = stepModel.createRunner(geometry);
          const step = runner.step.bind(runner);
          runner.step = (seqs) => (steps++, step(seqs));
          return runner;
        },
      },
      { kvBudget: 16 << 20, draftLength: 4 },
    );
    const tokenizer = await Tokenizer.load(TINY);
    const asks = ["Write a Python function that adds two numbers.", "Say hi.", "Count to ten.", "Name three colors."];
    try {
      await Promise.all(
        asks.map(async (ask, i) => {
          const prompt = tokenizer.encodeTemplate(`<|im_start|>user\n${ask}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`);
          const sampling = i % 2 ? { ...greedy, temperature: 0.8, seed: i } : greedy;
          const events: EngineEvent[] = [];
          for await (const e of engine.generate({ prompt, maxTokens: 24, sampling, stopTokens: [], signal: new AbortController().signal })) events.push(e);
          expect(events.at(-1)).toMatchObject({ type: "done", reason: "length" });
        }),
      );
      const spec = engine.stats().speculation!;
      expect(spec.cycles).toBeGreaterThan(asks.length);
      expect(spec.accepted).toBeGreaterThan(0);
      expect(steps).toBeGreaterThan(0);
      expect(new Set(calls)).toEqual(new Set(["splash_step"]));
      expect(calls.length).toBe(steps);
    } finally {
      tokenizer.free();
      await engine.close();
      model.free();
    }
  }, 60_000);
}
