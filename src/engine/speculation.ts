// Speculative decoding in the engine: which sequences draft, how many tokens, and what a verify block's result
// means for the sequence. The drafter and the acceptance rule run natively (native/api/speculate.c: logits of a
// 248K vocabulary never reach JavaScript); this file is the policy around them.
//
// One cycle of a decoding sequence (last token t at position n = computed, not yet in the cache):
//
//   schedule   k = draftLength()  (≤ the drafter's maximum, ≤ tokens left − 1, within the step's budget)
//   draft      the runner proposes d1 … dk
//   prepare    a grammar keeps the prefix it allows (checkDraft) and gives one mask per block position; the block
//              [t, d1 … dm] is verified, m ≤ k (a refused draft counts as rejected at its position)
//   step       the target accepts a ≤ m drafts and picks the token after them (argmax, or rejection sampling)
//   apply      computed += a + 1; the constraint rolls back the m − a drafts it took; a + 1 tokens are emitted
//
// Adaptive draft length: an exponential average of the drafts accepted per cycle (α = 0.3, starting at the
// maximum) sets the next k = ceil(average) + 1, capped by the maximum. A sequence whose drafts keep failing drafts
// one token a cycle (the cheapest probe: a two-row verify block); one whose drafts are all taken drafts the maximum.
import { checkDraft } from "./grammar/index.ts";
import type { DrafterSpec, SampledToken, TokenChoice } from "./runner.ts";
import type { GenerateRequest, TokenConstraint } from "./types.ts";

const ALPHA = 0.3;

// Per-sequence speculation state and counters (the counters feed EngineStats and the request's done event).
export class Speculation {
  cycles = 0; // verify blocks run
  drafted = 0; // drafts verified (after any grammar cut)
  accepted = 0; // drafts accepted
  private average: number;

  constructor(readonly maxDraft: number) {
    this.average = maxDraft;
  }

  // Drafts to ask for in the next cycle, before the caps of the sequence and the step.
  draftLength(): number {
    return Math.min(this.maxDraft, Math.ceil(this.average) + 1);
  }

  record(verified: number, accepted: number): void {
    this.cycles++;
    this.drafted += verified;
    this.accepted += accepted;
    this.average = (1 - ALPHA) * this.average + ALPHA * accepted;
  }
}

// Whether a request speculates with the engine's drafter: "none" turns it off, "auto" or nothing uses it, a named
// drafter is used when it is the one the model has (another one runs without speculation).
export function wantsDraft(req: Pick<GenerateRequest, "draft">, drafter: DrafterSpec | undefined): boolean {
  if (!drafter || req.draft === "none") return false;
  return req.draft === undefined || req.draft === "auto" || req.draft === drafter.kind;
}

// The verify block for `drafts` under a constraint: how many it allows (checkDraft, one draft at a time so the cut
// also falls right after a draft that completes the value: nothing after it is ever emitted), and the allowed set at
// each block position. checkDraft leaves the constraint advanced past the allowed drafts; applyVerified rolls back
// the ones the target rejects. Unconstrained drafts are all verified: a stop token among them is verified like any
// token (cutting there would bias sampling) and ends the output when accepted.
export function prepareDrafts(drafts: Int32Array, constraint: TokenConstraint | undefined, vocabSize: number): { nDraft: number; masks: Uint32Array | null } {
  if (!constraint) return { nDraft: drafts.length, masks: null };
  const words = Math.ceil(vocabSize / 32);
  const all = new Uint32Array((drafts.length + 1) * words);
  const mask = (i: number) => all.subarray(i * words, (i + 1) * words);
  let m = 0;
  while (m < drafts.length && checkDraft(constraint, drafts.subarray(m, m + 1), [mask(m), mask(m + 1)]) === 1) {
    m++;
    if (constraint.isComplete()) break;
  }
  if (drafts.length === 0) constraint.fillMask(mask(0));
  return { nDraft: m, masks: all.subarray(0, (m + 1) * words) };
}

// The tokens a verify block emits, in order: the accepted drafts, then the target's own. Rolls the constraint
// back over the drafts it took that were rejected (the caller then accepts the last token into it).
export function applyVerified(result: SampledToken, nDraft: number, constraint: TokenConstraint | undefined): TokenChoice[] {
  const accepted = result.accepted ?? [];
  if (accepted.length > nDraft) throw new Error(`verify accepted ${accepted.length} of ${nDraft} drafts`);
  constraint?.rollback(nDraft - accepted.length);
  return [...accepted, { token: result.token, logprob: result.logprob, top: result.top }];
}
