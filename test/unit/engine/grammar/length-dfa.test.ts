// The pattern DFA that length counting follows: for every prefix of every string over a small alphabet, `feasible`
// says exactly whether some continuation matches the pattern whole within minLength..maxLength (checked by brute
// force with the pattern as ajv runs it).
import { describe, expect, test } from "bun:test";
import { feasible, lengthDfa, LengthDfaError, step } from "../../../../src/engine/grammar/length-dfa.ts";
import { parseRegex } from "../../../../src/engine/grammar/regex.ts";

function strings(alphabet: string[], upTo: number): string[] {
  const out = [""];
  for (let i = 0; out[i] !== undefined && out[i]!.length < upTo; i++) for (const c of alphabet) out.push(out[i]! + c);
  return out;
}

const cases: { pattern: string; min: number; max: number; alphabet: string[] }[] = [
  { pattern: "^[a-z]+(-[a-z]+)*$", min: 0, max: 5, alphabet: ["a", "-", "Z"] },
  { pattern: "^\\S(.*\\S)?$", min: 3, max: 4, alphabet: ["a", " ", "\n"] },
  { pattern: "^(ab)+$", min: 3, max: 7, alphabet: ["a", "b"] },
  { pattern: "^(ab|c{2,3})*x?$", min: 2, max: 6, alphabet: ["a", "b", "c", "x"] },
  { pattern: "^a[ab]{0,2}b$", min: 0, max: Infinity, alphabet: ["a", "b"] },
  { pattern: "(ab)+", min: 5, max: Infinity, alphabet: ["a", "b"] },
];

describe("feasible matches brute force", () => {
  for (const { pattern, min, max, alphabet } of cases) {
    test(`${pattern} within ${min}..${max}`, () => {
      const dfa = lengthDfa(parseRegex(pattern), min, max);
      const whole = new RegExp(`^(?:${pattern.replace(/^\^|\$$/g, "")})$`, "u");
      // Every completion these small automata can make is found within 10 characters (a longer one repeats a cycle).
      const ok = strings(alphabet, Math.min(max, 10)).filter((s) => whole.test(s) && s.length >= min && s.length <= max);
      for (const prefix of strings(alphabet, Math.min(max, 6))) {
        let state = 0;
        for (const ch of prefix) state = state < 0 ? -1 : step(dfa, state, ch.codePointAt(0)!);
        const expected = ok.some((s) => s.startsWith(prefix));
        expect([prefix, state >= 0 && feasible(dfa, state, prefix.length)]).toEqual([prefix, expected]);
      }
    });
  }
});

test("a pattern whose DFA is too large is refused", () => {
  expect(() => lengthDfa(parseRegex("^[ab]*a[ab]{20}$"), 0, 64)).toThrow(LengthDfaError);
});
