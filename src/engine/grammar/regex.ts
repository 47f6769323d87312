// JSON Schema `pattern` (ECMAScript syntax, `u` flag, as ajv runs it) → EBNF, for the subset a context-free grammar
// can hold: literals, classes, `.`, \d\w\s and their negations, groups, alternation, greedy or lazy quantifiers.
// Lookaround, backreferences, word boundaries and Unicode property escapes are refused with the offset.
//
// The grammar generates whole matches of the pattern. JSON Schema patterns are unanchored (a match anywhere), so a
// whole match always satisfies them; `^` and `$` are accepted at the ends of the top-level alternatives only.
// Bounded repetitions the grammar writes are capped (MAX_REPEAT): xgrammar precomputes token masks for every position
// of a bounded repetition at compile time, a cost per position that a broad class over a large vocabulary makes heavy
// (BENCHMARKS.md, "Grammar"). Larger bounds are parsed; schema.ts has them counted beside the grammar where it can
// (bounds.ts) and refuses the rest.
import * as cs from "./charset.ts";
import type { CharSet } from "./charset.ts";
import { charSetParts, lit, partsToEbnf, starOf, type SetParts } from "./ebnf.ts";

export const MAX_REPEAT = 32;

export type Regex =
  | { t: "set"; set: CharSet }
  | { t: "seq"; items: Regex[] }
  | { t: "alt"; options: Regex[] }
  | { t: "rep"; item: Regex; min: number; max: number | null };

export class RegexError extends Error {
  override name = "RegexError";
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} (at offset ${offset})`);
  }
}

const SYNTAX = "^$\\.*+?()[]{}|/";

class Parser {
  private i = 0;
  constructor(private readonly src: string) {}

  parse(): Regex {
    const re = this.disjunction(true);
    if (this.i < this.src.length) throw new RegexError(`unexpected "${this.src[this.i]}"`, this.i);
    return re;
  }

  private peek(s = ""): boolean {
    return s ? this.src.startsWith(s, this.i) : this.i < this.src.length;
  }

  private disjunction(top: boolean): Regex {
    const options = [this.alternative(top)];
    while (this.peek("|")) {
      this.i++;
      options.push(this.alternative(top));
    }
    return options.length === 1 ? options[0]! : { t: "alt", options };
  }

  private alternative(top: boolean): Regex {
    const items: Regex[] = [];
    if (top && this.peek("^")) this.i++;
    while (this.peek() && !this.peek("|") && !this.peek(")")) {
      if (this.peek("$")) {
        const at = this.i++;
        if (!top || (this.peek() && !this.peek("|"))) throw new RegexError("`$` is supported only at the end of the pattern", at);
        break;
      }
      if (this.peek("^")) throw new RegexError("`^` is supported only at the start of the pattern", this.i);
      items.push(this.quantified(this.atom()));
    }
    return items.length === 1 ? items[0]! : { t: "seq", items };
  }

  private quantified(item: Regex): Regex {
    const at = this.i;
    let min: number;
    let max: number | null;
    const c = this.src[this.i];
    if (c === "*" || c === "+" || c === "?") {
      this.i++;
      [min, max] = c === "*" ? [0, null] : c === "+" ? [1, null] : [0, 1];
    } else if (c === "{") {
      const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.i));
      if (!m) throw new RegexError("malformed {n,m} quantifier", at);
      this.i += m[0].length;
      min = Number(m[1]);
      max = m[2] === undefined ? min : m[3] ? Number(m[3]) : null;
      if (max !== null && max < min) throw new RegexError("quantifier {n,m} with m < n", at);
    } else return item;
    if (this.peek("?")) this.i++; // lazy: the same language
    return { t: "rep", item, min, max };
  }

  private atom(): Regex {
    const at = this.i;
    const c = this.src[this.i]!;
    if (c === "(") {
      this.i++;
      if (this.peek("?=") || this.peek("?!") || this.peek("?<=") || this.peek("?<!")) {
        throw new RegexError("lookahead and lookbehind are not supported", at);
      }
      if (this.peek("?:")) this.i += 2;
      else if (this.peek("?<")) {
        const end = this.src.indexOf(">", this.i);
        if (end < 0) throw new RegexError("malformed group name", at);
        this.i = end + 1;
      }
      const inner = this.disjunction(false);
      if (!this.peek(")")) throw new RegexError("unclosed group", at);
      this.i++;
      return inner;
    }
    if (c === "[") return { t: "set", set: this.charClass() };
    if (c === ".") {
      this.i++;
      return { t: "set", set: cs.minus(cs.ANY, cs.LINE_TERMINATORS) };
    }
    if (c === "\\") return { t: "set", set: this.escape(false) };
    if ("*+?{}".includes(c)) throw new RegexError(`nothing to repeat before "${c}"`, at);
    if (c === ")" || c === "]") throw new RegexError(`unbalanced "${c}"`, at);
    const cp = this.src.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return { t: "set", set: cs.chars(cp) };
  }

  private charClass(): CharSet {
    const at = this.i++;
    const negated = this.peek("^");
    if (negated) this.i++;
    const parts: CharSet[] = [];
    while (!this.peek("]")) {
      if (!this.peek()) throw new RegexError("unclosed character class", at);
      const lo = this.classAtom();
      if (this.peek("-") && !this.src.startsWith("-]", this.i)) {
        this.i++;
        const hi = this.classAtom();
        if (lo.length !== 1 || hi.length !== 1 || lo[0]![0] !== lo[0]![1] || hi[0]![0] !== hi[0]![1]) {
          throw new RegexError("a class escape cannot bound a range", at);
        }
        if (hi[0]![0] < lo[0]![0]) throw new RegexError("range out of order in character class", at);
        parts.push([[lo[0]![0], hi[0]![0]]]);
      } else parts.push(lo);
    }
    this.i++;
    const set = cs.withoutSurrogates(cs.union(...parts));
    return negated ? cs.complement(set) : set;
  }

  private classAtom(): CharSet {
    if (this.peek("\\")) return this.escape(true);
    const cp = this.src.codePointAt(this.i)!;
    this.i += cp > 0xffff ? 2 : 1;
    return cs.chars(cp);
  }

  private escape(inClass: boolean): CharSet {
    const at = this.i;
    this.i++;
    const c = this.src[this.i];
    if (c === undefined) throw new RegexError("pattern ends with a backslash", at);
    this.i++;
    const simple: Record<string, CharSet> = {
      d: cs.DIGIT, D: cs.complement(cs.DIGIT), w: cs.WORD, W: cs.complement(cs.WORD), s: cs.SPACE, S: cs.complement(cs.SPACE),
      t: cs.chars(9), n: cs.chars(10), v: cs.chars(11), f: cs.chars(12), r: cs.chars(13),
    };
    if (simple[c]) return simple[c];
    if (c === "b" && inClass) return cs.chars(8);
    if (c === "b" || c === "B") throw new RegexError("word boundary assertions are not supported", at);
    if (c === "0" && !/[0-9]/.test(this.src[this.i] ?? "")) return cs.chars(0);
    if (/[1-9]/.test(c) || c === "k") throw new RegexError("backreferences are not supported", at);
    if (c === "p" || c === "P") throw new RegexError("Unicode property escapes are not supported", at);
    if (c === "c") {
      const letter = this.src[this.i];
      if (!letter || !/[A-Za-z]/.test(letter)) throw new RegexError("malformed \\c escape", at);
      this.i++;
      return cs.chars(letter.charCodeAt(0) % 32);
    }
    if (c === "x" || c === "u") {
      const m = c === "x" ? /^[0-9a-fA-F]{2}/.exec(this.src.slice(this.i)) : /^(?:[0-9a-fA-F]{4}|\{[0-9a-fA-F]{1,6}\})/.exec(this.src.slice(this.i));
      if (!m) throw new RegexError(`malformed \\${c} escape`, at);
      this.i += m[0].length;
      let cp = parseInt(m[0].replace(/[{}]/g, ""), 16);
      // A surrogate pair written as two \u escapes is one code point.
      const low = /^\\u(d[c-f][0-9a-f]{2})/i.exec(this.src.slice(this.i));
      if (c === "u" && cp >= 0xd800 && cp <= 0xdbff && low) {
        cp = 0x10000 + ((cp - 0xd800) << 10) + (parseInt(low[1]!, 16) - 0xdc00);
        this.i += 6;
      }
      if (cp > cs.MAX_CODE_POINT || (cp >= 0xd800 && cp <= 0xdfff)) throw new RegexError("escape is not a Unicode scalar value", at);
      return cs.chars(cp);
    }
    if (SYNTAX.includes(c) || (inClass && c === "-")) return cs.chars(c.charCodeAt(0));
    throw new RegexError(`unsupported escape \\${c}`, at);
  }
}

// The largest bound of any bounded repetition in the regex (0 when there is none).
export function largestRepeat(re: Regex): number {
  switch (re.t) {
    case "set":
      return 0;
    case "seq":
      return Math.max(0, ...re.items.map(largestRepeat));
    case "alt":
      return Math.max(0, ...re.options.map(largestRepeat));
    case "rep":
      return Math.max(re.min, re.max ?? 0, largestRepeat(re.item));
  }
}

// The fewest and most characters a whole match has (max Infinity when unbounded).
export function matchLengths(re: Regex): { min: number; max: number } {
  switch (re.t) {
    case "set":
      return { min: 1, max: 1 };
    case "seq":
      return re.items.map(matchLengths).reduce((a, b) => ({ min: a.min + b.min, max: a.max + b.max }), { min: 0, max: 0 });
    case "alt": {
      const all = re.options.map(matchLengths);
      return { min: Math.min(...all.map((l) => l.min)), max: Math.max(...all.map((l) => l.max)) };
    }
    case "rep": {
      const item = matchLengths(re.item);
      return { min: re.min * item.min, max: re.max === null ? (item.max === 0 ? 0 : Infinity) : re.max * item.max };
    }
  }
}

// Parses a pattern; throws RegexError for what is not a valid `u`-flag ECMAScript pattern or not supported here.
export function parseRegex(pattern: string): Regex {
  try {
    new RegExp(pattern, "u");
  } catch (e) {
    throw new RegexError(`not a valid regular expression: ${(e as Error).message}`, 0);
  }
  return new Parser(pattern).parse();
}

// How matched characters are written in the output: "json" inside a JSON string (", \ and control characters as
// escapes); "raw" as they are, for raw tool-call parameter text, which never holds "<" (so it cannot close or open
// a tag: every tag the tool-call parser looks for starts with "<").
export type TextMode = "json" | "raw";

const JSON_SPECIALS = cs.union([[0, 0x1f]], cs.chars(0x22, 0x5c));
const SHORT_ESCAPES: Record<number, string> = { 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r", 0x22: '\\"', 0x5c: "\\\\" };
const RAW_EXCLUDED = cs.chars(0x3c);

export function jsonEscape(cp: number): string {
  return SHORT_ESCAPES[cp] ?? `\\u${cp.toString(16).padStart(4, "0")}`;
}

// One character of a set as written in the output: a class and/or literal alternatives (escapes in "json" mode).
function setParts(set: CharSet, mode: TextMode): SetParts {
  if (mode === "raw") return charSetParts(cs.minus(set, RAW_EXCLUDED));
  const p = charSetParts(cs.minus(set, JSON_SPECIALS));
  return { cls: p.cls, lits: [...p.lits, ...cs.members(cs.intersect(set, JSON_SPECIALS)).map((cp) => lit(jsonEscape(cp)))] };
}

// EBNF for one character of a set, or null when the mode leaves nothing of it that can be written.
function setToEbnf(set: CharSet, mode: TextMode): string | null {
  return partsToEbnf(setParts(set, mode));
}

// EBNF generating whole matches of the regex, or null when the mode makes its language empty.
export function regexToEbnf(re: Regex, mode: TextMode): string | null {
  switch (re.t) {
    case "set": {
      const single = re.set.length === 1 && re.set[0]![0] === re.set[0]![1] ? re.set[0]![0] : undefined;
      if (single !== undefined && !(mode === "raw" && single === 0x3c)) {
        return lit(mode === "json" && cs.has(JSON_SPECIALS, single) ? jsonEscape(single) : String.fromCodePoint(single));
      }
      return setToEbnf(re.set, mode);
    }
    case "seq": {
      const parts: string[] = [];
      for (const item of re.items) {
        const e = regexToEbnf(item, mode);
        if (e === null) return null;
        parts.push(e);
      }
      return parts.length === 0 ? '""' : `(${mergeLiterals(parts).join(" ")})`;
    }
    case "alt": {
      const options = re.options.map((o) => regexToEbnf(o, mode)).filter((e): e is string => e !== null);
      return options.length === 0 ? null : `(${options.join(" | ")})`;
    }
    case "rep": {
      const item = regexToEbnf(re.item, mode);
      if (item === null) return re.min === 0 ? '""' : null;
      const { min, max } = re;
      if (max === null && re.item.t === "set") {
        const star = starOf(setParts(re.item.set, mode))!;
        return min === 0 ? star : `(${min === 1 ? item : `${item}{${min}}`} ${star})`;
      }
      const q = max === null ? (min === 0 ? "*" : min === 1 ? "+" : `{${min},}`) : min === 0 && max === 1 ? "?" : `{${min},${max}}`;
      if (max === 0) return '""';
      return `(${item})${q}`;
    }
  }
}

// Joins adjacent single-literal parts ("a" "b" → "ab") so long literals stay one element.
function mergeLiterals(parts: string[]): string[] {
  const out: string[] = [];
  for (const p of parts) {
    const prev = out[out.length - 1];
    if (prev && /^"(?:[^"\\]|\\.)*"$/.test(prev) && /^"(?:[^"\\]|\\.)*"$/.test(p)) out[out.length - 1] = prev.slice(0, -1) + p.slice(1);
    else out.push(p);
  }
  return out;
}
