// Grammar compiles run in worker threads (src/engine/grammar/grammar-pool.ts): while a cold grammar compiles over the 151K Qwen3
// vocabulary (seconds of xgrammar work), the event loop stays free and a sequence whose grammar is already compiled
// keeps getting its masks; a compile's failure reaches only the request that asked for it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { StructuredOutput, type ConstraintRequest } from "../../../../src/engine/grammar/index.ts";
import { model, qwen3Vocabulary, rng, sample } from "../../../fixtures/grammar/harness.ts";

const TIMEOUT = 120_000;
let so: StructuredOutput;
beforeAll(async () => {
  so = await StructuredOutput.create(await qwen3Vocabulary());
}, TIMEOUT);
afterAll(() => so.close());

const json = (schema: unknown): ConstraintRequest => ({ responseFormat: { type: "json_schema", schema: schema as Record<string, unknown> }, tools: [], toolChoice: "auto", parallelToolCalls: false });
// Raw-text tool parameters: the slowest grammars to compile (seconds over this vocabulary).
const heavy = (tag: string): ConstraintRequest => ({
  responseFormat: { type: "text" },
  tools: [{ name: `write_${tag}`, parameters: { type: "object", properties: { path: { type: "string" }, content: { type: "string" }, note: { type: "string" } }, required: ["path", "content"] } }],
  toolChoice: "required",
  parallelToolCalls: false,
});

test("a cold compile holds neither the event loop nor the masks of a running sequence", async () => {
  const running = (await so.prepare(json({ type: "object", properties: { text: { type: "string", maxLength: 5000 } }, required: ["text"] })))!;
  const c = await running.start({ thinking: false });
  const m = model(so.vocabulary, "uniform", 5);
  const mask = new Uint32Array(Math.ceil(so.vocabulary.size / 32));

  let compiled = false;
  const started = performance.now();
  const compile = so.prepare(heavy("a")).then((g) => ((compiled = true), g));
  // The event loop: timers keep firing on time while the compile runs.
  let lag = 0;
  let ticks = 0;
  let masks = 0;
  let slowestMask = 0;
  const random = rng(3);
  while (!compiled) {
    const t = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 1));
    lag = Math.max(lag, performance.now() - t - 1);
    ticks++;
    // A step of the running sequence: its mask, then a token it allows.
    const s = performance.now();
    c.fillMask(mask);
    slowestMask = Math.max(slowestMask, performance.now() - s);
    masks++;
    if (c.isComplete()) continue;
    const allowed: number[] = [];
    for (let w = 0; w < mask.length && allowed.length < 64; w++) if (mask[w]) for (let b = 0; b < 32; b++) if ((mask[w]! >>> b) & 1) allowed.push(w * 32 + b);
    const t2 = allowed.filter((id) => !so.vocabulary.stopTokens.includes(id));
    if (t2.length) expect(c.accept(t2[Math.floor(random() * t2.length)]!)).toBe(true);
  }
  const compileMs = performance.now() - started;
  const grammar = (await compile)!;
  c.release();
  expect(compileMs).toBeGreaterThan(500); // it was a real compile, long enough to see a stall
  expect(ticks).toBeGreaterThan(compileMs / 50);
  // A held loop waits the whole compile; a free one waits only for the 2 cores it shares with the suite's others.
  expect(lag).toBeLessThan(compileMs / 4);
  expect(masks).toBeGreaterThan(10);
  expect(slowestMask).toBeLessThan(compileMs / 4);
  // The compiled grammar works: a sample from it is a call.
  const out = sample(m, await grammar.start({ thinking: false }), rng(4));
  expect(out.text).toContain("<tool_call>");
}, TIMEOUT);

test("the same grammar asked for twice at once compiles once; another compiles beside it", async () => {
  const [a, b, a2] = await Promise.all([so.prepare(heavy("b")), so.prepare(heavy("c")), so.prepare(heavy("b"))]);
  expect(a!.compiled).toBe(a2!.compiled);
  expect(a!.compiled).not.toBe(b!.compiled);
  for (const g of [a!, b!]) expect(sample(model(so.vocabulary, "uniform", 6), await g.start({ thinking: false }), rng(7)).text).toContain("<tool_call>");
}, TIMEOUT);
