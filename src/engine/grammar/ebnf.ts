// Writing xgrammar's EBNF: string literals, character classes and a rule table. Everything Splash constrains is
// written here as EBNF by construction (schema.ts → json-grammar.ts, tool-grammar.ts), so the text handed to
// xgrammar is always well formed: its parser aborts the WebAssembly module on a syntax error.
import * as cs from "./charset.ts";
import type { CharSet } from "./charset.ts";

function hex(cp: number): string {
  return cp <= 0xffff ? `\\u${cp.toString(16).padStart(4, "0")}` : `\\U${cp.toString(16).padStart(8, "0")}`;
}

// A string literal matching exactly `s`.
export function lit(s: string): string {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (cp >= 0x20 && cp < 0x7f) out += ch;
    else out += hex(cp);
  }
  return `${out}"`;
}

function classChar(cp: number): string {
  const ch = String.fromCodePoint(cp);
  if ("]\\-^[".includes(ch)) return `\\${ch}`;
  return cp >= 0x20 && cp < 0x7f ? ch : hex(cp);
}

const classBody = (set: CharSet): string => set.map(([a, b]) => (a === b ? classChar(a) : `${classChar(a)}-${classChar(b)}`)).join("");
const ASCII: CharSet = [[0, 0x7f]];
const NON_ASCII = cs.minus(cs.ANY, ASCII);
const MAX_LISTED = 64;

// EBNF matching one code point of a set, or null when nothing of it can be written.
//
// xgrammar 0.1.27 matches character-class members above U+007F as single bytes (`[a-z中]` matches "-", the low byte
// of U+4E2D), while negated classes of ASCII members match whole UTF-8 characters. So a set is written as a
// negated ASCII class when it holds every non-ASCII character; otherwise as an ASCII class plus its non-ASCII
// characters as literals when there are at most MAX_LISTED of them. A larger, partial non-ASCII part (`.` less the
// line separators U+2028/2029, `[À-ÿ]`…) is left out: the grammar then generates a subset, which still validates.
export type SetParts = { cls: string | null; lits: string[] }; // one class and/or literal alternatives

export function charSetParts(set: CharSet): SetParts {
  const ascii = cs.intersect(set, ASCII);
  const rest = cs.intersect(set, NON_ASCII);
  if (cs.size(rest) === cs.size(NON_ASCII)) {
    const excluded = cs.minus(ASCII, ascii);
    return excluded.length ? { cls: `[^${classBody(excluded)}]`, lits: [] } : { cls: "[^\\u0000-\\u007f]", lits: ["[\\u0000-\\u007f]"] };
  }
  const single = ascii.length === 1 && ascii[0]![0] === ascii[0]![1];
  const lits = cs.size(rest) <= MAX_LISTED ? cs.members(rest).map((cp) => lit(String.fromCodePoint(cp))) : [];
  if (single) lits.unshift(lit(String.fromCodePoint(ascii[0]![0])));
  return { cls: ascii.length && !single ? `[${classBody(ascii)}]` : null, lits };
}

export function charSet(set: CharSet): string | null {
  return partsToEbnf(charSetParts(set));
}

export function partsToEbnf(p: SetParts): string | null {
  const all = [...(p.cls ? [p.cls] : []), ...p.lits];
  return all.length === 0 ? null : all.length === 1 ? all[0]! : `(${all.join(" | ")})`;
}

// Zero or more characters of a set, written as a class star between the other alternatives: xgrammar computes masks
// inside `[…]*` in microseconds, inside a star over alternatives (`([…] | "x")*`) in hundreds of milliseconds on a
// 151K-token vocabulary.
export function starOf(p: SetParts): string | null {
  if (!p.cls) return p.lits.length ? `(${p.lits.join(" | ")})*` : null;
  return p.lits.length ? `(${p.cls}* ((${p.lits.join(" | ")}) ${p.cls}*)*)` : `${p.cls}*`;
}

// charSet for sets that are known to be writable (ASCII sets, sets holding every non-ASCII character).
export function charClass(set: CharSet): string {
  const e = charSet(set);
  if (e === null) throw new Error("charClass: a set with nothing writable");
  return e;
}

export const alt = (options: string[]): string => (options.length === 1 ? options[0]! : `(${options.join(" | ")})`);

// The rules of one grammar. Rule bodies are EBNF expressions; identical bodies added with add() share a rule.
export class Rules {
  // Shared rules (json_value, json_string, …) by their fixed names, written once per grammar.
  readonly builtins = new Map<string, string>();
  private readonly order: string[] = [];
  private readonly bodies = new Map<string, string>();
  private readonly byBody = new Map<string, string>();

  // A fresh rule name for a rule defined later (recursion: a $ref names its rule before its body is known).
  reserve(hint: string): string {
    const base = hint.replace(/[^A-Za-z0-9_]/g, "_").replace(/^(?=[0-9_])/, "r") || "r";
    let name = base;
    for (let i = 1; this.bodies.has(name) || name === "root"; i++) name = `${base}_${i}`;
    this.bodies.set(name, "");
    this.order.push(name);
    return name;
  }

  define(name: string, body: string): string {
    this.bodies.set(name, body);
    return name;
  }

  add(hint: string, body: string): string {
    const existing = this.byBody.get(body);
    if (existing) return existing;
    const name = this.define(this.reserve(hint), body);
    this.byBody.set(body, name);
    return name;
  }

  // The grammar text with `root ::= rootBody` first.
  text(rootBody: string): string {
    const lines = [`root ::= ${rootBody}`];
    for (const name of this.order) {
      const body = this.bodies.get(name)!;
      if (!body) throw new Error(`grammar rule ${name} was reserved but never defined`);
      lines.push(`${name} ::= ${body}`);
    }
    return `${lines.join("\n")}\n`;
  }
}
