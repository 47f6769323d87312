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
// `then`) or, when `canStop`, anywhere.
export function watchedText(rules: Rules, hint: string, watches: Watch[], canStop: boolean): string {
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
  const others = cs.minus(cs.ANY, cs.chars(...alphabet));
  const names = new Map<number, string>();
  const ruleOf = (s: number): string => {
    let name = names.get(s);
    if (name) return name;
    name = rules.reserve(hint);
    names.set(s, name);
    // Group the characters by where they lead; the start state is reached by "any other character" too.
    const byTarget = new Map<number, number[]>();
    for (const c of alphabet) {
      const t = step(s, c);
      if (!byTarget.has(t)) byTarget.set(t, []);
      byTarget.get(t)!.push(c);
    }
    const options: string[] = [];
    const loop: number[] = s === 0 ? (byTarget.get(0) ?? []) : [];
    for (const [t, chars] of byTarget) {
      const st = states[t]!;
      if (st.forbidden || (s === 0 && t === 0)) continue;
      const first = chars.length === 1 ? lit(String.fromCodePoint(chars[0]!)) : charClass(cs.chars(...chars));
      options.push(st.watch ? `${first} ${st.watch.then}` : `${first} ${ruleOf(t)}`);
    }
    if (s !== 0) {
      const back = cs.union(others, cs.chars(...(byTarget.get(0) ?? [])));
      options.push(`${charClass(back)} ${ruleOf(0)}`);
    }
    if (canStop) options.push('""');
    const body = options.length ? options.join(" | ") : '""';
    if (s === 0) {
      const loopClass = charClass(cs.union(others, cs.chars(...loop)));
      rules.define(name, `${loopClass}* (${body})`);
    } else rules.define(name, body);
    return name;
  };
  return ruleOf(0);
}
