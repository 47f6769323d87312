// Reasoning must not spell "</think>" in ordinary tokens. The output parser ends reasoning at that text, whichever
// tokens wrote it, while the constraint hands over to the grammar only at the </think> token; so while reasoning, the
// tokens that would complete the text are masked, and the two always agree on where the answer starts.

const END = [..."</think>"].map((c) => c.charCodeAt(0));

// Bytes of "</think>" matched at the end of the text so far (0..7), after one more byte. The string has no border
// (no proper prefix that is also a suffix), so a mismatch falls back to 0, or to 1 on "<".
function step(s: number, b: number): number {
  return END[s] === b ? s + 1 : b === END[0] ? 1 : 0;
}

// The match state after `bytes`; END.length once "</think>" is complete.
export function advance(s: number, bytes: Uint8Array): number {
  for (const b of bytes) {
    s = step(s, b);
    if (s === END.length) return s;
  }
  return s;
}

export class ThinkText {
  // completing[s]: tokens whose bytes complete "</think>" when the text ends with s of its bytes (the </think> token
  // itself excepted: it is the way out of reasoning).
  readonly completing: Uint32Array[];

  constructor(
    private readonly bytes: readonly Uint8Array[],
    readonly end: number, // the </think> token
    data: Uint32Array, // ThinkText.data
  ) {
    const words = Math.ceil(bytes.length / 32);
    this.completing = END.map((_, s) => data.subarray(s * words, (s + 1) * words));
  }

  // The completing sets, one after the other.
  static data(bytes: readonly Uint8Array[], end: number): Uint32Array {
    const words = Math.ceil(bytes.length / 32);
    const out = new Uint32Array(END.length * words);
    bytes.forEach((b, id) => {
      if (id === end || b.length === 0) return;
      for (let s = 0; s < END.length; s++) if (advance(s, b) === END.length) out[s * words + (id >>> 5)]! |= 1 << (id & 31);
    });
    return out;
  }

  after(s: number, token: number): number {
    return advance(s, this.bytes[token]!);
  }
}
