// The per-sequence constraint: rollback, completion, the thinking wrapper, draft checks, independence of sequences
// (batching), the grammar cache and the UTF-8 guard. Small fixture vocabulary: fast, same code paths.
import { beforeAll, describe, expect, test } from "bun:test";
import { checkDraft, StructuredOutput, tokenBytes, type ConstraintRequest, type PreparedGrammar, type Vocabulary } from "../../../../src/engine/grammar/index.ts";
import { prepareDrafts } from "../../../../src/engine/speculation.ts";
import { allowedTokens, model, rng, sample, smallVocabulary, type Model } from "../../../fixtures/grammar/harness.ts";

const SCHEMA = { type: "object", properties: { name: { type: "string", maxLength: 6 }, tags: { type: "array", items: { enum: ["a", "b"] } }, n: { type: "integer" } }, required: ["name", "n"] };
const request: ConstraintRequest = { responseFormat: { type: "json_schema", schema: SCHEMA }, tools: [], toolChoice: "auto", parallelToolCalls: false };

let vocab: Vocabulary;
let so: StructuredOutput;
let grammar: PreparedGrammar;
let m: Model;
const maskOf = (c: { fillMask(m: Uint32Array): void }) => {
  const mask = new Uint32Array(Math.ceil(vocab.size / 32));
  c.fillMask(mask);
  return mask;
};
const has = (mask: Uint32Array, t: number) => ((mask[t >>> 5]! >>> (t & 31)) & 1) === 1;

beforeAll(async () => {
  vocab = await smallVocabulary();
  so = await StructuredOutput.create(vocab);
  grammar = (await so.prepare(request))!;
  m = model(vocab, "uniform", 3);
}, 60_000);

describe("constraint", () => {
  test("rollback restores earlier masks exactly", async () => {
    const tokens = sample(m, await grammar.start({ thinking: false }), rng(1)).tokens;
    const c = await grammar.start({ thinking: false });
    const masks = [maskOf(c)];
    for (const t of tokens) {
      expect(c.accept(t)).toBe(true);
      masks.push(maskOf(c));
    }
    for (const back of [1, 3, tokens.length - 2, tokens.length]) {
      c.rollback(back);
      expect(maskOf(c)).toEqual(masks[tokens.length - back]!);
      for (const t of tokens.slice(tokens.length - back)) expect(c.accept(t)).toBe(true);
      expect(maskOf(c)).toEqual(masks[tokens.length]!);
    }
    expect(() => c.rollback(tokens.length + 1)).toThrow(RangeError);
    c.release();
  });

  test("a complete value allows only the stop tokens, and ends", async () => {
    const c = await grammar.start({ thinking: false });
    const out = sample(m, c, rng(2));
    expect(out.stopped).toBe("complete");
    expect(c.isComplete()).toBe(true);
    expect(allowedTokens(maskOf(c), vocab.size).sort()).toEqual([...vocab.stopTokens].sort());
    expect(c.accept(vocab.tokens.indexOf("a"))).toBe(false);
    // a stop token ends the output without being part of it: allowed by the mask, never accepted
    for (const stop of vocab.stopTokens) expect(c.accept(stop)).toBe(false);
    expect(c.isComplete()).toBe(true);
    expect(allowedTokens(maskOf(c), vocab.size).sort()).toEqual([...vocab.stopTokens].sort());
    c.release();
  });

  test("a drafted stop token where the value may end but need not: the verify block ends before it, the constraint stays usable", async () => {
    // an integer may end after any digit, or go on: not complete, and the stop token is allowed
    const g = (await so.prepare({ ...request, responseFormat: { type: "json_schema", schema: { type: "integer" } } }))!;
    const c = await g.start({ thinking: false });
    const digit = (d: string) => vocab.tokens.indexOf(d);
    const stop = vocab.stopTokens[0]!;
    const { nDraft, masks } = prepareDrafts(Int32Array.of(digit("1"), stop, digit("2")), c, vocab.size);
    expect(nDraft).toBe(1);
    const words = Math.ceil(vocab.size / 32);
    expect(masks!.length).toBe(2 * words);
    const after = masks!.subarray(words);
    expect(has(after, stop)).toBe(true); // the target may stop there
    expect(has(after, digit("2"))).toBe(true);
    expect(c.isComplete()).toBe(false);
    // the target rejects the draft: rolled back, and the constraint goes on
    c.rollback(1);
    expect(c.accept(digit("4"))).toBe(true);
    expect(has(maskOf(c), stop)).toBe(true);
    c.release();
  });

  test("tokens outside the mask are refused, added tokens such as <think> are blocked", async () => {
    const c = await grammar.start({ thinking: false });
    const mask = maskOf(c);
    const think = vocab.added.get("<think>")!;
    expect(has(mask, think)).toBe(false);
    expect(c.accept(think)).toBe(false);
    const refused = vocab.tokens.findIndex((t, id) => t && !has(mask, id));
    expect(c.accept(refused)).toBe(false);
    c.release();
  });

  test("thinking: free until </think>, constrained after, rollback crosses back", async () => {
    const plain = await grammar.start({ thinking: false });
    const initial = maskOf(plain);
    plain.release();
    const c = await grammar.start({ thinking: true });
    const free = maskOf(c);
    expect(allowedTokens(free, vocab.size).length).toBe(vocab.size - vocab.stopTokens.length);
    for (const s of vocab.stopTokens) expect(c.accept(s)).toBe(false);
    const words = [vocab.tokens.indexOf("in"), vocab.tokens.indexOf("Ġthe"), vocab.added.get("</think>")!];
    for (const t of words) expect(c.accept(t)).toBe(true);
    expect(maskOf(c)).toEqual(initial);
    expect(c.isComplete()).toBe(false);
    const first = allowedTokens(initial, vocab.size)[0]!;
    expect(c.accept(first)).toBe(true);
    c.rollback(2); // the answer token and </think>
    expect(maskOf(c)).toEqual(free);
    expect(c.accept(vocab.added.get("</think>")!)).toBe(true);
    expect(maskOf(c)).toEqual(initial);
    c.release();
  });

  test("thinking: the text </think> is written only as the </think> token (the parser leaves reasoning at the text)", async () => {
    const c = await grammar.start({ thinking: true });
    const id = (t: string) => vocab.tokens.indexOf(t);
    for (const t of ["<", "/", "th", "ink"]) expect(c.accept(id(t))).toBe(true);
    expect(has(maskOf(c), id(">"))).toBe(false);
    expect(c.accept(id(">"))).toBe(false);
    expect(c.accept(id("x"))).toBe(true); // "</thinkx": the match is broken, ">" is fine again
    expect(has(maskOf(c), id(">"))).toBe(true);
    c.rollback(1);
    expect(has(maskOf(c), id(">"))).toBe(false);
    expect(c.accept(vocab.added.get("</think>")!)).toBe(true);
    c.release();
  });

  test("checkDraft: accepted prefix, masks per position, rollback after verification", async () => {
    const tokens = sample(m, await grammar.start({ thinking: false }), rng(4)).tokens;
    const c = await grammar.start({ thinking: false });
    const reference = await grammar.start({ thinking: false });
    const bad = vocab.added.get("<think>")!;
    const draft = [...tokens.slice(0, 5), bad, tokens[5]!];
    const masks = Array.from({ length: draft.length + 1 }, () => new Uint32Array(Math.ceil(vocab.size / 32)));
    expect(checkDraft(c, draft, masks)).toBe(5);
    for (let i = 0; i <= 5; i++) {
      expect(masks[i]).toEqual(maskOf(reference));
      if (i < 5) reference.accept(tokens[i]!);
    }
    c.rollback(3); // the target model kept 2 of the 5
    reference.rollback(3);
    expect(maskOf(c)).toEqual(maskOf(reference));
    expect(checkDraft(c, tokens.slice(2))).toBe(tokens.length - 2);
    expect(c.isComplete()).toBe(true);
    c.release();
    reference.release();
  });

  test("sequences are independent (batching): interleaved equals alone", async () => {
    const a = sample(m, await grammar.start({ thinking: false }), rng(5)).tokens;
    const b = sample(m, await grammar.start({ thinking: false }), rng(6)).tokens;
    const [ca, cb] = [await grammar.start({ thinking: false }), await grammar.start({ thinking: false })];
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i < a.length) expect(ca.accept(a[i]!)).toBe(true);
      if (i < b.length) expect(cb.accept(b[i]!)).toBe(true);
    }
    expect([ca.isComplete(), cb.isComplete()]).toEqual([true, true]);
    ca.release();
    cb.release();
  });

  test("grammars are cached per vocabulary and grammar text", async () => {
    const again = await so.prepare({ ...request, responseFormat: { type: "json_schema", schema: { ...SCHEMA, title: "same grammar" } } });
    expect(again!.compiled).toBe(grammar.compiled); // the same compiled grammar object: no second compile
  });

  test("requests that differ only in their counts share the compiled grammar and keep their own counts", async () => {
    const schema = (maxLength: number) => ({ type: "object", properties: { name: { type: "string", maxLength } }, required: ["name"] });
    const [two, five] = await Promise.all([2, 5].map((n) => so.prepare({ ...request, responseFormat: { type: "json_schema", schema: schema(n) } })));
    expect(two!.compiled).toBe(five!.compiled);
    const lengths = async (g: PreparedGrammar) => {
      const out: number[] = [];
      for (let i = 0; i < 20; i++) {
        const c = await g.start({ thinking: false });
        out.push([...(JSON.parse(sample(m, c, rng(50 + i)).text) as { name: string }).name].length);
        c.release();
      }
      return Math.max(...out);
    };
    expect(await lengths(two!)).toBeLessThanOrEqual(2);
    expect(await lengths(five!)).toBeGreaterThan(2);
  });

  test("UTF-8 guard: inside a character only its continuation bytes may follow", async () => {
    const g = (await so.prepare({ ...request, responseFormat: { type: "json_schema", schema: { type: "string" } } }))!;
    const c = await g.start({ thinking: false });
    const byte = (b: number) => vocab.tokens.findIndex((_, id) => !vocab.special.has(id) && tokenBytes(vocab, id).length === 1 && tokenBytes(vocab, id)[0] === b);
    expect(c.accept(byte(0x22))).toBe(true); // "
    expect(c.accept(byte(0xe4))).toBe(true); // lead byte of a 3-byte character
    const allowed = allowedTokens(maskOf(c), vocab.size);
    expect(allowed.length).toBeGreaterThan(0);
    for (const id of allowed) expect(tokenBytes(vocab, id)[0]! & 0xc0).toBe(0x80);
    expect(c.accept(byte(0x41))).toBe(false); // "A" would break the character
    expect(c.accept(byte(0xb8))).toBe(true);
    expect(c.accept(byte(0xad))).toBe(true); // 中
    expect(c.accept(byte(0x22))).toBe(true);
    expect(c.isComplete()).toBe(true);
    c.release();
  });
});
