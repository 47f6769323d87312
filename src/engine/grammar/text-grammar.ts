// Free text watched for substrings, as EBNF: an Aho–Corasick automaton over the characters that occur in the
// watched strings (every other character returns to the start state), one rule per state. A watched string either
// forbids itself, or ends the text and continues with another expression (a closing tag; the start of a tool call).
// When one watched string ends inside another (forbidden "</parameter>" inside the terminator "\n</parameter>"),
// the longer one decides.
import * as cs from "./charset.ts";
import { charClass, lit, type Rules } from "./ebnf.ts";

export type Watch = { text: string; then: string | null }; // then = null: forbidden; else the EBNF that follows

type State = { next: Map<number, number>; fail: number; watch: Watch | null; forbidden: boolean };

// EBNF for text that contains no forbidden string and ends either with a terminating watch string (followed by its
// `then`) or anywhere with `end` after it (null: it cannot end there; '""': it just ends).
export function watchedText(rules: Rules, hint: string, watches: Watch[], end: string | null): string {
  const states: State[] = [{ next: new Map(), fail: 0, watch: null, forbidden: false }];
  for (const w of watches) {
    let s = 0;
    for (const ch of w.text) {
      const c = ch.codePointAt(0)!;
      if (!states[s]!.next.has(c)) {
        states.push({ next: new Map(), fail: 0, watch: null, forbidden: false });
        states[s]!.next.set(c, states.length - 1);
      }
      s = states[s]!.next.get(c)!;
    }
    states[s]!.watch = w;
  }
  const alphabet = [...new Set(watches.flatMap((w) => [...w.text].map((c) => c.codePointAt(0)!)))];
  // Breadth-first: fail links, then each state takes the watched string that ends at it (its own first).
  const order: number[] = [0];
  for (let i = 0; i < order.length; i++) {
    const s = order[i]!;
    for (const [c, t] of states[s]!.next) {
      let f = states[s]!.fail;
      while (f !== 0 && !states[f]!.next.has(c)) f = states[f]!.fail;
      states[t]!.fail = s === 0 ? 0 : (states[f]!.next.get(c) ?? 0);
      order.push(t);
    }
  }
  for (const s of order.slice(1)) {
    const st = states[s]!;
    st.watch ??= states[st.fail]!.watch; // a watched string ending here, if not this state's own
    st.forbidden = st.watch?.then === null;
  }
  const step = (s: number, c: number): number => {
    while (s !== 0 && !states[s]!.next.has(c)) s = states[s]!.fail;
    return states[s]!.next.get(c) ?? 0;
  };
  const asciiOthers = cs.minus([[0, 0x7f]], cs.chars(...alphabet));
  // Every state leaves on a non-ASCII character to the start state (the watched strings are ASCII): one shared
  // rule, so xgrammar precomputes that broad class once instead of once per state (each costs a pass over the vocabulary).
  let nonAscii = "";
  const names = new Map<number, string>();
  const ruleOf = (s: number): string => {
    let name = names.get(s);
    if (name) return name;
    name = rules.reserve(hint);
    names.set(s, name);
    const byTarget = new Map<number, number[]>();
    for (const c of alphabet) {
      const t = step(s, c);
      if (!byTarget.has(t)) byTarget.set(t, []);
      byTarget.get(t)!.push(c);
    }
    const options: string[] = [];
    for (const [t, chars] of byTarget) {
      const st = states[t]!;
      if (st.forbidden || t === 0) continue;
      const first = chars.length === 1 ? lit(String.fromCodePoint(chars[0]!)) : charClass(cs.chars(...chars));
      options.push(st.watch ? `${first} ${st.watch.then}` : `${first} ${ruleOf(t)}`);
    }
    const toStart = cs.union(asciiOthers, cs.chars(...(byTarget.get(0) ?? [])));
    if (s === 0) {
      if (end !== null) options.push(end);
      // The start state loops on every character that leads back to it.
      rules.define(name, `${charClass(cs.union(toStart, cs.minus(cs.ANY, [[0, 0x7f]])))}* (${options.join(" | ") || '""'})`);
    } else {
      nonAscii ||= rules.add(`${hint}_char`, `[^\\u0000-\\u007f] ${ruleOf(0)}`);
      options.push(`${charClass(toStart)} ${ruleOf(0)}`, nonAscii);
      if (end !== null) options.push(end);
      rules.define(name, options.join(" | "));
    }
    return name;
  };
  return ruleOf(0);
}
