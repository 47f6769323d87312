// Prefix-cache keys. A token sequence is cut into blocks of `pageTokens` tokens; block j is named by a hash over
// block j-1's hash and block j's tokens, so one hash names the whole prefix up to the end of its block (vLLM's
// kv_cache_utils.py). KV pages are keyed by it, and so are GDN snapshots: the snapshot of the state after position
// (j+1)·pageTokens carries block j's hash. A distinct type keeps these apart from any other string.
import { createHash } from "node:crypto";

export type BlockHash = string & { readonly __brand: "BlockHash" };

// The parent of block 0. The salt names what produced the state (model, weights, quantization): two models never
// share entries, and a disk copy of the cache can be matched to its model.
export function rootHash(salt: string): BlockHash {
  return createHash("sha256").update("splash-prefix-v1\0").update(salt).digest("base64url").slice(0, 22) as BlockHash;
}

// What besides its token ids decides the state of the block of tokens [start, end) (vLLM's "extra keys"), or
// undefined: the images whose pads it holds (src/engine/images.ts).
export type BlockExtras = (start: number, end: number) => string | undefined;

// 128 bits of SHA-256: a collision would silently serve another prefix's state, so no fast non-cryptographic hash.
export function blockHash(parent: BlockHash, tokens: Int32Array, extra?: string): BlockHash {
  const bytes = new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  const h = createHash("sha256").update(parent).update(bytes);
  if (extra !== undefined) h.update("\0extra\0").update(extra);
  return h.digest("base64url").slice(0, 22) as BlockHash;
}

// Extends `hashes` (the chain of the full blocks already hashed) over every full block of tokens[0, length).
export function extendChain(root: BlockHash, hashes: BlockHash[], tokens: Int32Array, length: number, pageTokens: number, extras?: BlockExtras): void {
  for (let j = hashes.length; (j + 1) * pageTokens <= length; j++) {
    const [start, end] = [j * pageTokens, (j + 1) * pageTokens];
    hashes.push(blockHash(j === 0 ? root : hashes[j - 1]!, tokens.subarray(start, end), extras?.(start, end)));
  }
}
