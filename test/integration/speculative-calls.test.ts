// A speculative step is one native call: verifying the drafts of a sequence's previous step, the acceptance and the
// next drafts all happen inside the one splash_step the engine makes per step, on the model's call thread; a grammar's
// cut of the drafts and its masks are taken between two steps. On splash-tiny with each drafter, five requests at once
// (greedy, sampled, and one under a constraint that refuses a token the model likes) through the engine: every call
// on the thread is a splash_step, there are exactly as many as engine steps, speculation ran (cycles with accepted
// drafts) and the constraint held, so a second call per step (a separate draft) would fail the count.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { createEngine } from "../../src/engine/engine.ts";
import { nativeStepModel } from "../../src/engine/native-runner.ts";
import type { EngineEvent, Sampling, TokenConstraint } from "../../src/engine/types.ts";
import { Model } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
// Allows every token but one (and never completes): the engine cuts drafts at it and masks every block position.
class Refusing implements TokenConstraint {
  taken = 0;
  constructor(readonly banned: number) {}
  fillMask(mask: Uint32Array): void {
    mask.fill(0xffffffff);
    mask[this.banned >>> 5]! &= ~(1 << (this.banned & 31));
  }
  accept(t: number): boolean {
    if (t === this.banned) return false;
    this.taken++;
    return true;
  }
  rollback(n: number): void {
    this.taken -= n;
  }
  isComplete(): boolean {
    return false;
  }
}

const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };

for (const drafter of [{ kind: "mtp" as const }, { kind: "dflash" as const, dir: join(TINY, "dflash") }, { kind: "dflash2" as const, dir: join(TINY, "dflash2") }]) {
  test(`${drafter.kind}: one splash_step per engine step, five streams: greedy, sampled and one under a constraint`, async () => {
    const model = await Model.load(TINY, { threads: 2, backend: "cpu", drafter });
    const calls: string[] = [];
    const thread = model.thread;
    const threadRun = thread.run.bind(thread);
    thread.run = (call) => (calls.push(call.fn), threadRun(call));
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
    const asks = ["Write a Python function that adds two numbers.", "Say hi.", "Count to ten.", "Name three colors.", "Write a Python function that adds two numbers."];
    const prompt = (ask: string) => tokenizer.encodeTemplate(`<|im_start|>user\n${ask}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n`);
    const run = async (ask: string, sampling: Sampling, constraint?: TokenConstraint) => {
      const tokens: number[] = [];
      for await (const e of engine.generate({ prompt: prompt(ask), maxTokens: 24, sampling, stopTokens: [], signal: new AbortController().signal, constraint })) {
        if (e.type === "tokens") tokens.push(...e.tokens.map((t) => t.id));
        if (e.type === "done") expect(e.reason).toBe("length");
      }
      return tokens;
    };
    try {
      // the token the model picks most often unconstrained is the one the constraint refuses
      const free = await run(asks[0]!, greedy);
      const banned = [...new Set(free)].sort((a, b) => free.filter((t) => t === b).length - free.filter((t) => t === a).length)[0]!;
      calls.length = 0;
      steps = 0;
      const constraint = new Refusing(banned);
      const outs = await Promise.all(asks.map((ask, i) => run(ask, i % 2 ? { ...greedy, temperature: 0.8, seed: i } : greedy, i === 4 ? constraint : undefined)));
      expect(outs[4]).not.toContain(banned);
      expect(outs[4]).not.toEqual(free);
      expect(constraint.taken).toBe(outs[4]!.length);
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
