// Numbers and integers within bounds, as EBNF over their decimal digits.
//
// Bounded numbers are written without exponent and with at most FRACTION_DIGITS fraction digits (more when a bound
// needs them): validators compare doubles, and a longer fraction could round onto an exclusive bound. Integer parts
// have at most MAX_INT_DIGITS digits when a side is unbounded, so every value parses to a finite double and fits an
// int64 on the client. The bounds are the shortest decimal of the double the schema holds, the number its author
// wrote.
import { alt, lit, type Rules } from "./ebnf.ts";

export type Bound = { value: number; exclusive: boolean };

const MAX_INT_DIGITS = 18;
const FRACTION_DIGITS = 6;
const MAX_FRACTION_DIGITS = 15;

export class Unsatisfiable extends Error {
  override name = "Unsatisfiable";
}

// An exact non-negative decimal: integer part and fraction digits without trailing zeros.
type Dec = { int: bigint; frac: string };

function decimal(x: number): { neg: boolean; dec: Dec } {
  const neg = x < 0;
  let s = Math.abs(x).toString();
  const m = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(s);
  if (!m) throw new Error(`unexpected number rendering ${s}`);
  let digits = m[1]! + (m[2] ?? "");
  let point = m[1]!.length + Number(m[3] ?? 0);
  if (point < 0) {
    digits = "0".repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits += "0".repeat(point - digits.length);
  s = digits;
  return { neg, dec: { int: BigInt(s.slice(0, point) || "0"), frac: s.slice(point).replace(/0+$/, "") } };
}

const ZERO: Dec = { int: 0n, frac: "" };
const cmp = (a: Dec, b: Dec): number => (a.int !== b.int ? (a.int < b.int ? -1 : 1) : a.frac.padEnd(32, "0") < b.frac.padEnd(32, "0") ? -1 : a.frac.padEnd(32, "0") > b.frac.padEnd(32, "0") ? 1 : 0);

// Canonical non-negative integers (no leading zeros) in [a, b].
export function uintRange(a: bigint, b: bigint): string {
  if (a > b) throw new Unsatisfiable("empty integer range");
  const options: string[] = [];
  const as = a.toString();
  const bs = b.toString();
  for (let len = as.length; len <= bs.length; len++) {
    const lo = len === as.length ? as : `1${"0".repeat(len - 1)}`;
    const hi = len === bs.length ? bs : "9".repeat(len);
    options.push(...sameLength(lo, hi));
  }
  return alt(options);
}

const digitRange = (lo: string, hi: string): string => (lo === hi ? lit(lo) : `[${lo}-${hi}]`);
const anyDigits = (n: number): string => (n === 0 ? "" : n === 1 ? " [0-9]" : ` [0-9]{${n}}`);

// Digit strings of one length between lo and hi (inclusive, lo <= hi).
function sameLength(lo: string, hi: string): string[] {
  if (lo === hi) return [lit(lo)];
  const n = lo.length;
  let p = 0;
  while (lo[p] === hi[p]) p++;
  const prefix = lo.slice(0, p);
  const head = prefix ? `${lit(prefix)} ` : "";
  const restLo = lo.slice(p + 1);
  const restHi = hi.slice(p + 1);
  const rest = n - p - 1;
  const l = lo[p]!;
  const h = hi[p]!;
  if (/^0*$/.test(restLo) && /^9*$/.test(restHi)) return [`(${head}${digitRange(l, h)}${anyDigits(rest)})`];
  const out: string[] = [];
  let from = l.charCodeAt(0);
  let to = h.charCodeAt(0);
  if (!/^0*$/.test(restLo)) {
    out.push(...sameLength(restLo, "9".repeat(rest)).map((s) => `(${head}${lit(l)} ${s})`));
    from++;
  }
  const lastFull = /^9*$/.test(restHi);
  if (!lastFull) to--;
  if (from <= to) out.push(`(${head}${digitRange(String.fromCharCode(from), String.fromCharCode(to))}${anyDigits(rest)})`);
  if (!lastFull) out.push(...sameLength("0".repeat(rest), restHi).map((s) => `(${head}${lit(h)} ${s})`));
  return out;
}

// Integers x with min <= x <= max (after exclusive bounds and non-integral bounds are rounded inwards).
export function integerEbnf(min: Bound | undefined, max: Bound | undefined): string {
  const cap = 10n ** BigInt(MAX_INT_DIGITS) - 1n;
  const lo = min ? ceilBound(min) : -cap;
  const hi = max ? floorBound(max) : cap;
  if (lo > hi) throw new Unsatisfiable(`no integer lies between ${describe(min, ">")} and ${describe(max, "<")}`);
  const options: string[] = [];
  if (hi >= 0n) options.push(uintRange(lo > 0n ? lo : 0n, hi));
  if (lo < 0n) options.push(`("-" ${uintRange(hi < 0n ? -hi : 1n, -lo)})`);
  return alt(options);
}

function ceilBound(b: Bound): bigint {
  const { neg, dec } = decimal(b.value);
  const whole = dec.frac === "";
  const v = neg ? -dec.int : dec.int;
  // ceil(x) for x = v + frac (positive) or v - frac (negative); exclusive moves one past an integral bound
  const c = whole ? v : neg ? v : v + 1n;
  return b.exclusive && whole ? c + 1n : c;
}

function floorBound(b: Bound): bigint {
  const { neg, dec } = decimal(b.value);
  const whole = dec.frac === "";
  const v = neg ? -dec.int : dec.int;
  const f = whole ? v : neg ? v - 1n : v;
  return b.exclusive && whole ? f - 1n : f;
}

function describe(b: Bound | undefined, op: string): string {
  return b ? `${op}${b.exclusive ? "" : "="} ${b.value}` : "unbounded";
}

type Side = { dec: Dec; exclusive: boolean };

// Numbers x with min <= x <= max (or strict), as "-"? int ("." frac)?.
export function numberEbnf(rules: Rules, min: Bound | undefined, max: Bound | undefined): string {
  const bound = (b: Bound | undefined) => (b ? { ...decimal(b.value), exclusive: b.exclusive } : undefined);
  const lo = bound(min);
  const hi = bound(max);
  const fracDigits = Math.min(MAX_FRACTION_DIGITS, Math.max(FRACTION_DIGITS, lo?.dec.frac.length ?? 0, hi?.dec.frac.length ?? 0));
  const top: Side = { dec: { int: 10n ** BigInt(MAX_INT_DIGITS), frac: "" }, exclusive: true };
  const options: string[] = [];
  // x >= 0: magnitudes from max(lo, 0) to hi
  if (!hi || !hi.neg) {
    const from: Side = lo && !lo.neg ? { dec: lo.dec, exclusive: lo.exclusive } : { dec: ZERO, exclusive: false };
    const to: Side = hi ? { dec: hi.dec, exclusive: hi.exclusive } : top;
    const m = magnitude(rules, from, to, fracDigits);
    if (m) options.push(m);
  }
  // x < 0: magnitudes from max(-hi, 0 exclusive) to -lo
  if (!lo || lo.neg) {
    const from: Side = hi && hi.neg ? { dec: hi.dec, exclusive: hi.exclusive } : { dec: ZERO, exclusive: true };
    const to: Side = lo ? { dec: lo.dec, exclusive: lo.exclusive } : top;
    const m = magnitude(rules, from, to, fracDigits);
    if (m) options.push(`("-" ${m})`);
  }
  if (options.length === 0) throw new Unsatisfiable(`no number lies between ${describe(min, ">")} and ${describe(max, "<")}`);
  return alt(options);
}

function magnitude(rules: Rules, lo: Side, hi: Side, fracDigits: number): string | null {
  const c = cmp(lo.dec, hi.dec);
  if (c > 0 || (c === 0 && (lo.exclusive || hi.exclusive))) return null;
  const frac = (l: Side | null, h: Side | null) => fraction(rules, l, h, fracDigits);
  const options: string[] = [];
  const push = (int: string, f: string | null) => {
    if (f !== null) options.push(f === '""' ? int : `(${int} ${f})`);
  };
  if (lo.dec.int === hi.dec.int) push(lit(lo.dec.int.toString()), frac(lo, hi));
  else {
    push(lit(lo.dec.int.toString()), frac(lo, null));
    if (lo.dec.int + 1n <= hi.dec.int - 1n) push(uintRange(lo.dec.int + 1n, hi.dec.int - 1n), frac(null, null));
    push(lit(hi.dec.int.toString()), frac(null, hi));
  }
  return options.length ? alt(options) : null;
}

// The optional fraction ("." digits, up to n of them) of a number whose integer part equals that of the given
// bounds: a digit-by-digit walk that stays "tight" while the digits equal the bound's. Null when nothing fits.
function fraction(rules: Rules, lo: Side | null, hi: Side | null, n: number): string | null {
  const memo = new Map<string, string | null>();
  const digit = (s: string, i: number) => Number(s[i] ?? "0");
  const restZero = (s: string, i: number) => /^0*$/.test(s.slice(i));
  const free = (k: number) => (k === 0 ? "" : ` [0-9]{0,${k}}`);
  const then = (d: string, next: string | null) => (next === null ? null : next === '""' ? d : `(${d} ${next})`);
  // What may follow `pos` digits: the end of the number, and/or alternatives that each start with a digit.
  const options = (pos: number, tl: boolean, th: boolean): { end: boolean; digits: string[] } => {
    const end = (!tl || (restZero(lo!.dec.frac, pos) && !lo!.exclusive)) && (!th || !(restZero(hi!.dec.frac, pos) && hi!.exclusive));
    const digits: (string | null)[] = [];
    if (pos < n) {
      const dl = tl ? digit(lo!.dec.frac, pos) : 0;
      const dh = th ? digit(hi!.dec.frac, pos) : 9;
      if (tl && th && dl === dh) digits.push(then(lit(String(dl)), state(pos + 1, true, true)));
      else {
        if (tl) digits.push(then(lit(String(dl)), state(pos + 1, true, false)));
        const from = tl ? dl + 1 : dl;
        const to = th ? dh - 1 : dh;
        if (from <= to) digits.push(`${digitRange(String(from), String(to))}${free(n - pos - 1)}`);
        if (th) digits.push(then(lit(String(dh)), state(pos + 1, false, true)));
      }
    }
    return { end, digits: digits.filter((d): d is string => d !== null) };
  };
  const state = (pos: number, tl: boolean, th: boolean): string | null => {
    const key = `${pos}${tl ? "l" : ""}${th ? "h" : ""}`;
    if (!memo.has(key)) {
      const o = options(pos, tl, th);
      const all = [...(o.end ? ['""'] : []), ...o.digits];
      memo.set(key, all.length === 0 ? null : all.length === 1 && all[0] === '""' ? '""' : rules.add(`frac_${key}`, all.join(" | ")));
    }
    return memo.get(key)!;
  };
  const first = options(0, lo !== null, hi !== null);
  const all = [...(first.end ? ['""'] : []), ...(first.digits.length ? [`("." ${alt(first.digits)})`] : [])];
  return all.length === 0 ? null : all.length === 1 ? all[0]! : `(${all.join(" | ")})`;
}
