// Sets of Unicode code points as sorted, disjoint, non-adjacent inclusive ranges. Regex character classes, the
// "any other character" transitions of the text automata and the JSON escaping split all work on these.

export type CharSet = readonly (readonly [number, number])[];

export const MAX_CODE_POINT = 0x10ffff;
// UTF-8 text cannot hold lone surrogates, so no generated character is ever one.
const SURROGATES: CharSet = [[0xd800, 0xdfff]];

export function normalize(ranges: Iterable<readonly [number, number]>): CharSet {
  const sorted = [...ranges].filter(([a, b]) => a <= b).sort((x, y) => x[0] - y[0]);
  const out: [number, number][] = [];
  for (const [a, b] of sorted) {
    const last = out[out.length - 1];
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

export const chars = (...cps: number[]): CharSet => normalize(cps.map((c) => [c, c] as const));
export const union = (...sets: CharSet[]): CharSet => normalize(sets.flat());

export function complement(set: CharSet): CharSet {
  const out: [number, number][] = [];
  let next = 0;
  for (const [a, b] of set) {
    if (a > next) out.push([next, a - 1]);
    next = b + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return withoutSurrogates(out);
}

export function minus(set: CharSet, remove: CharSet): CharSet {
  return intersect(set, complement(remove));
}

export function intersect(a: CharSet, b: CharSet): CharSet {
  const out: [number, number][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const [a0, a1] = a[i]!;
    const [b0, b1] = b[j]!;
    const lo = Math.max(a0, b0);
    const hi = Math.min(a1, b1);
    if (lo <= hi) out.push([lo, hi]);
    if (a1 < b1) i++;
    else j++;
  }
  return out;
}

export function withoutSurrogates(set: CharSet): CharSet {
  const out: [number, number][] = [];
  for (const [a, b] of set) {
    for (const [lo, hi] of [[a, Math.min(b, SURROGATES[0]![0] - 1)], [Math.max(a, SURROGATES[0]![1] + 1), b]] as const) {
      if (lo <= hi) out.push([lo, hi]);
    }
  }
  return out;
}

export const isEmpty = (set: CharSet): boolean => set.length === 0;
export const has = (set: CharSet, cp: number): boolean => set.some(([a, b]) => cp >= a && cp <= b);
export const size = (set: CharSet): number => set.reduce((n, [a, b]) => n + b - a + 1, 0);

// Every code point of a set that is small enough to enumerate (the JSON specials, a few letters).
export function members(set: CharSet): number[] {
  const out: number[] = [];
  for (const [a, b] of set) for (let c = a; c <= b; c++) out.push(c);
  return out;
}

// Predefined classes, as ECMAScript defines them with the `u` flag.
export const DIGIT: CharSet = [[0x30, 0x39]];
export const WORD: CharSet = normalize([[0x30, 0x39], [0x41, 0x5a], [0x5f, 0x5f], [0x61, 0x7a]]);
export const SPACE: CharSet = normalize([
  [0x09, 0x0d], [0x20, 0x20], [0xa0, 0xa0], [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000], [0xfeff, 0xfeff],
]);
export const LINE_TERMINATORS: CharSet = chars(0x0a, 0x0d, 0x2028, 0x2029);
export const ANY: CharSet = complement([]);
