// The model vocabulary as the grammar engine needs it: every token's bytes (in GPT-2's byte-level alphabet, the form
// xgrammar takes), which tokens are special, and the stop tokens. Built from a loaded Tokenizer (src/tokenizer is the
// one reader of tokenizer.json).
import { byteLevelDecode, byteLevelEncode } from "../../tokenizer/byte-level.ts";
import type { Tokenizer } from "../../tokenizer/tokenizer.ts";

export type Vocabulary = {
  id: string; // identifies the tokenizer: part of every compiled grammar's cache key
  size: number; // the model's logits size (>= the tokenizer's ids; the rest are padding)
  tokens: string[]; // per id, the token in the byte-level alphabet ("" for padding ids)
  special: Set<number>; // special added tokens (<|im_end|>, …): never produced by a grammar, only as stop tokens
  added: Map<string, number>; // every added token by its text (<tool_call>, </think>, <|im_end|>, …)
  stopTokens: number[];
};

// `size` is the model's logits size (default: the tokenizer's ids); `stopTokens` are the ids the engine ends an output
// on (src/chat/generate.ts endOfTurnTokens): a grammar allows them where its value may end, and the engine stops on
// one before the constraint would see it, so the two sets must be the same.
export function vocabularyFromTokenizer(
  tokenizer: Pick<Tokenizer, "vocabSize" | "added" | "tokenBytes">,
  options: { id: string; size?: number; stopTokens: number[] },
): Vocabulary {
  const size = options.size ?? tokenizer.vocabSize;
  if (size < tokenizer.vocabSize) throw new Error(`vocabulary size ${size} is smaller than the tokenizer's ${tokenizer.vocabSize} ids`);
  const tokens = new Array<string>(size).fill("");
  for (let id = 0; id < tokenizer.vocabSize; id++) tokens[id] = byteLevelEncode(tokenizer.tokenBytes(id));
  const added = new Map<string, number>();
  const special = new Set<number>();
  for (const a of tokenizer.added) {
    added.set(a.content, a.id);
    if (a.special) special.add(a.id);
  }
  for (const id of options.stopTokens) if (!special.has(id)) throw new Error(`stop token ${id} is not a special added token of the tokenizer`);
  return { id: options.id, size, tokens, special, added, stopTokens: options.stopTokens };
}

export function tokenBytes(vocab: Vocabulary, id: number): Uint8Array {
  const bytes = byteLevelDecode(vocab.tokens[id] ?? "");
  if (!bytes) throw new Error(`token ${id} is not in the byte-level alphabet`);
  return bytes;
}

export function decodeTokens(vocab: Vocabulary, ids: Iterable<number>): string {
  const parts: Uint8Array[] = [];
  for (const id of ids) parts.push(tokenBytes(vocab, id));
  return new TextDecoder().decode(Buffer.concat(parts));
}
