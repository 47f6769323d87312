// Counts the grammar leaves open: string lengths (minLength/maxLength) and array sizes (minItems/maxItems).
//
// xgrammar precomputes token masks for every position of a bounded repetition, which costs seconds of compile per
// few dozen positions over a 151K vocabulary; so the grammar writes bounded strings and arrays unbounded, and a
// Bounds object follows the output through the schema's structure and counts. It reads the text the tokens spell,
// byte by byte: JSON values (objects by key, arrays by index, strings with their escapes) and, for tool calls, the
// Qwen XML envelope (tool and parameter names, raw and JSON parameter values). The grammar has already checked the
// syntax, so it only has to know where it is. A token is allowed when its bytes keep every open count within its
// bounds; every bound can always still be met after an allowed token (a string can close or grow, an array can end
// or take another item), so counting never leads to a dead end. A string whose pattern the length cuts short is
// followed through the pattern's DFA (length-dfa.ts): a character is allowed only when a match can still end within
// the bounds.
//
// Following the output needs to know which schema applies to each value. Objects (by key), arrays (by index) and
// unions whose options start differently (a string, an array, an object or a scalar: `"type": ["string", "null"]`)
// tell; a union with two options that start alike and a count in one of them would not, and is refused.
import { feasible, feasibleIn, step as dfaStep, type LengthDfa } from "./length-dfa.ts";
import * as cs from "./charset.ts";
import type { CharSet } from "./charset.ts";
import { SchemaError, type CompiledSchema, type Node } from "./schema.ts";
import { stringOnly } from "./tool-grammar.ts";

// ----- what the counter follows (built with the grammar, from the compiled schema) -----

// A schema position with counts somewhere inside it; `null` = nothing to count there or below.
export type Counted = CountedString | CountedArray | CountedObject | CountedUnion;
type CountedString = { kind: "string"; min: number; max: number; dfa: LengthDfa | null }; // dfa: the pattern's, when its state matters
type CountedArray = { kind: "array"; prefix: (Counted | null)[]; items: Counted | null; min: number; max: number };
type CountedObject = { kind: "object"; properties: Map<string, Counted | null>; additional: Counted | null };
type Start = "string" | "array" | "object" | "scalar";
type CountedUnion = { kind: "union"; byStart: Partial<Record<Start, Counted | null>> };

export type ToolBounds = { raw: Map<string, CountedString>; json: Map<string, Counted> }; // per parameter
export type BoundsPlan =
  | { kind: "json"; root: Counted }
  | { kind: "tools"; start: "text" | "calls" | "json_or_calls"; json: Counted | null; tools: Map<string, ToolBounds> };

const STARTS: Start[] = ["string", "array", "object", "scalar"];

// Builds the counted view of one compiled schema; throws SchemaError for a union it could not follow.
export class CountedSchema {
  private readonly memo = new Map<Node, Counted | null>();
  private readonly counts = new Map<Node, boolean>();

  constructor(private readonly schema: CompiledSchema) {}

  of(node: Node): Counted | null {
    node = this.resolve(node);
    if (this.memo.has(node)) return this.memo.get(node)!;
    if (!this.hasCounts(node)) return this.memo.set(node, null), null;
    switch (node.kind) {
      case "string": {
        const c: CountedString = { kind: "string", min: node.minLength, max: node.maxLength ?? Infinity, dfa: node.lengths ?? null };
        return this.memo.set(node, c), c;
      }
      case "array": {
        const c: CountedArray = { kind: "array", prefix: [], items: null, min: node.minItems, max: node.maxItems ?? Infinity };
        this.memo.set(node, c); // before the children: a recursive schema refers back to it
        c.prefix = node.prefix.map((p) => this.of(p));
        c.items = node.items && this.of(node.items);
        return c;
      }
      case "object": {
        const c: CountedObject = { kind: "object", properties: new Map(), additional: null };
        this.memo.set(node, c);
        for (const p of node.properties) c.properties.set(p.name, this.of(p.node));
        c.additional = node.additional && this.of(node.additional);
        return c;
      }
      case "union": {
        const c: CountedUnion = { kind: "union", byStart: {} };
        this.memo.set(node, c);
        for (const start of STARTS) {
          const options = node.options.filter((o) => this.starts(o).has(start));
          if (options.length > 1 && options.some((o) => this.hasCounts(o))) {
            throw new SchemaError(
              `options ${options.map((o) => node.options.indexOf(o)).join(" and ")} both start with ${start === "scalar" ? "a scalar" : `a ${start}`} and one of them has minLength/maxLength/minItems/maxItems inside; the output cannot be followed through such a union (make the options different types)`,
              node.path,
              node.keyword,
            );
          }
          if (options.length === 1) c.byStart[start] = this.of(options[0]!);
        }
        return c;
      }
      default:
        throw new Error(`a ${node.kind} node has no counts`);
    }
  }

  private resolve(node: Node): Node {
    for (let i = 0; node.kind === "ref"; i++) {
      if (i > 64) throw new SchemaError("$ref chain longer than 64", "", "$ref");
      node = this.schema.defs.get(node.id)!;
    }
    return node;
  }

  // Whether a count applies at the node or below it (recursion: a cycle adds nothing of its own).
  hasCounts(node: Node): boolean {
    node = this.resolve(node);
    const known = this.counts.get(node);
    if (known !== undefined) return known;
    this.counts.set(node, false);
    let v: boolean;
    switch (node.kind) {
      case "string":
        v = node.minLength > 0 || node.maxLength !== undefined;
        break;
      case "array":
        v = node.minItems > 0 || node.maxItems !== undefined || [...node.prefix, ...(node.items ? [node.items] : [])].some((n) => this.hasCounts(n));
        break;
      case "object":
        v = node.properties.some((p) => this.hasCounts(p.node)) || (node.additional !== null && this.hasCounts(node.additional));
        break;
      case "union":
        v = node.options.some((o) => this.hasCounts(o));
        break;
      default:
        v = false;
    }
    this.counts.set(node, v);
    return v;
  }

  // The first characters a node's values may start with, by kind.
  private starts(node: Node, depth = 0): Set<Start> {
    node = this.resolve(node);
    if (depth > 64) return new Set(STARTS);
    switch (node.kind) {
      case "any":
        return new Set(STARTS);
      case "values":
        return new Set(node.values.map((v) => (typeof v === "string" ? "string" : Array.isArray(v) ? "array" : typeof v === "object" && v !== null ? "object" : "scalar")));
      case "string":
      case "array":
      case "object":
        return new Set([node.kind]);
      case "union":
        return new Set(node.options.flatMap((o) => [...this.starts(o, depth + 1)]));
      default:
        return new Set(["scalar"]);
    }
  }
}

// The counts of a tool's parameters, by parameter: raw (string-only, written as text) or JSON, as tool-grammar.ts
// writes them. Throws SchemaError (path relative to the parameters schema).
export function toolBounds(schema: CompiledSchema, properties: { name: string; node: Node }[]): ToolBounds | null {
  const counted = new CountedSchema(schema);
  const out: ToolBounds = { raw: new Map(), json: new Map() };
  for (const p of properties) {
    if (!counted.hasCounts(p.node)) continue;
    if (stringOnly(p.node, schema)) {
      const c = counted.of(p.node);
      if (c?.kind !== "string") {
        throw new SchemaError("a parameter whose options are all strings may have minLength/maxLength only when it has one option", `/properties/${p.name}`, "maxLength");
      }
      out.raw.set(p.name, c);
    } else out.json.set(p.name, counted.of(p.node)!);
  }
  return out.raw.size || out.json.size ? out : null;
}

// ----- the token tables (once per vocabulary) -----

export type BoundsData = {
  chars: Uint16Array; // code points a token starts (its bytes that are not UTF-8 continuations)
  plainString: Uint32Array; // tokens without ", \\ or control bytes: inside a JSON string they only add characters
  plainRaw: Uint32Array; // tokens without a newline: inside raw text they only add characters
  plainText: Uint32Array; // tokens without "<": in free text before a tool call they change nothing
  byCharsDesc: Int32Array; // token ids by chars, most first
};

// Where a token leads a pattern's DFA from a state: the state after its characters, or one of these.
const END_UNKNOWN = -2;
const LONG_TOKEN = 16; // characters; tokens longer than this are a small share of a vocabulary
const END_MID_CHARACTER = -3; // the token ends inside a UTF-8 sequence: walked byte by byte instead

// Memo rows (one per pattern state met, a vocabulary's Int16Array each: ~300 KB at 152K tokens) a table keeps at
// most, the oldest dropped first, so a schema with a large pattern cannot grow memory without bound.
const MAX_MEMO_ROWS = 128;

export class BoundsTable {
  // Per pattern DFA and state, each token's end state, filled as tokens are met (the DFA lives as long as its cached
  // schema, so later requests reuse them).
  private readonly ends = new WeakMap<LengthDfa, Int16Array[]>(); // DFAs have at most 2,000 states
  private readonly memoOrder: [Int16Array[], number][] = []; // (rows of a DFA, state), oldest first

  constructor(
    readonly bytes: readonly Uint8Array[],
    readonly data: BoundsData,
  ) {}

  // The state a token of plain characters leads the DFA to from `state`: -1 when no match continues that way.
  tokenEnd(d: LengthDfa, state: number, token: number): number {
    let byState = this.ends.get(d);
    if (!byState) this.ends.set(d, (byState = []));
    let row = byState[state];
    if (!row) {
      if (this.memoOrder.length >= MAX_MEMO_ROWS) {
        const [rows, old] = this.memoOrder.shift()!;
        delete rows[old];
      }
      row = byState[state] = new Int16Array(this.bytes.length).fill(END_UNKNOWN);
      this.memoOrder.push([byState, state]);
    }
    if (row[token] === END_UNKNOWN) row[token] = this.walk(d, state, token);
    return row[token]!;
  }

  private walk(d: LengthDfa, state: number, token: number): number {
    let s = state;
    let cp = 0;
    let more = 0;
    for (const b of this.bytes[token]!) {
      if (more > 0) {
        cp = (cp << 6) | (b & 0x3f);
        more--;
      } else if (b < 0x80) cp = b;
      else if (b < 0xc0 || b >= 0xf8) return -1;
      else {
        more = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : 1;
        cp = b & (0x3f >> more);
      }
      if (more === 0 && (s = dfaStep(d, s, cp)) < 0) return -1;
    }
    return more > 0 ? END_MID_CHARACTER : s;
  }

  static data(bytes: readonly Uint8Array[]): BoundsData {
    const words = Math.ceil(bytes.length / 32);
    const chars = new Uint16Array(bytes.length);
    const plainString = new Uint32Array(words);
    const plainRaw = new Uint32Array(words);
    const plainText = new Uint32Array(words);
    bytes.forEach((b, id) => {
      let n = 0;
      let str = true;
      let raw = true;
      let text = true;
      for (const x of b) {
        if ((x & 0xc0) !== 0x80) n++;
        if (x === 0x22 || x === 0x5c || x < 0x20) str = false;
        if (x === 0x0a) raw = false;
        if (x === 0x3c) text = false;
      }
      chars[id] = Math.min(n, 0xffff);
      if (str) plainString[id >>> 5]! |= 1 << (id & 31);
      if (raw) plainRaw[id >>> 5]! |= 1 << (id & 31);
      if (text) plainText[id >>> 5]! |= 1 << (id & 31);
    });
    const byCharsDesc = Int32Array.from({ length: bytes.length }, (_, i) => i).sort((a, b) => chars[b]! - chars[a]!);
    return { chars, plainString, plainRaw, plainText, byCharsDesc };
  }
}

// ----- following the output -----

// A position in the output, innermost first. Frames are immutable, so trying a token shares the state.
type Frame =
  | { k: "value"; c: Counted | null } // a JSON value comes next (whitespace first)
  | { k: "string"; min: number; max: number; n: number; esc: number; hex: number; high: boolean; dfa: LengthDfa | null; state: number; cp: number; more: number } // inside a JSON string; with a dfa, cp/more = a UTF-8 character being read
  | { k: "key"; text: string; esc: boolean } // inside an object key (its bytes, escapes undone at the end)
  | { k: "array"; c: CountedArray | null; n: number; after: boolean } // n items started; after = an item just ended
  | { k: "object"; c: CountedObject | null; phase: "key" | "colon" | "value" | "next"; next: Counted | null }
  | { k: "scalar" } // a number or literal: ends at the first byte that cannot continue it
  | { k: "raw"; min: number; max: number; n: number; match: number; dfa: LengthDfa | null; state: number; cp: number; more: number } // a raw parameter value and its closing tag; with a dfa, n counts the content only
  | { k: "envelope"; mode: "text" | "calls" | "first"; match: number; line: string; tool: string }
  | { k: "done" };
type Stack = { f: Frame; below: Stack | null };
// Past the end of the output's value: only the stop token follows, which the grammar checks.
const DONE: Stack = { f: { k: "done" }, below: null };

const FAIL = null;
const VALUE_END = "\n</parameter>\n";
const TOOL_CALL = "<tool_call>";
const PARAM_LINE = /^<parameter=(.+)>$/;
const FUNCTION_LINE = /^<function=(.+)>$/;

// KMP failure links of a pattern.
function failures(p: string): Int32Array {
  const f = new Int32Array(p.length + 1);
  f[0] = -1;
  for (let i = 1, k = -1; i <= p.length; i++) {
    while (k >= 0 && p[k] !== p[i - 1]) k = f[k]!;
    f[i] = ++k;
  }
  return f;
}
const VALUE_END_FAIL = failures(VALUE_END);
const TOOL_CALL_FAIL = failures(TOOL_CALL);

function advance(p: string, f: Int32Array, match: number, b: number): number {
  if (match === p.length) match = f[match]!;
  while (match >= 0 && p.charCodeAt(match) !== b) match = f[match]!;
  return match + 1;
}

type PatternString = Extract<Frame, { k: "string" }> & { dfa: LengthDfa };
type PatternRaw = Extract<Frame, { k: "raw" }> & { dfa: LengthDfa };
type PatternText = PatternString | PatternRaw;
// A character of a pattern's string being read: its count, the DFA's state, and a UTF-8 sequence's progress.
type CharRead = { n: number; state: number; cp: number; more: number };

// One byte of a plain (unescaped) character; false when it leaves no way to end the string within its bounds.
function charByte(d: LengthDfa, max: number, c: CharRead, b: number): boolean {
  if (c.more > 0) {
    if ((b & 0xc0) !== 0x80) return false;
    c.cp = (c.cp << 6) | (b & 0x3f);
    c.more--;
  } else {
    if (++c.n > max) return false;
    if (b < 0x80) c.cp = b;
    else if (b < 0xc0 || b >= 0xf8) return false;
    else {
      c.more = b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : 1;
      c.cp = b & (0x3f >> c.more);
    }
  }
  if (c.more === 0) {
    c.state = dfaStep(d, c.state, c.cp);
    return feasible(d, c.state, c.n);
  }
  const lo = c.cp << (6 * c.more);
  return feasibleIn(d, c.state, c.n, lo, lo + (1 << (6 * c.more)) - 1);
}

// The characters the grammar writes as escapes in a pattern's string (regex.ts, jsonEscape), and those of them it
// writes as \u escapes.
const ESCAPED: CharSet = cs.union([[0, 0x1f]], cs.chars(0x22, 0x5c));
const U_ESCAPED: CharSet = cs.minus([[0, 0x1f]], cs.chars(8, 9, 10, 12, 13));
const SHORT_ESCAPED: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 8, 0x66: 12, 0x6e: 10, 0x72: 13, 0x74: 9 };

function feasibleInSet(d: LengthDfa, state: number, n: number, set: CharSet, lo: number, hi: number): boolean {
  return set.some(([a, b]) => feasibleIn(d, state, n, Math.max(a, lo), Math.min(b, hi)));
}

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isScalarByte = (b: number) => (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || b === 0x2e || b === 0x2b || b === 0x2d;
// The value of an ASCII hex digit, -1 for any other byte.
const hexValue = (b: number): number =>
  b >= 0x30 && b <= 0x39 ? b - 0x30 : b >= 0x61 && b <= 0x66 ? b - 0x57 : b >= 0x41 && b <= 0x46 ? b - 0x37 : -1;

export class Bounds {
  private readonly history: (Stack | null)[] = [];
  private stack: Stack | null;

  constructor(
    private readonly plan: BoundsPlan,
    private readonly table: BoundsTable,
  ) {
    this.stack = { f: plan.kind === "json" ? { k: "value", c: plan.root } : { k: "envelope", mode: plan.start === "text" ? "text" : plan.start === "calls" ? "calls" : "first", match: 0, line: "", tool: "" }, below: null };
  }

  // Advances past a token; false when its bytes break a bound (the state is then unchanged).
  accept(token: number): boolean {
    const next = this.run(this.stack, this.table.bytes[token]!);
    if (next === FAIL) return false;
    this.history.push(this.stack);
    this.stack = next;
    return true;
  }

  rollback(n: number): void {
    if (n > this.history.length) throw new RangeError(`rollback(${n}) with ${this.history.length} tokens accepted`);
    if (n === 0) return;
    this.stack = this.history[this.history.length - n]!;
    this.history.length -= n;
  }

  // Clears from `mask` every token whose bytes would break a bound. Inside a string (or raw value) at a character
  // boundary, tokens of plain characters only add to the count: they are checked against the room left, from a
  // table; in free text before a tool call, tokens without "<" change nothing; every other allowed token is followed
  // byte by byte.
  restrict(mask: Uint32Array): void {
    const top = this.stack?.f;
    let plain: Uint32Array | null = null;
    let room = Infinity;
    if (top?.k === "string" && top.dfa) {
      if (top.esc === 0 && top.more === 0) {
        plain = this.table.data.plainString;
        this.restrictPattern(mask, top as PatternString, plain);
      }
    } else if (top?.k === "string" && top.esc === 0) {
      plain = this.table.data.plainString;
      room = top.max - top.n;
    } else if (top?.k === "raw" && top.dfa) {
      if (top.match === 0 && top.more === 0) {
        plain = this.table.data.plainRaw;
        this.restrictPattern(mask, top as PatternRaw, plain);
      }
    } else if (top?.k === "raw" && top.match === 0) {
      plain = this.table.data.plainRaw;
      room = top.max - top.n;
    } else if (top?.k === "envelope" && top.mode === "text" && top.match === 0) {
      plain = this.table.data.plainText; // "<tool_call>" can start only at a "<"
    }
    if (plain && room !== Infinity) {
      const { byCharsDesc, chars } = this.table.data;
      for (let i = 0; i < byCharsDesc.length; i++) {
        const t = byCharsDesc[i]!;
        if (chars[t]! <= room) break;
        if ((plain[t >>> 5]! >>> (t & 31)) & 1) mask[t >>> 5]! &= ~(1 << (t & 31));
      }
    }
    for (let w = 0; w < mask.length; w++) {
      let bits = plain ? mask[w]! & ~plain[w]! : mask[w]!;
      while (bits !== 0) {
        const low = bits & -bits;
        bits ^= low;
        const t = w * 32 + 31 - Math.clz32(low);
        if (this.run(this.stack, this.table.bytes[t]!) === FAIL) mask[w]! &= ~low;
      }
    }
  }

  private run(stack: Stack | null, bytes: Uint8Array): Stack | null {
    let s: Stack | null = stack;
    for (let i = 0; i < bytes.length; i++) {
      s = this.step(s, bytes[i]!);
      if (s === FAIL) return FAIL;
    }
    return s;
  }

  // One byte. Returns the new stack, or FAIL when the byte breaks a bound.
  private step(s: Stack | null, b: number): Stack | null {
    for (;;) {
      if (s === null) return DONE;
      const f = s.f;
      switch (f.k) {
        case "done":
          return s;
        case "value": {
          if (isSpace(b)) return s;
          let c = f.c;
          while (c?.kind === "union") c = c.byStart[b === 0x22 ? "string" : b === 0x5b ? "array" : b === 0x7b ? "object" : "scalar"] ?? null;
          if (b === 0x22) {
            const counted = c?.kind === "string" ? c : { min: 0, max: Infinity, dfa: null };
            return { f: { k: "string", min: counted.min, max: counted.max, n: 0, esc: 0, hex: 0, high: false, dfa: counted.dfa, state: 0, cp: 0, more: 0 }, below: s.below };
          }
          if (b === 0x5b) return { f: { k: "array", c: c?.kind === "array" ? c : null, n: 0, after: false }, below: s.below };
          if (b === 0x7b) return { f: { k: "object", c: c?.kind === "object" ? c : null, phase: "key", next: null }, below: s.below };
          s = { f: { k: "scalar" }, below: s.below };
          continue;
        }
        case "scalar":
          if (isScalarByte(b)) return s;
          s = s.below;
          continue;
        case "string":
          return f.dfa ? this.patternStringByte(f as PatternString, s.below, b) : this.stringByte(f, s.below, b);
        case "key": {
          if (f.esc) return { f: { ...f, text: f.text + String.fromCharCode(b), esc: false }, below: s.below };
          if (b === 0x5c) return { f: { ...f, text: f.text + "\\", esc: true }, below: s.below };
          if (b !== 0x22) return { f: { ...f, text: f.text + String.fromCharCode(b) }, below: s.below };
          const parent = s.below!;
          const obj = parent.f as Extract<Frame, { k: "object" }>;
          const name = JSON.parse(`"${Buffer.from(f.text, "latin1").toString("utf8")}"`) as string;
          const next = obj.c ? (obj.c.properties.has(name) ? obj.c.properties.get(name)! : obj.c.additional) : null;
          return { f: { ...obj, phase: "colon", next }, below: parent.below };
        }
        case "object":
          if (isSpace(b)) return s;
          if (f.phase === "key" || f.phase === "next") {
            if (b === 0x7d) return s.below ?? DONE;
            if (b === 0x2c && f.phase === "next") return { f: { ...f, phase: "key" }, below: s.below };
            if (b === 0x22) return { f: { k: "key", text: "", esc: false }, below: s };
            return s;
          }
          if (f.phase === "colon") return b === 0x3a ? { f: { ...f, phase: "value" }, below: s.below } : s;
          s = { f: { k: "value", c: f.next }, below: { f: { ...f, phase: "next" }, below: s.below } };
          continue;
        case "array": {
          if (isSpace(b)) return s;
          const c = f.c;
          if (b === 0x5d) {
            return c && f.n < c.min ? FAIL : (s.below ?? DONE);
          }
          // A comma promises another item, so it is where maxItems is checked.
          if (f.after) return b !== 0x2c ? s : c && f.n + 1 > c.max ? FAIL : { f: { ...f, after: false }, below: s.below };
          if (c && f.n + 1 > c.max) return FAIL;
          const item = c ? (f.n < c.prefix.length ? c.prefix[f.n]! : c.items) : null;
          s = { f: { k: "value", c: item }, below: { f: { ...f, n: f.n + 1, after: true }, below: s.below } };
          continue;
        }
        case "raw": {
          if (f.dfa) return this.patternRawByte(f as PatternRaw, s.below, b);
          const match = advance(VALUE_END, VALUE_END_FAIL, f.match, b);
          // Characters confirmed as content: all but the part that may still be the closing tag.
          const n = f.n + ((b & 0xc0) !== 0x80 ? 1 : 0);
          if (n - match > f.max) return FAIL;
          // Raw text never holds "</parameter>" (the grammar's rule), so once that is seen the value has ended.
          if (match >= VALUE_END.length - 1 && n - match < f.min) return FAIL;
          if (match === VALUE_END.length) return s.below ?? DONE;
          return { f: { ...f, n, match }, below: s.below };
        }
        case "envelope":
          return this.envelopeByte(f, s, b);
      }
    }
  }

  // A character counts at its first byte; an escape counts at its backslash (so a bound is never found broken
  // halfway through one), and a \u escape of a low surrogate right after one of a high surrogate is the same
  // character (as ajv and JavaScript count).
  private stringByte(f: Extract<Frame, { k: "string" }>, below: Stack | null, b: number): Stack | null {
    let { n, esc, hex, high } = f;
    if (esc === 0) {
      if (b === 0x22) return n < f.min ? FAIL : (below ?? DONE);
      if (b === 0x5c) {
        n++;
        esc = 1;
      } else if ((b & 0xc0) !== 0x80) {
        n++;
        high = false;
      }
    } else if (esc === 1) {
      esc = b === 0x75 ? 2 : 0;
      if (esc === 0) high = false;
      hex = 0;
    } else {
      // inside \uXXXX: esc is 2 + the number of hex digits read before this byte
      const digit = hexValue(b);
      if (digit < 0) return FAIL;
      hex = (hex << 4) | digit;
      esc = esc === 5 ? 0 : esc + 1;
      if (esc === 0) {
        if (high && hex >= 0xdc00 && hex <= 0xdfff) n--;
        high = hex >= 0xd800 && hex <= 0xdbff;
      }
    }
    if (n > f.max) return FAIL;
    return { f: { ...f, n, esc, hex, high }, below };
  }

  // A pattern's string at a character boundary, for tokens of plain characters. A token is walked through the
  // pattern's DFA only when its length could matter: it ends the string short of minLength, or so close to maxLength
  // that some state the pattern may be in could not close in the room left. (The grammar keeps the pattern's state
  // one from which a match can end; the state after a whole token being feasible makes every one before it so.)
  private restrictPattern(mask: Uint32Array, f: PatternText, plain: Uint32Array): void {
    const { byCharsDesc, chars } = this.table.data;
    const lo = f.min - f.n;
    const hi = f.max - f.n - f.dfa.farthest; // tokens of lo..hi characters need no walk
    const check = (t: number) => {
      const bit = 1 << (t & 31);
      if (mask[t >>> 5]! & plain[t >>> 5]! & bit && !this.patternFits(f, t)) mask[t >>> 5]! &= ~bit;
    };
    // Far from maxLength few tokens are long enough to matter: found from the longest down. Near it (or short of
    // minLength), the tokens the grammar allows are fewer than the vocabulary.
    if (lo > 0 || hi < LONG_TOKEN) {
      for (let w = 0; w < mask.length; w++) {
        let bits = mask[w]! & plain[w]!;
        while (bits !== 0) {
          const low = bits & -bits;
          bits ^= low;
          const t = w * 32 + 31 - Math.clz32(low);
          if (chars[t]! < lo || chars[t]! > hi) check(t);
        }
      }
    } else {
      for (let i = 0; i < byCharsDesc.length && chars[byCharsDesc[i]!]! > hi; i++) check(byCharsDesc[i]!);
    }
  }

  // Whether a token of plain characters keeps the string able to end as a match within its bounds: when the state
  // after the token is, so is each state before it (the rest of the token is a way on from there).
  private patternFits(f: PatternText, token: number): boolean {
    const end = this.table.tokenEnd(f.dfa, f.state, token);
    if (end !== END_MID_CHARACTER) return end >= 0 && feasible(f.dfa, end, f.n + this.table.data.chars[token]!);
    const c: CharRead = { n: f.n, state: f.state, cp: 0, more: 0 };
    for (const b of this.table.bytes[token]!) if (!charByte(f.dfa, f.max, c, b)) return false;
    return true;
  }

  // With the pattern's DFA: a character steps it once read whole (a UTF-8 sequence, or an escape, which the grammar
  // writes only for ", \ and control characters), and is allowed only when the string can still end as a match
  // within its bounds; a character partly read is allowed while some character it may become would be.
  private patternStringByte(f: PatternString, below: Stack | null, b: number): Stack | null {
    const d = f.dfa;
    let { n, esc, hex, state } = f;
    if (esc === 1) {
      if (b === 0x75) {
        esc = 2;
        hex = 0;
        if (!feasibleInSet(d, state, n, U_ESCAPED, 0, 0xffff)) return FAIL;
      } else {
        const cp = SHORT_ESCAPED[b];
        if (cp === undefined) return FAIL;
        esc = 0;
        state = dfaStep(d, state, cp);
        if (!feasible(d, state, n)) return FAIL;
      }
      return { f: { ...f, esc, hex, state }, below };
    }
    if (esc >= 2) {
      const digit = hexValue(b);
      if (digit < 0) return FAIL;
      hex = (hex << 4) | digit;
      const left = 5 - esc; // hex digits after this one
      if (left === 0) {
        esc = 0;
        state = dfaStep(d, state, hex);
        if (!feasible(d, state, n)) return FAIL;
      } else {
        esc++;
        const lo = hex << (4 * left);
        if (!feasibleInSet(d, state, n, U_ESCAPED, lo, lo + (1 << (4 * left)) - 1)) return FAIL;
      }
      return { f: { ...f, esc, hex, state }, below };
    }
    if (f.more === 0 && b === 0x22) return f.n < f.min || !d.accept[state] ? FAIL : (below ?? DONE);
    if (f.more === 0 && b === 0x5c) {
      n++;
      if (n > f.max || !feasibleInSet(d, state, n, ESCAPED, 0, cs.MAX_CODE_POINT)) return FAIL;
      return { f: { ...f, n, esc: 1 }, below };
    }
    const c: CharRead = { n, state, cp: f.cp, more: f.more };
    if (!charByte(d, f.max, c, b)) return FAIL;
    return { f: { ...f, ...c }, below };
  }

  // A raw value with the pattern's DFA. The pattern's text never holds "<" (the grammar's rule), so a newline is
  // content unless "<" follows it, which starts the closing tag: until then it is pending, allowed while either the
  // value can end before it or it can be content.
  private patternRawByte(f: PatternRaw, below: Stack | null, b: number): Stack | null {
    const d = f.dfa;
    const match = advance(VALUE_END, VALUE_END_FAIL, f.match, b);
    if (f.match >= 2) return match === VALUE_END.length ? (below ?? DONE) : { f: { ...f, match }, below };
    let { n, state } = f;
    if (f.match === 1) {
      if (match === 2) return n < f.min || !d.accept[state] ? FAIL : { f: { ...f, match }, below };
      n++;
      state = dfaStep(d, state, 0x0a);
      if (!feasible(d, state, n)) return FAIL;
    }
    if (match === 1) {
      const close = n >= f.min && d.accept[state] === 1;
      if (!close && !feasible(d, dfaStep(d, state, 0x0a), n + 1)) return FAIL;
      return { f: { ...f, n, state, match }, below };
    }
    const c: CharRead = { n, state, cp: f.cp, more: f.more };
    if (!charByte(d, f.max, c, b)) return FAIL;
    return { f: { ...f, ...c, match }, below };
  }

  private envelopeByte(f: Extract<Frame, { k: "envelope" }>, s: Stack, b: number): Stack | null {
    const plan = this.plan as Extract<BoundsPlan, { kind: "tools" }>;
    if (f.mode === "text") {
      const match = advance(TOOL_CALL, TOOL_CALL_FAIL, f.match, b);
      return { f: match === TOOL_CALL.length ? { ...f, mode: "calls", match: 0, line: "" } : { ...f, match }, below: s.below };
    }
    if (f.mode === "first") {
      if (b === 0x0a) return s;
      if (b === 0x3c) return { f: { ...f, mode: "calls", line: "<" }, below: s.below };
      // A JSON answer instead of tool calls: the envelope ends with it.
      return this.step({ f: { k: "value", c: plan.json }, below: null }, b);
    }
    if (b !== 0x0a) return { f: { ...f, line: f.line + String.fromCharCode(b) }, below: s.below };
    const line = Buffer.from(f.line, "latin1").toString("utf8");
    const fn = FUNCTION_LINE.exec(line);
    if (fn) return { f: { ...f, line: "", tool: fn[1]! }, below: s.below };
    const param = PARAM_LINE.exec(line);
    const here: Stack = { f: { ...f, line: "" }, below: s.below };
    if (!param) return here;
    const bounds = plan.tools.get(f.tool);
    const raw = bounds?.raw.get(param[1]!);
    if (raw) return { f: { k: "raw", min: raw.min, max: raw.max, n: 0, match: 0, dfa: raw.dfa, state: 0, cp: 0, more: 0 }, below: here };
    const json = bounds?.json.get(param[1]!);
    // Parameters without counts: a raw value is passed over like a counted one (its closing tag ends it), a JSON
    // value is followed as JSON, so that the next parameter's start is seen.
    return json ? { f: { k: "value", c: json }, below: here } : { f: { k: "raw", min: 0, max: Infinity, n: 0, match: 0, dfa: null, state: 0, cp: 0, more: 0 }, below: here };
  }
}
