// Keeps constrained output valid UTF-8. Byte-level vocabularies hold tokens that are single bytes or end inside a
// character, and xgrammar 0.1.27 lets a non-ASCII "character" be byte runs that are not Unicode scalar values
// (surrogates, leads above U+10FFFF): decoded, those become U+FFFD, which breaks maxLength counts and patterns.
// The guard follows the UTF-8 decoder state across accepted tokens and removes from the mask every token that
// would make the bytes invalid.

// Decoder state: continuation bytes still needed, and the allowed range of the next one (RFC 3629 table 3-7).
// Encoded as need | lo << 2 | hi << 10; 0 = at a character boundary.
export type Utf8State = number;
export const BOUNDARY: Utf8State = 0;
const INVALID = -1;

function pack(need: number, lo: number, hi: number): Utf8State {
  return need === 0 ? 0 : need | (lo << 2) | (hi << 10);
}

export function step(state: Utf8State, b: number): Utf8State {
  const need = state & 3;
  if (need > 0) {
    const lo = (state >>> 2) & 0xff;
    const hi = (state >>> 10) & 0xff;
    return b >= lo && b <= hi ? pack(need - 1, 0x80, 0xbf) : INVALID;
  }
  if (b < 0x80) return 0;
  if (b >= 0xc2 && b <= 0xdf) return pack(1, 0x80, 0xbf);
  if (b === 0xe0) return pack(2, 0xa0, 0xbf);
  if (b === 0xed) return pack(2, 0x80, 0x9f);
  if (b >= 0xe1 && b <= 0xef) return pack(2, 0x80, 0xbf);
  if (b === 0xf0) return pack(3, 0x90, 0xbf);
  if (b === 0xf4) return pack(3, 0x80, 0x8f);
  if (b >= 0xf1 && b <= 0xf3) return pack(3, 0x80, 0xbf);
  return INVALID;
}

export function run(state: Utf8State, bytes: Uint8Array): Utf8State {
  let s = state;
  for (const b of bytes) {
    s = step(s, b);
    if (s === INVALID) return INVALID;
  }
  return s;
}

// Per vocabulary: which tokens may follow a character boundary, and the few that start with continuation bytes.
export type Utf8Data = { atBoundary: Uint32Array; continuing: Int32Array };

export class Utf8Table {
  constructor(
    readonly bytes: readonly Uint8Array[], // per token (empty for special tokens and padding)
    private readonly data: Utf8Data,
  ) {}

  static data(bytes: readonly Uint8Array[]): Utf8Data {
    const atBoundary = new Uint32Array(Math.ceil(bytes.length / 32));
    const continuing: number[] = [];
    bytes.forEach((b, id) => {
      if (run(BOUNDARY, b) !== INVALID) atBoundary[id >>> 5]! |= 1 << (id & 31);
      if (b.length > 0 && (b[0]! & 0xc0) === 0x80) continuing.push(id);
    });
    return { atBoundary, continuing: Int32Array.from(continuing) };
  }

  // The state after a token, or INVALID.
  after(state: Utf8State, token: number): Utf8State {
    return run(state, this.bytes[token] ?? new Uint8Array(0));
  }

  valid(state: Utf8State, token: number): boolean {
    return this.after(state, token) !== INVALID;
  }

  // Clears from `mask` every token that would break UTF-8 in `state`.
  restrict(mask: Uint32Array, state: Utf8State): void {
    if (state === BOUNDARY) {
      const atBoundary = this.data.atBoundary;
      for (let w = 0; w < mask.length; w++) mask[w]! &= atBoundary[w]!;
      return;
    }
    // Inside a character only tokens that start with the right continuation bytes can follow.
    const keep = new Uint32Array(mask.length);
    for (const id of this.data.continuing) if (this.valid(state, id)) keep[id >>> 5]! |= 1 << (id & 31);
    for (let w = 0; w < mask.length; w++) mask[w]! &= keep[w]!;
  }
}
