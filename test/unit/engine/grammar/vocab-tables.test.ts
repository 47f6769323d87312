// The vocabulary's tables (vocab-tables.ts): built once per tokenizer by a grammar worker and kept on disk under the
// cache directory, keyed by the vocabulary; read back identical; a damaged or foreign file is rebuilt.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { StructuredOutput, type Vocabulary } from "../../../../src/engine/grammar/index.ts";
import { buildTables, readTables, tablesPath, writeTables } from "../../../../src/engine/grammar/vocab-tables.ts";
import { model, rng, sample, smallVocabulary } from "../../../fixtures/grammar/harness.ts";

let vocab: Vocabulary;
let cache: string;
const saved = process.env.SPLASH_CACHE_DIR;
beforeAll(async () => {
  vocab = await smallVocabulary();
  cache = mkdtempSync(join(tmpdir(), "splash-grammar-tables-"));
  process.env.SPLASH_CACHE_DIR = cache;
});
afterAll(() => {
  if (saved === undefined) delete process.env.SPLASH_CACHE_DIR;
  else process.env.SPLASH_CACHE_DIR = saved;
  rmSync(cache, { recursive: true, force: true });
});

test("tables read back equal to the built ones; a damaged file reads as none", () => {
  const path = join(cache, "t.bin");
  const built = buildTables(vocab);
  writeTables(path, built);
  expect(readTables(path, vocab)).toEqual(built);
  expect(readTables(path, { ...vocab, size: vocab.size + 32 })).toBeNull(); // another vocabulary's
  writeFileSync(path, new Uint8Array(100));
  expect(readTables(path, vocab)).toBeNull();
  expect(readTables(join(cache, "missing.bin"), vocab)).toBeNull();
});

test("the first load builds them in the worker and keeps them; the next load reads them; grammars work from either", async () => {
  const path = tablesPath(vocab);
  expect(path.startsWith(join(cache, "grammar"))).toBe(true);
  const schema = { type: "object", properties: { s: { type: "string", maxLength: 4 } }, required: ["s"] };
  const request = { responseFormat: { type: "json_schema" as const, schema }, tools: [], toolChoice: "auto" as const, parallelToolCalls: false };
  const first = await StructuredOutput.create(vocab);
  const kept = statSync(path).mtimeMs;
  expect(readdirSync(join(cache, "grammar"))).toEqual([path.split("/").pop()!]);
  const second = await StructuredOutput.create(vocab);
  expect(statSync(path).mtimeMs).toBe(kept); // read, not rebuilt
  for (const so of [first, second]) {
    const out = sample(model(vocab, "uniform", 2), await (await so.prepare(request))!.start({ thinking: false }), rng(9));
    expect([...(JSON.parse(out.text) as { s: string }).s].length).toBeLessThanOrEqual(4);
    so.close();
  }
});
