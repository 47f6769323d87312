// GPT-2's byte-level alphabet: each of the 256 byte values is written as one printable character in tokenizer.json
// (bytes_to_unicode in tokenizers' ByteLevel pre-tokenizer): printable Latin-1 bytes stand for themselves, the
// other 68 map to U+0100 upwards in byte order. Splash keeps tokens as raw bytes and converts only at load.

const BYTE_TO_CHAR: string[] = [];
const CHAR_TO_BYTE = new Int16Array(324).fill(-1); // the alphabet's characters are all below U+0144

{
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const cp = printable(b) ? b : 256 + extra++;
    BYTE_TO_CHAR[b] = String.fromCharCode(cp);
    CHAR_TO_BYTE[cp] = b;
  }
}

// The bytes a byte-level token string stands for, or undefined if it has a character outside the alphabet.
export function byteLevelDecode(token: string): Uint8Array | undefined {
  const out = new Uint8Array(token.length);
  for (let i = 0; i < token.length; i++) {
    const c = token.charCodeAt(i);
    const b = c < CHAR_TO_BYTE.length ? CHAR_TO_BYTE[c]! : -1;
    if (b < 0) return undefined;
    out[i] = b;
  }
  return out;
}

export function byteLevelEncode(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += BYTE_TO_CHAR[b];
  return s;
}
