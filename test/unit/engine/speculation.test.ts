// The adaptive draft length (src/engine/speculation.ts) on synthetic costs: long blocks where verifying a row is
// nearly free (a model that reads weights), no drafts where a row costs nearly a step (a model that computes), with
// a one-draft probe every few steps; shorter blocks as acceptance drops.
import { expect, test } from "bun:test";
import { Speculation, SpeculationPolicy } from "../../../src/engine/speculation.ts";

// A policy that has seen steps of 1..8 rows drafting 0..6 tokens costing a + b·rows + c·[drafts > 0] + d·drafts, and
// whose drafting steps delivered `gate` times the tokens per ms of plain ones.
function trained(a: number, b: number, c: number, d: number, gate = 2): SpeculationPolicy {
  const p = new SpeculationPolicy(7);
  for (let i = 0; i < 40; i++) {
    const rows = 1 + (i % 8);
    const drafts = i % 7;
    p.observeStep(rows, drafts, a + b * rows + (drafts > 0 ? c : 0) + d * drafts);
  }
  expect(p.costs()!.a).toBeCloseTo(a, 6);
  expect(p.costs()!.d).toBeCloseTo(d, 6);
  p.observeDecode(1, 1, false);
  p.observeDecode(gate, 1, true);
  return p;
}

function accepting(rate: number, maxDraft = 7): Speculation {
  const s = new Speculation(maxDraft);
  for (let i = 0; i < 60; i++) {
    let a = 0;
    while (a < maxDraft && (i * 7919 + a * 104729) % 1000 < rate * 1000) a++;
    s.record(maxDraft, a);
  }
  return s;
}

test("E(k) follows the per-position acceptance rates", () => {
  const s = new Speculation(3);
  expect(s.expected(3)).toBe(4); // optimistic start
  for (let i = 0; i < 50; i++) s.record(3, 1); // the first draft always, the second never
  expect(s.expected(1)).toBeCloseTo(2, 2);
  expect(s.expected(3)).toBeCloseTo(2, 2);
  expect(s.acceptedAt).toEqual([50, 0, 0]);
  expect(s.verifiedAt).toEqual([50, 50, 50]);
});

test("before the costs are known, sequences try every draft length", () => {
  const p = new SpeculationPolicy(7);
  const s = new Speculation(4);
  const ks = Array.from({ length: 4 }, () => {
    const [k] = p.plan([s]);
    s.record(k!, 0);
    return k;
  });
  expect(new Set(ks).size).toBe(4);
});

test("verify rows nearly free and drafts accepted: the longest block", () => {
  expect(trained(20, 0.2, 2, 0.2).plan([accepting(0.9)])).toEqual([7]);
});

test("acceptance dropping shortens the block", () => {
  const policy = trained(20, 1, 2, 0.3);
  const [high] = policy.plan([accepting(0.9)]);
  const [low] = policy.plan([accepting(0.4)]);
  expect(low!).toBeLessThan(high!);
  expect(low!).toBeGreaterThan(0);
});

test("a row costs nearly a step: no drafts, with a one-draft probe every 8 steps", () => {
  const policy = trained(1, 1, 1, 0.5);
  const s = accepting(0.5);
  const ks = Array.from({ length: 15 }, () => policy.plan([s])[0]);
  expect(ks.filter((k) => k === 0).length).toBe(14);
  expect(ks.filter((k) => k === 1).length).toBe(1);
});

test("the gate: drafting steps that deliver fewer tokens per ms than plain ones stop drafting, but for probes; a seeded sequence keeps its own rule", () => {
  const policy = trained(20, 0.2, 2, 0.2, 0.8); // the model says draft the most; what was delivered says otherwise
  const greedy = accepting(0.9);
  const unseeded = accepting(0.9); // sampling without a chosen seed: planned like a greedy sequence
  const seeded = new Speculation(7, true);
  const ks = Array.from({ length: 32 }, () => policy.plan([greedy, unseeded, seeded]));
  expect(ks.filter(([g]) => g! > 0).length).toBe(2); // every 16th step
  expect(ks.filter(([, u]) => u! > 0).length).toBe(2);
  expect(ks.every(([, , s]) => s === 7)).toBe(true);
  policy.observeDecode(10, 1, true); // drafting now delivers more
  expect(policy.plan([greedy])).toEqual([7]);
});

test("a seeded sequence the drafter cannot follow stops drafting, but for a one-draft probe every 8 of its own steps", () => {
  const s = new Speculation(7, true);
  for (let i = 0; i < 30; i++) s.record(7, 0); // no draft ever accepted
  const ks = Array.from({ length: 24 }, () => new SpeculationPolicy(7).plan([s])[0]);
  expect(ks).toEqual(Array.from({ length: 24 }, (_, i) => ((i + 1) % 8 === 0 ? 1 : 0)));
  // the probes' acceptance brings it back, by its own rates alone
  for (let i = 0; i < 10; i++) s.record(1, 1);
  expect(new SpeculationPolicy(7).plan([s])[0]!).toBeGreaterThan(0);
});

test("more sequences share the step's fixed cost: each drafts less", () => {
  const policy = trained(20, 1, 3, 0.4);
  const alone = policy.plan([accepting(0.7)])[0]!;
  const four = policy.plan([accepting(0.7), accepting(0.7), accepting(0.7), accepting(0.7)]);
  expect(four.every((k) => k! <= alone)).toBe(true);
  expect(four[0]!).toBeLessThan(alone);
});

test("a seeded sequence's block length depends on its own acceptance only (reproducible for the seed)", () => {
  const s = new Speculation(7, true);
  expect(new SpeculationPolicy(7).plan([s])).toEqual([7]);
  for (let i = 0; i < 30; i++) s.record(7, 2); // drafts 0 and 1 kept, draft 2 never
  const k = trained(1, 1, 1, 0.5).plan([s]); // costs that would stop a greedy sequence from drafting
  expect(k).toEqual(trained(20, 0.1, 1, 0.1).plan([s]));
  expect(k).toEqual([2]);
});

test("a new sequence starts from the engine's acceptance rates (a seeded one from its own only)", () => {
  const p = new SpeculationPolicy(3);
  expect(p.start(false).rates).toEqual([1, 1, 1]);
  const s = p.start(false);
  for (let i = 0; i < 40; i++) p.record(s, 3, 0);
  expect(s.cycles).toBe(40);
  expect(p.start(false).rates[0]!).toBeLessThan(0.01);
  expect(p.start(true).rates).toEqual([1, 1, 1]);
});
