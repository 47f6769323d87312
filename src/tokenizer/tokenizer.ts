// A model's tokenizer: text to ids and back, identical to Hugging Face tokenizers on the same tokenizer.json.
//
// Added tokens (<|im_start|>, <|im_end|>, <think>, <tool_call>, ...) are control tokens only where the chat template
// put them. Two entry points make that explicit:
//   encode(text)              plain text: an added token's string is ordinary text (what `splash tokenize` prints);
//   encodeTemplate(rendered)  a rendered prompt: added-token strings become their ids, except inside client text
//                             that went through escape() before rendering.
// escape() inserts a noncharacter (U+FDD0) after every character that starts an added token, so no added token can
// appear in (or be completed across the edge of) client text, and encodeTemplate removes the marks again before
// the text is normalized and split; a literal U+FDD0 in client text is doubled, so the round trip is exact. The
// alternative, rendering with placeholders and splicing client text back, breaks templates that inspect content
// (split on '</think>', startswith('<tool_response>')). A user who types "<|im_end|>" therefore gets the tokens of
// that text, never the turn end; this differs on purpose from apply_chat_template + tokenize, which would inject it.
import { join } from "node:path";
import { native, type NativeLibrary } from "../native/library.ts";
import type { TokenIds } from "../native/model.ts";
import { NativeBpe } from "./native.ts";
import { loadSpec } from "./spec-cache.ts";
import { parseTokenizerJson, type AddedToken, type TokenizerSpec } from "./tokenizer-json.ts";

const MARK = "\uFDD0";

// Escapes the regex syntax characters (only those: under the u flag any other escaped character is an error).
function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

export class Tokenizer {
  readonly vocabSize: number;
  readonly maxTokenBytes: number; // the longest token's bytes: a text of n bytes is at least n / maxTokenBytes ids
  readonly added: readonly AddedToken[];
  private readonly bytes: Uint8Array;
  private readonly offsets: Uint32Array;
  private readonly nfc: boolean;
  private readonly specialIds: Set<number>;
  private readonly addedByContent: Map<string, number>;
  private readonly splitAdded: RegExp | null; // an added token, longest first (tokenizers matches leftmost-longest)
  private readonly escapeStarts: RegExp; // a character an added token starts with, or the mark itself
  // ignoreBOM: a leading U+FEFF is text the model produced, not a byte-order mark to drop.
  private readonly decoder = new TextDecoder("utf-8", { ignoreBOM: true });

  private constructor(
    spec: TokenizerSpec,
    private readonly bpe: NativeBpe,
  ) {
    this.bytes = spec.tokenBytes;
    this.offsets = spec.tokenOffsets;
    this.vocabSize = spec.tokenOffsets.length - 1;
    let longest = 1;
    for (let id = 0; id < this.vocabSize; id++) longest = Math.max(longest, this.offsets[id + 1]! - this.offsets[id]!);
    this.maxTokenBytes = longest;
    this.added = spec.added;
    this.nfc = spec.nfc;
    this.specialIds = new Set(spec.added.filter((t) => t.special).map((t) => t.id));
    this.addedByContent = new Map(spec.added.map((t) => [t.content, t.id]));
    const contents = [...this.addedByContent.keys()].sort((a, b) => b.length - a.length);
    this.splitAdded = contents.length ? new RegExp(contents.map(escapeRegExp).join("|"), "gu") : null;
    const starts = new Set(contents.map((c) => String.fromCodePoint(c.codePointAt(0)!)));
    starts.add(MARK);
    this.escapeStarts = new RegExp([...starts].map(escapeRegExp).join("|"), "gu");
  }

  static fromJson(json: string, lib: NativeLibrary): Tokenizer {
    return Tokenizer.fromSpec(parseTokenizerJson(json), lib);
  }

  static fromSpec(spec: TokenizerSpec, lib: NativeLibrary): Tokenizer {
    return new Tokenizer(spec, NativeBpe.create(lib, spec));
  }

  // Loads <dir>/tokenizer.json (parsed once per content, then read from the cache: spec-cache.ts).
  static async load(dir: string): Promise<Tokenizer> {
    const path = join(dir, "tokenizer.json");
    let spec: TokenizerSpec;
    try {
      spec = loadSpec(path);
    } catch (e) {
      const why = (e as NodeJS.ErrnoException).code === "ENOENT" ? "the file does not exist" : (e as Error).message;
      throw new Error(`cannot load ${path}: ${why}`);
    }
    return Tokenizer.fromSpec(spec, native());
  }

  // Ids of plain text; added-token strings in it are ordinary text.
  encode(text: string): Int32Array {
    return this.encodePlain(text).slice();
  }

  // Ids of a rendered prompt: added tokens become their ids; text that went through escape() stays text. With a
  // limit, it stops as soon as more than `limit` ids are known: the result is then longer than the limit, a lower
  // bound of the prompt's length, and the rest of the text is never tokenized.
  encodeTemplate(rendered: string, limit = Infinity): Int32Array {
    if (!this.splitAdded) return this.encode(unescapeText(rendered));
    const parts: Int32Array[] = [];
    let total = 0;
    let last = 0;
    const flushText = (end: number) => {
      if (end <= last) return;
      const ids = this.encodePlain(unescapeText(rendered.slice(last, end)));
      if (ids.length) {
        parts.push(ids.slice());
        total += ids.length;
      }
    };
    for (const m of rendered.matchAll(this.splitAdded)) {
      flushText(m.index);
      parts.push(Int32Array.of(this.addedByContent.get(m[0])!));
      total++;
      last = m.index + m[0].length;
      if (total > limit) break;
    }
    if (total <= limit) flushText(rendered.length);
    const out = new Int32Array(total);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }

  // Ids of any text with its added-token strings read as those tokens, as Hugging Face tokenizers read text
  // (POST /tokenize with add_special_tokens); a U+FDD0 in it is text, as escape() keeps it.
  encodeWithAddedTokens(text: string): Int32Array {
    return this.encodeTemplate(text.replaceAll(MARK, MARK + MARK));
  }

  // The text a rendered prompt stands for: what encodeTemplate reads once escape()'s marks are gone.
  unescape(rendered: string): string {
    return unescapeText(rendered);
  }

  // The fewest ids encodeTemplate can make of a rendered prompt, from its size alone: its bytes (less the escape
  // marks, which are not tokenized) over the longest token's. Lets a prompt far too long be refused untokenized.
  minTemplateTokens(rendered: string): number {
    let marks = 0;
    for (let i = rendered.indexOf(MARK); i >= 0; i = rendered.indexOf(MARK, i + 1)) marks++;
    return Math.ceil((Buffer.byteLength(rendered) - marks * Buffer.byteLength(MARK)) / this.maxTokenBytes);
  }

  // Marks client text so that encodeTemplate keeps any added-token strings in it as text (see the file comment).
  escape(text: string): string {
    return text.replace(this.escapeStarts, (c) => (c === MARK ? MARK + MARK : c + MARK));
  }

  // Number of tokens of plain text (no copy of the ids).
  count(text: string): number {
    return this.encodePlain(text).length;
  }

  decode(ids: ArrayLike<number>, options: { skipSpecial?: boolean } = {}): string {
    const parts: Uint8Array[] = [];
    let n = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (options.skipSpecial && this.specialIds.has(id)) continue;
      const b = this.tokenBytes(id);
      parts.push(b);
      n += b.length;
    }
    const buf = new Uint8Array(n);
    let at = 0;
    for (const b of parts) {
      buf.set(b, at);
      at += b.length;
    }
    return this.decoder.decode(buf);
  }

  // The bytes a token stands for (its content for an added token).
  tokenBytes(id: number): Uint8Array {
    if (!(id >= 0 && id < this.vocabSize)) throw new RangeError(`token id ${id} is outside the vocabulary (${this.vocabSize})`);
    return this.bytes.subarray(this.offsets[id]!, this.offsets[id + 1]!);
  }

  // Whether an id stands for a token: within the vocabulary and not an unused id (which has no bytes).
  hasToken(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.vocabSize && this.offsets[id + 1]! > this.offsets[id]!;
  }

  // The ids that are tokens, as the native model takes them: a model samples, drafts and lists no other row.
  tokenIds(): TokenIds {
    const mask = new Uint32Array(Math.ceil(this.vocabSize / 32));
    let unused = false;
    for (let id = 0; id < this.vocabSize; id++) {
      if (this.hasToken(id)) mask[id >>> 5]! |= 1 << (id & 31);
      else unused = true;
    }
    return { count: this.vocabSize, mask: unused ? mask : null };
  }

  // The id of an added token by its content (e.g. "<|im_end|>"), or undefined.
  addedTokenId(content: string): number | undefined {
    return this.addedByContent.get(content);
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  free(): void {
    this.bpe.free();
  }

  private encodePlain(text: string): Int32Array {
    return this.bpe.encode(this.nfc ? text.normalize("NFC") : text);
  }
}

function unescapeText(s: string): string {
  return s.includes(MARK) ? s.replaceAll(/\uFDD0(\uFDD0)?/g, "$1") : s;
}
