// The tokenizer.ggml.* metadata of a checkpoint, as llama.cpp's converter writes it for a byte-level BPE tokenizer
// (_set_vocab_gpt2 + SpecialVocab): the token strings in id order padded to the embedding's row count with
// "[PAD{id}]" (type UNUSED), token types (NORMAL for the BPE vocabulary; CONTROL for added tokens marked special
// or that look special, "<|…|>"; USER_DEFINED for other added tokens), the merges as "left right" strings, the
// special token ids from tokenizer_config.json (falling back to config.json), add_bos/add_eos, and the chat
// template. The pre-tokenizer name is the one llama.cpp knows for the tokenizer's split regex.
//
// A checkpoint without tokenizer.json (the random-weight fixtures) gets a minimal vocabulary of the embedding's
// size: the 256 single-byte tokens (so llama.cpp finds its newline token), the end-of-text token, and unused
// placeholders. Such a file is for feeding token ids, not text.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { byteLevelEncode } from "../tokenizer/byte-level.ts";
import type { CheckpointConfig, JsonObject } from "../models/config.ts";
import { meta, type MetaValue } from "./format.ts";
import { ExportError } from "./qwen35.ts";

// llama_token_type
const NORMAL = 1;
const CONTROL = 3;
const USER_DEFINED = 4;
const UNUSED = 5;

// Split regexes of tokenizer.json → llama.cpp's tokenizer.ggml.pre (llama-vocab.cpp maps the name back to the same
// split, LLAMA_VOCAB_PRE_TYPE_QWEN35 / _QWEN2).
const PRE_TOKENIZERS: Record<string, string> = {
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen35",
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
};

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function looksSpecial(text: string): boolean {
  return (text.startsWith("<|") && text.endsWith("|>")) || ["<pad>", "<mask>"].includes(text);
}

function splitRegex(pre: unknown): string | undefined {
  if (!isObject(pre)) return undefined;
  if (pre.type === "Split" && isObject(pre.pattern) && typeof pre.pattern.Regex === "string") return pre.pattern.Regex;
  if (pre.type === "Sequence" && Array.isArray(pre.pretokenizers)) return pre.pretokenizers.map(splitRegex).find((r) => r !== undefined);
  return undefined;
}

function tokenContent(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v.content === "string") return v.content;
  return undefined;
}

export function vocabMetadata(dir: string, cfg: CheckpointConfig, vocabSize: number): Map<string, MetaValue> {
  const path = join(dir, "tokenizer.json");
  return existsSync(path) ? tokenizerMetadata(dir, path, cfg, vocabSize) : placeholderVocab(cfg, vocabSize);
}

function tokenizerMetadata(dir: string, path: string, cfg: CheckpointConfig, vocabSize: number): Map<string, MetaValue> {
  const tj = JSON.parse(readFileSync(path, "utf8")) as Json;
  const model = tj.model;
  if (!isObject(model) || model.type !== "BPE" || !isObject(model.vocab) || !Array.isArray(model.merges))
    throw new ExportError(`${path}: only byte-level BPE tokenizers are exported (model.type ${JSON.stringify(isObject(model) ? model.type : model)})`);
  const regex = splitRegex(tj.pre_tokenizer);
  const pre = regex === undefined ? undefined : PRE_TOKENIZERS[regex];
  if (!pre) throw new ExportError(`${path}: no llama.cpp pre-tokenizer is known for the split regex ${JSON.stringify(regex)}`);

  const added = new Map<number, { content: string; special: boolean }>();
  for (const t of Array.isArray(tj.added_tokens) ? tj.added_tokens : []) {
    if (isObject(t) && typeof t.id === "number" && typeof t.content === "string") added.set(t.id, { content: t.content, special: t.special === true });
  }
  const byId: string[] = [];
  for (const [text, id] of Object.entries(model.vocab)) if (typeof id === "number") byId[id] = text;
  const size = Math.max(vocabSize, byId.length, ...[...added.keys()].map((id) => id + 1));
  const tokens: string[] = [];
  const types = new Int32Array(size);
  const idOf = new Map<string, number>();
  for (let id = 0; id < size; id++) {
    const a = added.get(id);
    if (a) {
      tokens.push(a.content);
      types[id] = a.special || looksSpecial(a.content) ? CONTROL : USER_DEFINED;
    } else if (byId[id] !== undefined) {
      tokens.push(byId[id]!);
      types[id] = NORMAL;
    } else {
      tokens.push(`[PAD${id}]`);
      types[id] = UNUSED;
    }
    idOf.set(tokens[id]!, id);
  }
  const merges = (model.merges as unknown[]).map((m) => (Array.isArray(m) ? m.join(" ") : String(m)));

  const m = new Map<string, MetaValue>();
  m.set("tokenizer.ggml.model", meta.str("gpt2"));
  m.set("tokenizer.ggml.pre", meta.str(pre));
  m.set("tokenizer.ggml.tokens", meta.strings(tokens));
  m.set("tokenizer.ggml.token_type", meta.i32s(types));
  m.set("tokenizer.ggml.merges", meta.strings(merges));

  // special ids: tokenizer_config.json first, then config.json's *_token_id (as the converter's SpecialVocab does)
  const tcPath = join(dir, "tokenizer_config.json");
  const tc = existsSync(tcPath) ? (JSON.parse(readFileSync(tcPath, "utf8")) as Json) : {};
  for (const kind of ["bos", "eos", "unk", "sep", "pad"] as const) {
    const content = tokenContent(tc[`${kind}_token`]);
    let id = content === undefined ? undefined : idOf.get(content);
    id ??= configTokenId(cfg, `${kind}_token_id`);
    if (id !== undefined) m.set(`tokenizer.ggml.${kind}_token_id`, meta.u32(id));
  }
  for (const kind of ["bos", "eos"] as const) {
    const v = tc[`add_${kind}_token`];
    if (typeof v === "boolean") m.set(`tokenizer.ggml.add_${kind}_token`, meta.bool(v));
  }
  const templatePath = join(dir, "chat_template.jinja");
  const template = existsSync(templatePath) ? readFileSync(templatePath, "utf8") : typeof tc.chat_template === "string" ? tc.chat_template : undefined;
  if (template !== undefined) m.set("tokenizer.chat_template", meta.str(template));
  return m;
}

function configTokenId(cfg: CheckpointConfig, key: string): number | undefined {
  for (const obj of [cfg.root, cfg.text] as JsonObject[]) {
    const v = obj[key];
    if (typeof v === "number" && Number.isInteger(v)) return v;
  }
  return undefined;
}

function placeholderVocab(cfg: CheckpointConfig, vocabSize: number): Map<string, MetaValue> {
  const eos = configTokenId(cfg, "eos_token_id");
  const tokens: string[] = [];
  const types = new Int32Array(vocabSize);
  for (let id = 0; id < vocabSize; id++) {
    if (id === eos) {
      tokens.push("<|endoftext|>");
      types[id] = CONTROL;
    } else if (id < 256) {
      tokens.push(byteLevelEncode(Uint8Array.of(id)));
      types[id] = NORMAL;
    } else {
      tokens.push(`[PAD${id}]`);
      types[id] = UNUSED;
    }
  }
  const m = new Map<string, MetaValue>();
  m.set("tokenizer.ggml.model", meta.str("gpt2"));
  m.set("tokenizer.ggml.pre", meta.str("default"));
  m.set("tokenizer.ggml.tokens", meta.strings(tokens));
  m.set("tokenizer.ggml.token_type", meta.i32s(types));
  m.set("tokenizer.ggml.merges", meta.strings([]));
  if (eos !== undefined) m.set("tokenizer.ggml.eos_token_id", meta.u32(eos));
  m.set("tokenizer.ggml.add_bos_token", meta.bool(false));
  return m;
}
