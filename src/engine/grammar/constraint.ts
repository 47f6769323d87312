// Per-sequence constraints over a compiled grammar (TokenConstraint, src/engine/types.ts), the thinking wrapper,
// and the draft check for speculative decoding. One constraint per sequence; batching needs nothing more.
import type { TokenConstraint } from "../types.ts";
import type { Bounds } from "./bounds.ts";
import type { ThinkText } from "./think-text.ts";
import { BOUNDARY, type Utf8Table } from "./utf8.ts";
import type { TokenMatcher } from "./grammar-pool.ts";

// What a compiled grammar shares with all of its sequences.
export type MaskPolicy = {
  size: number; // vocabulary (logits) size
  stopTokens: number[];
  // Tokens the grammar could use but that must not appear: added tokens such as <think> or <tool_call> whose text a
  // JSON string could hold (the output parser would take them for markup). Their text stays writable with
  // ordinary tokens.
  blocked: number[];
  utf8: Utf8Table;
  thinkText: () => ThinkText; // throws for a vocabulary without a </think> token
};

const bit = (mask: Uint32Array, t: number): boolean => ((mask[t >>> 5]! >>> (t & 31)) & 1) === 1;

export class GrammarConstraint implements TokenConstraint {
  private readonly mask: Uint32Array;
  private readonly stopWords: Map<number, number>; // word index → bits of stop tokens in it
  private fresh = false; // mask holds the allowed set of the current state
  private readonly utf8States: number[] = []; // UTF-8 decoder state after each accepted token
  private released = false;

  constructor(
    private readonly matcher: TokenMatcher,
    private readonly policy: MaskPolicy,
    private readonly bounds: Bounds | null, // the counts the grammar leaves open (bounds.ts)
  ) {
    this.mask = new Uint32Array(Math.ceil(policy.size / 32));
    this.stopWords = new Map();
    for (const t of policy.stopTokens) this.stopWords.set(t >>> 5, (this.stopWords.get(t >>> 5) ?? 0) | (1 << (t & 31)));
  }

  get acceptedTokens(): number {
    return this.utf8States.length;
  }

  private get utf8State(): number {
    return this.utf8States[this.utf8States.length - 1] ?? BOUNDARY;
  }

  fillMask(mask: Uint32Array): void {
    mask.set(this.current());
  }

  // A stop token is refused: it ends the output without being part of it (the engine ends the sequence on one
  // before asking), and a matcher that took one is terminated, which xgrammar aborts on at the next mask. So a
  // drafted stop token ends the drafts the constraint allows, and the target's own token there may be the stop.
  accept(token: number): boolean {
    if (this.policy.stopTokens.includes(token) || this.policy.blocked.includes(token)) return false;
    const utf8 = this.policy.utf8.after(this.utf8State, token);
    if (utf8 < 0 || (this.bounds && !this.bounds.accept(token))) return false;
    if (!this.matcher.accept(token)) {
      this.bounds?.rollback(1);
      return false;
    }
    this.utf8States.push(utf8);
    this.fresh = false;
    return true;
  }

  rollback(n: number): void {
    if (n < 0 || n > this.utf8States.length) throw new RangeError(`rollback(${n}) with ${this.utf8States.length} tokens accepted`);
    if (n === 0) return;
    this.matcher.rollback(n);
    this.bounds?.rollback(n);
    this.utf8States.length -= n;
    this.fresh = false;
  }

  // Complete when nothing but a stop token may follow. A state that allows no token at all is a bug (the grammar and
  // the counts disagree): it throws, so the sequence ends with an error rather than with an invalid value.
  isComplete(): boolean {
    const mask = this.current();
    let stop = false;
    for (let w = 0; w < mask.length; w++) {
      const stops = this.stopWords.get(w) ?? 0;
      if ((mask[w]! & ~stops) !== 0) return false;
      if ((mask[w]! & stops) !== 0) stop = true;
    }
    if (!stop) throw new Error("structured output: no token can continue the output");
    return true;
  }

  // Idempotent: whoever ends the sequence may call it.
  release(): void {
    if (this.released) return;
    this.released = true;
    this.matcher.dispose();
  }

  private current(): Uint32Array {
    if (!this.fresh) {
      this.matcher.fillMask(this.mask);
      for (const t of this.policy.blocked) this.mask[t >>> 5]! &= ~(1 << (t & 31));
      this.policy.utf8.restrict(this.mask, this.utf8State);
      this.bounds?.restrict(this.mask);
      this.fresh = true;
    }
    return this.mask;
  }
}

// Reasoning stays free: until the </think> token every token is allowed except the stop tokens (an answer must
// follow) and those that would spell "</think>" in other tokens (think-text.ts); from </think> on, the grammar
// applies. Rollback may cross back into the reasoning.
export class ThinkingConstraint implements TokenConstraint {
  private thinking = true;
  private readonly textStates: number[] = []; // per token accepted while thinking (</think> included): the text's match of "</think>" after it
  private readonly free: Uint32Array;

  constructor(
    private readonly inner: GrammarConstraint,
    private readonly thinkEnd: number,
    policy: MaskPolicy,
    private readonly text: ThinkText,
  ) {
    this.free = new Uint32Array(Math.ceil(policy.size / 32)).fill(0xffffffff);
    const tail = policy.size % 32;
    if (tail) this.free[this.free.length - 1] = (1 << tail) - 1;
    for (const t of policy.stopTokens) this.free[t >>> 5]! &= ~(1 << (t & 31));
  }

  private get textState(): number {
    return this.textStates[this.textStates.length - 1] ?? 0;
  }

  fillMask(mask: Uint32Array): void {
    if (!this.thinking) return this.inner.fillMask(mask);
    const completing = this.text.completing[this.textState]!;
    for (let w = 0; w < mask.length; w++) mask[w] = this.free[w]! & ~completing[w]!;
  }

  accept(token: number): boolean {
    if (!this.thinking) return this.inner.accept(token);
    if (!bit(this.free, token) || bit(this.text.completing[this.textState]!, token)) return false;
    this.textStates.push(token === this.thinkEnd ? 0 : this.text.after(this.textState, token));
    if (token === this.thinkEnd) this.thinking = false;
    return true;
  }

  rollback(n: number): void {
    const answer = this.thinking ? 0 : this.inner.acceptedTokens;
    if (n <= answer) return this.inner.rollback(n);
    if (n - answer > this.textStates.length) throw new RangeError(`rollback(${n}) with ${answer + this.textStates.length} tokens accepted`);
    this.inner.rollback(answer);
    this.textStates.length -= n - answer;
    this.thinking = true;
  }

  isComplete(): boolean {
    return !this.thinking && this.inner.isComplete();
  }

  release(): void {
    this.inner.release();
  }
}

// Checks a drafted continuation against the constraint before verification. Fills masks[i] (when given; at least
// drafted.length + 1 of them) with the allowed set before drafted[i], and advances past each draft token the
// constraint allows. Returns k, the accepted prefix length: masks[0..k] are filled (masks[k] is the position after
// the last accepted draft). After the target model keeps j <= k of the drafts, call rollback(k - j).
export function checkDraft(c: TokenConstraint, drafted: ArrayLike<number>, masks?: Uint32Array[]): number {
  if (masks && masks.length < drafted.length + 1) throw new RangeError("checkDraft needs drafted.length + 1 masks");
  let k = 0;
  for (; k < drafted.length; k++) {
    const t = drafted[k]!;
    if (masks) {
      c.fillMask(masks[k]!);
      if (!bit(masks[k]!, t)) break;
    }
    if (!c.accept(t)) break;
  }
  if (masks && k === drafted.length) c.fillMask(masks[k]!);
  return k;
}
