// The model vocabulary as the grammar engine needs it: every token's bytes (byte-level BPE, GPT-2's byte alphabet),
// which tokens are special, and the stop tokens. Read straight from a tokenizer.json so structured output does not
// wait on the tokenizer module; src/tokenizer can supply the same shape once it lands.

export type Vocabulary = {
  id: string; // identifies the tokenizer: part of every compiled grammar's cache key
  size: number; // the model's logits size (>= the tokenizer's ids; the rest are padding)
  tokens: string[]; // per id, the token in the byte-level alphabet ("" for padding ids)
  special: Set<number>; // special added tokens (<|im_end|>, …): never produced by a grammar, only as stop tokens
  added: Map<string, number>; // every added token by its text (<tool_call>, </think>, <|im_end|>, …)
  stopTokens: number[];
};

// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others for code points from 256 up.
const BYTE_TO_CHAR: string[] = [];
const CHAR_TO_BYTE = new Map<string, number>();
{
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const ch = String.fromCodePoint(printable ? b : 256 + n++);
    BYTE_TO_CHAR[b] = ch;
    CHAR_TO_BYTE.set(ch, b);
  }
}

export function encodeBytes(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += BYTE_TO_CHAR[b];
  return s;
}

export function tokenBytes(vocab: Vocabulary, id: number): Uint8Array {
  const t = vocab.tokens[id] ?? "";
  const out = new Uint8Array(t.length);
  let n = 0;
  for (const ch of t) {
    const b = CHAR_TO_BYTE.get(ch);
    if (b === undefined) throw new Error(`token ${id} is not in the byte-level alphabet`);
    out[n++] = b;
  }
  return out.subarray(0, n);
}

export function decodeTokens(vocab: Vocabulary, ids: Iterable<number>): string {
  const parts: Uint8Array[] = [];
  for (const id of ids) parts.push(tokenBytes(vocab, id));
  return new TextDecoder().decode(Buffer.concat(parts));
}

type TokenizerJson = {
  model: { type: string; vocab: Record<string, number> };
  added_tokens?: { id: number; content: string; special: boolean }[];
  decoder?: { type?: string };
};

// Builds the vocabulary from a Hugging Face tokenizer.json with a ByteLevel decoder. `size` is the model's logits
// size; `stopTokens` names the end-of-turn tokens (default: <|im_end|> and <|endoftext|> where present).
export function vocabularyFromTokenizerJson(json: unknown, options: { id: string; size?: number; stopTokens?: string[] }): Vocabulary {
  const tj = json as TokenizerJson;
  if (tj?.model?.type !== "BPE" || typeof tj.model.vocab !== "object" || tj.decoder?.type !== "ByteLevel") {
    throw new Error("tokenizer.json: expected a BPE model with a ByteLevel decoder");
  }
  const added = new Map<string, number>();
  const special = new Set<number>();
  let maxId = -1;
  for (const id of Object.values(tj.model.vocab)) maxId = Math.max(maxId, id);
  for (const a of tj.added_tokens ?? []) maxId = Math.max(maxId, a.id);
  const size = options.size ?? maxId + 1;
  if (size <= maxId) throw new Error(`vocabulary size ${size} is smaller than the tokenizer's ${maxId + 1} ids`);
  const tokens = new Array<string>(size).fill("");
  for (const [t, id] of Object.entries(tj.model.vocab)) tokens[id] = t;
  for (const a of tj.added_tokens ?? []) {
    tokens[a.id] = encodeBytes(new TextEncoder().encode(a.content));
    added.set(a.content, a.id);
    if (a.special) special.add(a.id);
  }
  const stopNames = options.stopTokens ?? ["<|im_end|>", "<|endoftext|>"].filter((s) => added.has(s));
  const stopTokens = stopNames.map((s) => {
    const id = added.get(s);
    if (id === undefined) throw new Error(`stop token ${s} is not an added token of the tokenizer`);
    return id;
  });
  return { id: options.id, size, tokens, special, added, stopTokens };
}
