// The README and docs/ stay true to the repository: every file path they name exists, nothing points outside the
// repository (a reader of a clone has nothing else), every command `splash --help` lists has a README row, and the
// architecture map places every folder of src/ and native/.
import { describe, expect, test } from "bun:test";
import { Glob } from "bun";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { SubCommandsDef } from "citty";
import { root } from "../../src/cli/index.ts";
import { repoRoot } from "../helpers/cli.ts";

const docs = ["README.md", ...readdirSync(join(repoRoot, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)];
const text = (doc: string) => readFileSync(join(repoRoot, doc), "utf8");
const TOP = /^(src|native|test|docs|kernels|models|scripts|packaging|\.ci|\.github)\//;
const TREE = ["src", "native", "test", "kernels", "scripts", "packaging"];

// The name of every file under the source folders (docs/ name sources by their plain name where the folder is clear
// from the sentence: `scheduler.ts`, `ffn.c`).
const fileNames = new Set(TREE.flatMap((dir) => [...new Glob(`${dir}/**/*`).scanSync({ cwd: repoRoot, dot: true })].map((f) => f.split("/").at(-1)!)));

describe.each(docs)("%s", (doc) => {
  test("every repository path it names exists", () => {
    const paths = [...text(doc).matchAll(/`([^`\s]+)`/g)].map((m) => m[1]!.replace(/[),.:;]+$/, "")).filter((p) => TOP.test(p));
    expect(paths.length).toBeGreaterThan(0);
    // a placeholder (`models/<id>/spec.json`) stands for any name, as a glob's * does
    const missing = paths.map((p) => p.replace(/<[^>]*>/g, "*")).filter((p) => (p.includes("*") ? [...new Glob(p).scanSync({ cwd: repoRoot, dot: true, onlyFiles: false })].length === 0 : !existsSync(join(repoRoot, p))));
    expect(missing).toEqual([]);
  });

  test.if(doc.startsWith("docs/"))("every source file it names by its plain name exists", () => {
    const names = [...text(doc).matchAll(/`([\w.-]+\.(?:ts|mjs|c|h|comp|py|sh))`/g)].map((m) => m[1]!).filter((n) => !n.startsWith("."));
    if (doc === "docs/ARCHITECTURE.md") expect(names.length).toBeGreaterThan(20); // the map names its files so
    expect(names.filter((n) => !fileNames.has(n))).toEqual([]);
  });

  // Examples may name this machine or a single-label host on the user's network (`--url http://gpu-box:8000`);
  // nothing may point at a site on the web.
  test("nothing outside the repository: no ../ paths, no web links but local ones", () => {
    const t = text(doc);
    expect(t).not.toMatch(/(^|[\s`(])\.\.\//m);
    const urls = [...t.matchAll(/https?:\/\/[^\s`)"']+/g)].map((m) => m[0]);
    expect(urls.filter((u) => !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]|[a-z0-9-]+)[:/]/.test(u))).toEqual([]);
  });
});

test("the README has a row for every command", async () => {
  const readme = text("README.md");
  expect(readme).toContain("docs/ARCHITECTURE.md");
  const subs = (await (typeof root.subCommands === "function" ? root.subCommands() : root.subCommands)) as SubCommandsDef;
  const missing = Object.keys(subs).filter((name) => !new RegExp(`^\\| [^|]*\`${name}[\` ]`, "m").test(readme));
  expect(missing).toEqual([]);
});

test("the architecture map names every folder of src/ and native/", () => {
  const map = text("docs/ARCHITECTURE.md");
  const folders = ["src", "native"].flatMap((top) => readdirSync(join(repoRoot, top), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => `${top}/${e.name}/`));
  expect(folders.length).toBeGreaterThan(10);
  expect(folders.filter((f) => !map.includes(`\`${f}`) && !map.includes(`\`${f.slice(0, -1)}\``))).toEqual([]);
});
