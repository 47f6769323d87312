// The per-vocabulary tables the constraint reads on the engine thread: every token's bytes, the UTF-8 guard's sets
// (utf8.ts), the counting tables (bounds.ts) and the reasoning guard's sets (think-text.ts). Building them walks
// every token several times (about a second of CPU for 151K tokens), so a grammar worker builds them once per
// tokenizer and they are kept under <cache>/grammar/<sha256 of the vocabulary>.bin; a later load reads them in
// milliseconds.
//
// Layout: "SPLGRM02", u32 header length, header JSON {size, nBytes, nContinuing, thinkEnd}, padding to 4 bytes, then
// u32 offsets [size + 1], u32 atBoundary [words], i32 continuing [nContinuing], u32 plainString [words], u32 plainRaw
// [words], u32 plainText [words], i32 byCharsDesc [size], u32 completing [8 words, or 0 without a </think> token], u16 chars [size],
// token bytes [nBytes]. A file that does not match is ignored and rewritten. MAGIC names the layout and what the
// tables mean: a change to either (to what utf8.ts, bounds.ts or think-text.ts compute) changes it.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cacheDir } from "../../paths.ts";
import { BoundsTable, type BoundsData } from "./bounds.ts";
import { ThinkText } from "./think-text.ts";
import { Utf8Table, type Utf8Data } from "./utf8.ts";
import { tokenBytes, type Vocabulary } from "./vocab.ts";

const MAGIC = "SPLGRM02";
const THINK_END = "</think>";

export type VocabTableData = { offsets: Uint32Array; bytes: Uint8Array; utf8: Utf8Data; bounds: BoundsData; thinkEnd: number; completing: Uint32Array };

// The tables in use: views over the data.
export type VocabTables = { utf8: Utf8Table; bounds: BoundsTable; think: ThinkText | null };

export function buildTables(vocab: Vocabulary): VocabTableData {
  const perToken = Array.from({ length: vocab.size }, (_, id) => (vocab.special.has(id) || !vocab.tokens[id] ? new Uint8Array(0) : tokenBytes(vocab, id)));
  const offsets = new Uint32Array(vocab.size + 1);
  perToken.forEach((b, id) => (offsets[id + 1] = offsets[id]! + b.length));
  const bytes = new Uint8Array(offsets[vocab.size]!);
  perToken.forEach((b, id) => bytes.set(b, offsets[id]!));
  const thinkEnd = vocab.added.get(THINK_END) ?? -1;
  return { offsets, bytes, utf8: Utf8Table.data(perToken), bounds: BoundsTable.data(perToken), thinkEnd, completing: thinkEnd < 0 ? new Uint32Array(0) : ThinkText.data(perToken, thinkEnd) };
}

export function useTables(d: VocabTableData): VocabTables {
  const perToken = Array.from({ length: d.offsets.length - 1 }, (_, id) => d.bytes.subarray(d.offsets[id]!, d.offsets[id + 1]!));
  return { utf8: new Utf8Table(perToken, d.utf8), bounds: new BoundsTable(perToken, d.bounds), think: d.thinkEnd < 0 ? null : new ThinkText(perToken, d.thinkEnd, d.completing) };
}

// Where a vocabulary's tables are kept: named by a hash of everything they are made from.
export function tablesPath(vocab: Vocabulary, dir = join(cacheDir(), "grammar")): string {
  const h = new Bun.CryptoHasher("sha256");
  h.update(`${MAGIC}\n${vocab.size}\n${[...vocab.special].sort((a, b) => a - b).join(",")}\n${vocab.added.get(THINK_END) ?? -1}\n`);
  h.update(vocab.tokens.join("\n"));
  return join(dir, `${h.digest("hex")}.bin`);
}

type Header = { size: number; nBytes: number; nContinuing: number; thinkEnd: number };

function sections(d: VocabTableData): ArrayBufferView[] {
  const b = d.bounds;
  return [d.offsets, d.utf8.atBoundary, d.utf8.continuing, b.plainString, b.plainRaw, b.plainText, b.byCharsDesc, d.completing, b.chars, d.bytes];
}

export function writeTables(path: string, d: VocabTableData): void {
  const header: Header = { size: d.offsets.length - 1, nBytes: d.bytes.length, nContinuing: d.utf8.continuing.length, thinkEnd: d.thinkEnd };
  const head = new TextEncoder().encode(JSON.stringify(header));
  let at = (MAGIC.length + 4 + head.length + 3) & ~3;
  const parts = sections(d);
  const out = new Uint8Array(at + parts.reduce((n, p) => n + ((p.byteLength + 3) & ~3), 0));
  out.set(new TextEncoder().encode(MAGIC));
  new DataView(out.buffer).setUint32(MAGIC.length, head.length, true);
  out.set(head, MAGIC.length + 4);
  for (const p of parts) {
    out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), at);
    at += (p.byteLength + 3) & ~3;
  }
  mkdirSync(join(path, ".."), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, out);
  renameSync(tmp, path); // readers never see half a file
}

// The tables kept for this vocabulary, or null when there are none (or they do not match).
export function readTables(path: string, vocab: Vocabulary): VocabTableData | null {
  let file: Uint8Array;
  try {
    file = readFileSync(path);
  } catch {
    return null;
  }
  if (new TextDecoder().decode(file.subarray(0, MAGIC.length)) !== MAGIC) return null;
  const buf = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength); // aligned views
  const headLength = new DataView(buf).getUint32(MAGIC.length, true);
  let h: Header;
  try {
    h = JSON.parse(new TextDecoder().decode(new Uint8Array(buf, MAGIC.length + 4, headLength))) as Header;
  } catch {
    return null;
  }
  if (h.size !== vocab.size) return null;
  const words = Math.ceil(h.size / 32);
  let at = (MAGIC.length + 4 + headLength + 3) & ~3;
  const take = <T>(make: (o: number, n: number) => T, n: number, bytes: number): T | null => {
    if (at + bytes > buf.byteLength) return null;
    const v = make(at, n);
    at += (bytes + 3) & ~3;
    return v;
  };
  const offsets = take((o, n) => new Uint32Array(buf, o, n), h.size + 1, (h.size + 1) * 4);
  const atBoundary = take((o, n) => new Uint32Array(buf, o, n), words, words * 4);
  const continuing = take((o, n) => new Int32Array(buf, o, n), h.nContinuing, h.nContinuing * 4);
  const plainString = take((o, n) => new Uint32Array(buf, o, n), words, words * 4);
  const plainRaw = take((o, n) => new Uint32Array(buf, o, n), words, words * 4);
  const plainText = take((o, n) => new Uint32Array(buf, o, n), words, words * 4);
  const byCharsDesc = take((o, n) => new Int32Array(buf, o, n), h.size, h.size * 4);
  const nCompleting = h.thinkEnd < 0 ? 0 : 8 * words;
  const completing = take((o, n) => new Uint32Array(buf, o, n), nCompleting, nCompleting * 4);
  const chars = take((o, n) => new Uint16Array(buf, o, n), h.size, h.size * 2);
  const bytes = take((o, n) => new Uint8Array(buf, o, n), h.nBytes, h.nBytes);
  if (!offsets || !atBoundary || !continuing || !plainString || !plainRaw || !plainText || !byCharsDesc || !completing || !chars || !bytes) return null;
  if (offsets[h.size] !== h.nBytes) return null;
  return { offsets, bytes, utf8: { atBoundary, continuing }, bounds: { chars, plainString, plainRaw, plainText, byCharsDesc }, thinkEnd: h.thinkEnd, completing };
}

// The buffers of the tables, to transfer them between threads.
export function tableBuffers(d: VocabTableData): ArrayBuffer[] {
  return sections(d).map((p) => p.buffer as ArrayBuffer);
}
