// A pattern's DFA over code points, with the lengths at which a match can still end from each state, so that a
// length bound can be counted beside a grammar that writes the pattern alone (bounds.ts). The count must never let
// the output reach a point the pattern cannot close within the room left (a slug at its maxLength right after a
// "-"), so each character is allowed only when, from the state it leads to, some completion of the match ends the
// string at a length within minLength..maxLength.
import * as cs from "./charset.ts";
import type { Regex } from "./regex.ts";

export type LengthDfa = {
  starts: Int32Array; // the alphabet's classes: class k is the code points starts[k] .. starts[k+1]-1
  classes: number;
  delta: Int32Array; // state * classes + class → state, -1 = no match continues
  accept: Uint8Array;
  horizon: number; // lengths 0..horizon are tabled
  next: Int32Array; // state * (horizon + 1) + a → the fewest characters ≥ a that end a match from the state, NONE if none
  min: number;
  max: number; // Infinity when unbounded
  farthest: number; // the most characters any state that can still end a match needs to end one
};

const NONE = 0x7fffffff;
// Limits on the work a schema may ask for: states of the pattern's automata, and the completion table.
const MAX_NFA = 20_000;
const MAX_STATES = 2_000;
const MAX_TABLE = 8_000_000;

export class LengthDfaError extends Error {
  override name = "LengthDfaError";
}

type NfaNode = { eps: number[]; set: CharSet | null; to: number };
type CharSet = cs.CharSet;

class Nfa {
  readonly nodes: NfaNode[] = [];
  add(): number {
    if (this.nodes.length >= MAX_NFA) throw new LengthDfaError(`the pattern's automaton has more than ${MAX_NFA} states`);
    return this.nodes.push({ eps: [], set: null, to: -1 }) - 1;
  }
  // Builds `re` from `from`; returns the node where it ends.
  build(re: Regex, from: number): number {
    switch (re.t) {
      case "set": {
        const to = this.add();
        const node = this.nodes[from]!.set === null && this.nodes[from]!.to < 0 ? from : this.epsTo(from);
        this.nodes[node]!.set = re.set;
        this.nodes[node]!.to = to;
        return to;
      }
      case "seq":
        return re.items.reduce((at, item) => this.build(item, at), from);
      case "alt": {
        const end = this.add();
        for (const o of re.options) this.nodes[this.build(o, this.epsTo(from))]!.eps.push(end);
        return end;
      }
      case "rep": {
        let at = from;
        for (let i = 0; i < re.min; i++) at = this.build(re.item, at);
        if (re.max === null) {
          const loop = this.epsTo(at);
          const end = this.add();
          this.nodes[loop]!.eps.push(end);
          this.nodes[this.build(re.item, this.epsTo(loop))]!.eps.push(loop);
          return end;
        }
        const end = this.add();
        for (let i = re.min; i < re.max; i++) {
          this.nodes[at]!.eps.push(end);
          at = this.build(re.item, this.epsTo(at));
        }
        this.nodes[at]!.eps.push(end);
        return end;
      }
    }
  }
  private epsTo(from: number): number {
    const n = this.add();
    this.nodes[from]!.eps.push(n);
    return n;
  }
}

function sets(re: Regex, out: CharSet[]): CharSet[] {
  if (re.t === "set") out.push(re.set);
  else if (re.t === "seq") re.items.forEach((i) => sets(i, out));
  else if (re.t === "alt") re.options.forEach((o) => sets(o, out));
  else sets(re.item, out);
  return out;
}

// The DFA of whole matches of `re`, tabled for strings of min..max characters. Throws LengthDfaError when the
// pattern needs more states than the limits allow.
export function lengthDfa(re: Regex, min: number, max: number): LengthDfa {
  const cuts = new Set([0, cs.MAX_CODE_POINT + 1]);
  for (const set of sets(re, [])) for (const [a, b] of set) cuts.add(a).add(b + 1);
  const starts = Int32Array.from([...cuts].sort((a, b) => a - b));
  const classes = starts.length - 1;

  const nfa = new Nfa();
  const start = nfa.add();
  const final = nfa.build(re, start);
  const { nodes } = nfa;
  // Which classes each node's set covers (a class lies wholly inside or outside every set).
  const covers = nodes.map((n) => (n.set ? classesOf(n.set, starts) : null));

  const closure = (seeds: number[]): number[] => {
    const seen = new Set(seeds);
    const stack = [...seeds];
    while (stack.length) for (const e of nodes[stack.pop()!]!.eps) if (!seen.has(e)) seen.add(e), stack.push(e);
    return [...seen].sort((a, b) => a - b);
  };
  const ids = new Map<string, number>();
  const states: number[][] = [];
  const intern = (set: number[]): number => {
    const key = set.join(",");
    let id = ids.get(key);
    if (id === undefined) {
      if (states.length >= MAX_STATES) throw new LengthDfaError(`the pattern's DFA has more than ${MAX_STATES} states`);
      ids.set(key, (id = states.push(set) - 1));
    }
    return id;
  };
  intern(closure([start]));
  const rows: Int32Array[] = [];
  for (let s = 0; s < states.length; s++) {
    const targets: number[][] = Array.from({ length: classes }, () => []);
    for (const n of states[s]!) for (const k of covers[n] ?? []) targets[k]!.push(nodes[n]!.to);
    rows.push(Int32Array.from(targets, (t) => (t.length ? intern(closure(t)) : -1)));
  }
  const S = states.length;
  const delta = new Int32Array(S * classes);
  rows.forEach((r, s) => delta.set(r, s * classes));
  const accept = Uint8Array.from(states, (set) => (set.includes(final) ? 1 : 0));

  // Past min + S characters, a longer completion can always be shortened by a cycle, so that horizon suffices.
  const horizon = max === Infinity ? min + S : max;
  if (S * (horizon + 1) > MAX_TABLE || S * classes * (horizon + 1) > 8 * MAX_TABLE) {
    throw new LengthDfaError(`the pattern's ${S} states times the length bound exceed what is tabled`);
  }
  const W = horizon + 1;
  const reach = new Uint8Array(S * W); // reach[s * W + L]: a match ends after exactly L more characters
  for (let s = 0; s < S; s++) reach[s * W] = accept[s]!;
  for (let L = 1; L <= horizon; L++) {
    for (let s = 0; s < S; s++) {
      for (let k = 0; k < classes; k++) {
        const t = delta[s * classes + k]!;
        if (t >= 0 && reach[t * W + L - 1]) {
          reach[s * W + L] = 1;
          break;
        }
      }
    }
  }
  const next = new Int32Array(S * W);
  for (let s = 0; s < S; s++) {
    let n = NONE;
    for (let L = horizon; L >= 0; L--) next[s * W + L] = n = reach[s * W + L] ? L : n;
  }
  // Fewest characters to a match's end from each state (breadth-first from the accepting states, backwards).
  const dist = Int32Array.from(accept, (a) => (a ? 0 : NONE));
  const queue = [...accept.keys()].filter((s) => accept[s]);
  const into: number[][] = Array.from({ length: S }, () => []);
  for (let s = 0; s < S; s++) for (let k = 0; k < classes; k++) if (delta[s * classes + k]! >= 0) into[delta[s * classes + k]!]!.push(s);
  for (let i = 0; i < queue.length; i++) {
    for (const p of into[queue[i]!]!) if (dist[p] === NONE) (dist[p] = dist[queue[i]!]! + 1), queue.push(p);
  }
  const farthest = Math.max(0, ...dist.filter((x) => x !== NONE));
  return { starts, classes, delta, accept, horizon, next, min, max, farthest };
}

function classesOf(set: CharSet, starts: Int32Array): number[] {
  const out: number[] = [];
  for (const [a, b] of set) for (let k = classOf(starts, a); k < starts.length - 1 && starts[k]! <= b; k++) out.push(k);
  return out;
}

export function classOf(starts: Int32Array, cp: number): number {
  let lo = 0;
  let hi = starts.length - 2;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (starts[mid]! <= cp) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// The state after one more character, -1 when no match continues that way.
export function step(d: LengthDfa, state: number, cp: number): number {
  return d.delta[state * d.classes + classOf(d.starts, cp)]!;
}

// Whether a string of n characters so far, in `state`, can still end as a match within min..max characters.
export function feasible(d: LengthDfa, state: number, n: number): boolean {
  if (state < 0 || n > d.max) return false;
  const a = Math.max(0, d.min - n);
  const L = d.next[state * (d.horizon + 1) + a]!;
  return L !== NONE && n + L <= d.max;
}

// Whether some character in lo..hi (one not yet fully read) leads from `state` to a feasible state at n characters.
export function feasibleIn(d: LengthDfa, state: number, n: number, lo: number, hi: number): boolean {
  if (lo > hi) return false;
  for (let k = classOf(d.starts, lo); k < d.classes && d.starts[k]! <= hi; k++) {
    if (feasible(d, d.delta[state * d.classes + k]!, n)) return true;
  }
  return false;
}
