// A tokenizer.json is parsed once per content: the parsed spec is kept in binary form under
// <cache>/tokenizers/<sha256 of tokenizer.json>.bin. Parsing the JSON and converting 150-250K byte-level strings is
// most of a tokenizer's load time; reading the binary form is a copy, leaving hashing the file and building the
// native tables.
//
// Layout: "SPLTOK01", u32 header length, header JSON {pattern, nfc, ignoreMerges, added, nTokens, nMerges, nBytes},
// padding to 4 bytes, then u32 offsets [nTokens + 1], i32 merges [2 nMerges], token bytes [nBytes]. A file that does
// not match this layout is ignored and rewritten.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheDir } from "../paths.ts";
import { parseTokenizerJson, type AddedToken, type TokenizerSpec } from "./tokenizer-json.ts";

const MAGIC = "SPLTOK01";

type Header = { pattern: string | null; nfc: boolean; ignoreMerges: boolean; added: AddedToken[]; nTokens: number; nMerges: number; nBytes: number };

export function serializeSpec(spec: TokenizerSpec): Uint8Array {
  const header: Header = {
    pattern: spec.pattern,
    nfc: spec.nfc,
    ignoreMerges: spec.ignoreMerges,
    added: spec.added,
    nTokens: spec.tokenOffsets.length - 1,
    nMerges: spec.merges.length / 2,
    nBytes: spec.tokenBytes.length,
  };
  const head = new TextEncoder().encode(JSON.stringify(header));
  const start = (MAGIC.length + 4 + head.length + 3) & ~3;
  const out = new Uint8Array(start + spec.tokenOffsets.byteLength + spec.merges.byteLength + spec.tokenBytes.length);
  out.set(new TextEncoder().encode(MAGIC), 0);
  new DataView(out.buffer).setUint32(MAGIC.length, head.length, true);
  out.set(head, MAGIC.length + 4);
  out.set(new Uint8Array(spec.tokenOffsets.buffer, spec.tokenOffsets.byteOffset, spec.tokenOffsets.byteLength), start);
  out.set(new Uint8Array(spec.merges.buffer, spec.merges.byteOffset, spec.merges.byteLength), start + spec.tokenOffsets.byteLength);
  out.set(spec.tokenBytes, start + spec.tokenOffsets.byteLength + spec.merges.byteLength);
  return out;
}

// The spec in `buf`, or undefined if it is not a well-formed cache file.
export function deserializeSpec(buf: Uint8Array): TokenizerSpec | undefined {
  if (buf.length < MAGIC.length + 4 || new TextDecoder().decode(buf.subarray(0, MAGIC.length)) !== MAGIC) return undefined;
  // Typed-array views need 4-byte alignment of the whole file.
  if (buf.byteOffset % 4 !== 0) buf = buf.slice();
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const headLength = view.getUint32(MAGIC.length, true);
  let h: Header;
  try {
    h = JSON.parse(new TextDecoder().decode(buf.subarray(MAGIC.length + 4, MAGIC.length + 4 + headLength))) as Header;
  } catch {
    return undefined;
  }
  const start = (MAGIC.length + 4 + headLength + 3) & ~3;
  const offsetsBytes = (h.nTokens + 1) * 4;
  const mergesBytes = h.nMerges * 8;
  if (buf.length !== start + offsetsBytes + mergesBytes + h.nBytes) return undefined;
  const tokenOffsets = new Uint32Array(buf.buffer, buf.byteOffset + start, h.nTokens + 1);
  if (tokenOffsets[h.nTokens] !== h.nBytes) return undefined;
  return {
    pattern: h.pattern,
    nfc: h.nfc,
    ignoreMerges: h.ignoreMerges,
    added: h.added,
    tokenOffsets,
    merges: new Int32Array(buf.buffer, buf.byteOffset + start + offsetsBytes, h.nMerges * 2),
    tokenBytes: buf.subarray(start + offsetsBytes + mergesBytes),
  };
}

// The spec of the tokenizer.json at `path`, from the cache when this content was parsed before.
export function loadSpec(path: string, cache = join(cacheDir(), "tokenizers")): TokenizerSpec {
  const raw = readFileSync(path);
  const key = new Bun.CryptoHasher("sha256").update(raw).digest("hex");
  const file = join(cache, `${key}.bin`);
  try {
    const cached = deserializeSpec(readFileSync(file));
    if (cached) return cached;
  } catch {
    // Not cached yet (or unreadable): parse below.
  }
  const spec = parseTokenizerJson(raw.toString("utf8"));
  try {
    mkdirSync(cache, { recursive: true });
    // A private name and a rename: several processes may load the same tokenizer at once.
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    writeFileSync(tmp, serializeSpec(spec));
    renameSync(tmp, file);
  } catch {
    // A read-only or full cache directory only costs the next load its parse.
  }
  return spec;
}
