// The speculative acceptance rule (native/draft/accept.c) on fixed probabilities: the tokens it emits are distributed
// as the target's p whatever the draft distribution q, checked by a chi-square goodness-of-fit test at significance
// 0.001 with fixed seeds (deterministic: the same draws every run). A control shows the test has power: the drafts
// themselves (distributed as q) fail it.
import { expect, test } from "bun:test";
import { native } from "../../../src/native/library.ts";
import { draftAccept } from "../../../src/native/model.ts";

const V = 8;
const N = 20_000;
// χ² critical value for V − 1 = 7 degrees of freedom at significance 0.001
const CRITICAL = 24.322;

// A small seeded generator for the test's own draws (the drafts d_i ~ q_i).
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

function dist(rand: () => number, sparse = false): Float32Array {
  const w = Float32Array.from({ length: V }, (_, i) => (sparse && i % 3 === 0 ? 0 : rand() ** 2));
  const total = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / total);
}

function draw(p: Float32Array, u: number): number {
  let cum = 0;
  for (let t = 0; t < V; t++) if ((cum += p[t]!) > u) return t;
  return V - 1;
}

function chiSquare(counts: number[], p: Float32Array, n: number): number {
  let chi = 0;
  for (let t = 0; t < V; t++) {
    const expected = p[t]! * n;
    if (expected === 0) {
      if (counts[t]! > 0) return Infinity;
      continue;
    }
    chi += (counts[t]! - expected) ** 2 / expected;
  }
  return chi;
}

// Runs N cycles of k drafts d_i ~ q_i. With a sparse p (what a grammar mask or top-k leaves), a draft p rules out
// is refused before verification, as the engine does: only the drafts before it are verified and q keeps its row
// (q_rows = verified + 1). Returns the emitted token at block positions 0 and 1 (position 1 when position 0 was an
// accepted draft) and the first drafts.
async function simulate(k: number, seed: number, sparseP: boolean) {
  const lib = native();
  const rand = rng(seed);
  const p = Array.from({ length: k + 1 }, () => dist(rand, sparseP));
  const q = Array.from({ length: k }, () => dist(rand));
  const pAll = new Float32Array((k + 1) * V);
  p.forEach((row, i) => pAll.set(row, i * V));
  const qAll = new Float32Array(k * V);
  q.forEach((row, i) => qAll.set(row, i * V));
  const first = new Array(V).fill(0);
  const second = new Array(V).fill(0);
  const drafted = new Array(V).fill(0);
  let accepted = 0;
  let refused = 0;
  for (let trial = 0; trial < N; trial++) {
    const drafts = Int32Array.from({ length: k }, (_, i) => draw(q[i]!, rand()));
    let m = drafts.findIndex((d, i) => p[i]![d] === 0);
    if (m < 0) m = k;
    else refused++;
    const r = draftAccept(lib, pAll, qAll, m < k ? m + 1 : k, V, drafts.subarray(0, m), 1000 + trial, 7);
    const emitted = [...drafts.subarray(0, r.accepted), r.token];
    first[emitted[0]!]++;
    if (emitted.length > 1) second[emitted[1]!]++;
    drafted[drafts[0]!]++;
    accepted += r.accepted;
  }
  return { p, first, second, drafted, secondN: second.reduce((a, b) => a + b, 0), accepted, refused };
}

test("three drafts: the first and second emitted tokens follow p (χ², α = 0.001); the drafts themselves do not", async () => {
  const s = await simulate(3, 1, false);
  expect(chiSquare(s.first, s.p[0]!, N)).toBeLessThan(CRITICAL);
  expect(chiSquare(s.second, s.p[1]!, s.secondN)).toBeLessThan(CRITICAL);
  expect(chiSquare(s.drafted, s.p[0]!, N)).toBeGreaterThan(CRITICAL); // power: q is not p
  expect(s.accepted).toBeGreaterThan(N / 2);
});

test("drafts a mask refuses before verification: what is emitted still follows p, and never a refused token", async () => {
  for (const [k, seed] of [[1, 2], [3, 3]] as const) {
    const s = await simulate(k, seed, true);
    expect(s.refused).toBeGreaterThan(N / 10);
    expect(chiSquare(s.first, s.p[0]!, N)).toBeLessThan(CRITICAL);
    expect(chiSquare(s.second, s.p[1]!, s.secondN)).toBeLessThan(CRITICAL);
    for (let t = 0; t < V; t += 3) expect(s.first[t]).toBe(0);
  }
});
test("one-hot p and q (greedy): accept while the draft is the argmax, then the argmax", async () => {
  const lib = native();
  const onehot = (t: number) => Float32Array.from({ length: V }, (_, i) => (i === t ? 1 : 0));
  const target = [3, 5, 1, 6];
  const p = new Float32Array(4 * V);
  target.forEach((t, i) => p.set(onehot(t), i * V));
  for (const [drafts, accepted, token] of [
    [[3, 5, 1], 3, 6],
    [[3, 5, 2], 2, 1],
    [[4, 5, 1], 0, 3],
  ] as const) {
    const q = new Float32Array(3 * V);
    drafts.forEach((t, i) => q.set(onehot(t), i * V));
    expect(draftAccept(lib, p, q, 3, V, Int32Array.from(drafts), 9, 0)).toEqual({ accepted, token });
  }
});
