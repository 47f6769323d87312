// Speculative decoding in the engine: which sequences draft, how many tokens, and what a verify block's result
// means for the sequence. The drafter and the acceptance rule run natively (native/api/speculate.c: logits of a
// 248K vocabulary never reach JavaScript); this file is the policy around them.
//
// One cycle of a decoding sequence (last token t at position n = computed, not yet in the cache) is one step, one
// native call:
//
//   prepare    the drafts d1 … dk its previous step proposed: a grammar keeps the prefix it allows (checkDraft) and
//              gives one mask per block position; the block [t, d1 … dm] is verified, m ≤ k (a refused draft counts
//              as rejected at its position; drafts past the output's end or the step's room are dropped unseen)
//   step       the target accepts a ≤ m drafts and picks the token t' after them (argmax, or rejection sampling),
//              then the drafter proposes the next k' drafts after t' (k' from SpeculationPolicy, ≤ the drafter's
//              maximum, ≤ what the output can still use)
//   apply      computed += a + 1; the constraint rolls back the m − a drafts it took; a + 1 tokens are emitted
//
// Adaptive draft length (SpeculationPolicy): each step, every speculating sequence gets the k (0 … the drafter's
// maximum) that maximizes its expected tokens per millisecond,
//
//     E(k) / cost(k),   E(k) = 1 + Σ_{i ≤ k} Π_{j < i} p_j,   cost(k) = (a + c·[k > 0]) / S + b·(k + 1) + d·k
//
// where p_j is the sequence's own running rate of accepting draft j once drafts 0 … j − 1 were accepted
// (exponential average, α = 0.2, starting from the engine's running rates over all sequences, or 1 before any
// cycle), and the costs are learned from the time the engine's steps take (StepModel.stepClock: CPU time on the CPU
// backend, wall time on a GPU) by least squares that forget old steps: a decoding step (no prompt rows) of R rows — one per
// sequence plus the drafts it verifies — that drafts K tokens for the next takes a + b·R + c·[K > 0] + d·K ms (a and
// c shared by the S sequences of the step); until the fit exists, sequences cycle through every draft length so that
// the costs can be told apart. So acceptance dropping shortens
// the block, and so does a machine where each verified row costs nearly a full step (a small model computing rather
// than reading weights): there k = 0 can win, and the sequence then drafts one token every PROBE_EVERY-th step to
// keep its acceptance rates current. Above the model sits a gate on what is actually delivered: the engine's tokens
// per ms (the same clock) in decoding steps that drafted against those that did not; while drafting delivers less, greedy
// sequences do not draft, except on every GATE_PROBE-th step (and plain steps are probed the same way while
// drafting wins), so what the cost model misses (the scheduler's own work, the machine) still decides.
//
// A sampling sequence (temperature > 0) whose caller chose the seed must come out the same for that seed whatever
// runs beside it and however fast the machine is, and with rejection sampling the tokens depend on where the blocks
// fall. Its k therefore depends on its own acceptance rates only: the longest block whose last draft is accepted with
// probability ≥ MIN_REACH, and none while even the first draft is accepted less often than that (a one-draft probe
// every PROBE_EVERY-th of its own steps keeps the rate current), so a seeded stream that the drafter cannot follow
// stops paying for it. A sampling sequence without a chosen seed follows the cost model and the gate like a greedy
// one: its tokens are a fresh random draw either way, distributed the same whatever the block lengths (rejection
// sampling keeps the target's distribution), so nothing a caller can observe depends on the batch, and under load it
// drafts only while drafting delivers (docs/SPECULATION.md).
import { checkDraft } from "./grammar/index.ts";
import type { DrafterSpec, SampledToken, TokenChoice } from "./runner.ts";
import type { GenerateRequest, TokenConstraint } from "./types.ts";

const ALPHA = 0.2; // acceptance-rate averaging
const FORGET = 0.97; // weight of the previous observations in the cost fits, per observation
const PROBE_EVERY = 8; // steps between one-draft probes of a sequence that drafts nothing
const MIN_REACH = 0.25; // seeded sequences: how likely the last draft of a block must be to be accepted
const GATE_ALPHA = 0.1; // averaging of the gate's token rates
const GATE_PROBE = 16; // steps between the gate's probes of the way it is not taking

// Per-sequence speculation state and counters (the counters feed EngineStats and the request's done event).
export class Speculation {
  cycles = 0; // verify blocks run
  drafted = 0; // drafts verified (after any grammar cut)
  accepted = 0; // drafts accepted
  // Per draft position j (0-based): cycles that verified a j-th draft, and cycles that accepted it (with all before).
  readonly verifiedAt: number[];
  readonly acceptedAt: number[];
  readonly rates: number[]; // p_j above
  idle = 0; // steps since the last draft

  constructor(
    readonly maxDraft: number,
    readonly seeded = false, // sampling with a chosen seed: the block length depends on this sequence alone
    prior?: readonly number[], // starting acceptance rates (the engine's), else 1
  ) {
    this.verifiedAt = new Array(maxDraft).fill(0);
    this.acceptedAt = new Array(maxDraft).fill(0);
    this.rates = prior && !seeded ? prior.slice(0, maxDraft) : new Array(maxDraft).fill(1);
  }

  record(verified: number, accepted: number): void {
    this.cycles++;
    this.drafted += verified;
    this.accepted += accepted;
    for (let j = 0; j < verified; j++) this.verifiedAt[j]!++;
    for (let j = 0; j < accepted; j++) this.acceptedAt[j]!++;
    /* draft j was reached when every draft before it was accepted */
    for (let j = 0; j < verified && j <= accepted; j++) this.rates[j] = (1 - ALPHA) * this.rates[j]! + ALPHA * (j < accepted ? 1 : 0);
  }

  // E(k): the tokens a cycle with k drafts is expected to emit.
  expected(k: number): number {
    let e = 1;
    let reach = 1;
    for (let j = 0; j < k; j++) e += reach *= this.rates[j]!;
    return e;
  }
}

// y ≈ Σ θ_i·x_i by least squares over observations whose weight decays by FORGET each time (normal equations,
// solved by Gaussian elimination with partial pivoting).
class LeastSquares {
  private readonly xx: number[][];
  private readonly xy: number[];
  private w = 0;

  constructor(readonly n: number) {
    this.xx = Array.from({ length: n }, () => new Array<number>(n).fill(0));
    this.xy = new Array<number>(n).fill(0);
  }

  observe(x: readonly number[], y: number): void {
    this.w = FORGET * this.w + 1;
    for (let i = 0; i < this.n; i++) {
      this.xy[i] = FORGET * this.xy[i]! + x[i]! * y;
      for (let j = 0; j < this.n; j++) this.xx[i]![j] = FORGET * this.xx[i]![j]! + x[i]! * x[j]!;
    }
  }

  // θ, or undefined while the observations do not tell the terms apart (a pivot vanishes against its diagonal).
  fit(): number[] | undefined {
    const n = this.n;
    if (this.w < 2 * n) return undefined;
    const m = this.xx.map((row, i) => [...row, this.xy[i]!]);
    for (let c = 0; c < n; c++) {
      let p = c;
      for (let r = c + 1; r < n; r++) if (Math.abs(m[r]![c]!) > Math.abs(m[p]![c]!)) p = r;
      [m[c], m[p]] = [m[p]!, m[c]!];
      if (!(Math.abs(m[c]![c]!) > 1e-9 * this.xx[c]![c]!)) return undefined;
      for (let r = 0; r < n; r++) {
        if (r === c) continue;
        const f = m[r]![c]! / m[c]![c]!;
        for (let k = c; k <= n; k++) m[r]![k]! -= f * m[c]![k]!;
      }
    }
    return m.map((row, i) => row[n]! / row[i]!);
  }
}

// Chooses draft lengths from the costs the engine measures (see the top of the file).
export class SpeculationPolicy {
  private readonly step = new LeastSquares(4); // ms by [1, rows, drafting, drafts]
  private readonly engineRates: Speculation; // acceptance over every sequence's cycles: a new sequence's prior

  constructor(maxDraft: number) {
    this.engineRates = new Speculation(maxDraft);
  }

  // A new sequence's state.
  start(seeded: boolean): Speculation {
    return new Speculation(this.engineRates.maxDraft, seeded, this.engineRates.cycles > 0 ? this.engineRates.rates : undefined);
  }

  // A verify cycle of `s`: its own counts and the engine's rates.
  record(s: Speculation, verified: number, accepted: number): void {
    s.record(verified, accepted);
    this.engineRates.record(verified, accepted);
  }

  // A decoding step of `rows` rows that drafted `drafts` tokens for the next.
  observeStep(rows: number, drafts: number, ms: number): void {
    this.step.observe([1, rows, drafts > 0 ? 1 : 0, drafts], ms);
  }

  // The learned costs (ms): a step = a + b·rows + c·[drafts > 0] + d·drafts (none negative); undefined while still
  // learning.
  costs(): { a: number; b: number; c: number; d: number } | undefined {
    const fit = this.step.fit();
    if (!fit) return undefined;
    const [a, b, c, d] = fit.map((v) => Math.max(0, v)) as [number, number, number, number];
    return { a, b, c, d };
  }

  // k for each sequence (before the caps of the sequence and of the step).
  // Tokens per ms of the decoding steps that drafted and of those that did not (exponential averages).
  observeDecode(tokens: number, ms: number, drafted: boolean): void {
    const rate = tokens / Math.max(ms, 1e-3);
    if (drafted) this.draftedRate = this.draftedRate === undefined ? rate : (1 - GATE_ALPHA) * this.draftedRate + GATE_ALPHA * rate;
    else this.plainRate = this.plainRate === undefined ? rate : (1 - GATE_ALPHA) * this.plainRate + GATE_ALPHA * rate;
  }

  private draftedRate: number | undefined;
  private plainRate: number | undefined;
  private steps = 0;

  plan(states: readonly Speculation[]): number[] {
    const costs = this.costs();
    const n = states.length;
    /* the gate: whatever the cost model says, greedy sequences stop drafting while drafting steps deliver fewer tokens
     * per ms than plain ones; every GATE_PROBE-th step runs the other way to keep both rates current */
    const probe = ++this.steps % GATE_PROBE === 0;
    const gated = this.draftedRate !== undefined && this.plainRate !== undefined && this.draftedRate < this.plainRate;
    const plain = this.plainRate === undefined ? this.steps % 4 === 0 : gated !== probe;
    return states.map((s) => {
      if (s.seeded) {
        let k = 0;
        for (let reach = 1; k < s.maxDraft && (reach *= s.rates[k]!) >= MIN_REACH; ) k++;
        if (k === 0 && ++s.idle >= PROBE_EVERY) k = 1;
        if (k > 0) s.idle = 0;
        return k;
      }
      if (plain) return 0;
      if (!costs) return 1 + (s.cycles % s.maxDraft); // learning the costs: every length in turn
      const { a, b, c, d } = costs;
      let best = 0;
      let bestRate = 1 / (a / n + b);
      for (let k = 1; k <= s.maxDraft; k++) {
        const rate = s.expected(k) / ((a + c) / n + b * (k + 1) + d * k);
        if (rate > bestRate) (best = k), (bestRate = rate);
      }
      if (best === 0 && (++s.idle >= PROBE_EVERY || gated)) best = 1; /* a probe (gated: the gate's drafting step) */
      if (best > 0) s.idle = 0;
      return best;
    });
  }
}

// Whether a request speculates with the engine's drafter: "none" turns it off, "auto" or nothing uses it, a named
// drafter is used when it is the one the model has (another one runs without speculation).
export function wantsDraft(req: Pick<GenerateRequest, "draft">, drafter: DrafterSpec | undefined): boolean {
  if (!drafter || req.draft === "none") return false;
  return req.draft === undefined || req.draft === "auto" || req.draft === drafter.kind;
}

// The verify block for `drafts` under a constraint: how many it allows (checkDraft, one draft at a time so the cut
// also falls right after a draft that completes the value: nothing after it is ever emitted; a drafted stop token,
// which no constraint accepts, ends the block before it, and the target's token there may be the stop), how many of
// them count as proposed (one more than allowed when the cut refused a draft: it counts as rejected at its position),
// and the allowed set at each block position. checkDraft leaves the constraint advanced past the allowed drafts;
// applyVerified rolls back the ones the target rejects. Unconstrained drafts are all verified: a stop token among them
// is verified like any token (cutting there would bias sampling) and ends the output when accepted.
export function prepareDrafts(drafts: Int32Array, constraint: TokenConstraint | undefined, vocabSize: number): { nDraft: number; nProposed: number; masks: Uint32Array | null } {
  if (!constraint) return { nDraft: drafts.length, nProposed: drafts.length, masks: null };
  const words = Math.ceil(vocabSize / 32);
  const all = new Uint32Array((drafts.length + 1) * words);
  const mask = (i: number) => all.subarray(i * words, (i + 1) * words);
  let m = 0;
  while (m < drafts.length && checkDraft(constraint, drafts.subarray(m, m + 1), [mask(m), mask(m + 1)]) === 1) {
    m++;
    if (constraint.isComplete()) break;
  }
  if (drafts.length === 0) constraint.fillMask(mask(0));
  return { nDraft: m, nProposed: Math.min(m + 1, drafts.length), masks: all.subarray(0, (m + 1) * words) };
}

// The tokens a verify block emits, in order: the accepted drafts, then the target's own. Rolls the constraint
// back over the drafts it took that were rejected (the caller then accepts the last token into it).
export function applyVerified(result: SampledToken, nDraft: number, constraint: TokenConstraint | undefined): TokenChoice[] {
  const accepted = result.accepted ?? [];
  if (accepted.length > nDraft) throw new Error(`verify accepted ${accepted.length} of ${nDraft} drafts`);
  constraint?.rollback(nDraft - accepted.length);
  return [...accepted, { token: result.token, logprob: result.logprob, top: result.top }];
}
