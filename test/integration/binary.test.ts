// The single executable: built once, copied alone into an empty directory, it runs and extracts its library.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { $ } from "bun";
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { repoRoot } from "../helpers/cli.ts";

let dir: string;
const run = (args: string[], home: string) =>
  Bun.spawn([join(dir, "splash"), ...args], { cwd: dir, env: { PATH: process.env.PATH ?? "", HOME: home }, stdout: "pipe", stderr: "pipe" });

beforeAll(async () => {
  await $`bun run build`.cwd(repoRoot).quiet();
  dir = mkdtempSync(join(tmpdir(), "splash-bin-"));
  copyFileSync(join(repoRoot, "dist/splash"), join(dir, "splash"));
}, 300_000);

// the binary is ~100 MB: not left behind
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("dist/splash", () => {
  test("answers --version and doctor from an empty directory", async () => {
    const home = mkdtempSync(join(tmpdir(), "splash-home-"));
    const v = run(["--version"], home);
    expect(await v.exited).toBe(0);
    expect((await new Response(v.stdout).text()).trim()).toMatch(/^\d+\.\d+\.\d+$/);
    const d = run(["doctor", "--json"], home);
    const out = await new Response(d.stdout).text();
    expect(await d.exited).toBe(0);
    expect(JSON.parse(out).library.abi).toBeGreaterThan(0);
  });

  test("two concurrent first runs both load the library and leave one extracted copy", async () => {
    const home = mkdtempSync(join(tmpdir(), "splash-home-"));
    const procs = Array.from({ length: 4 }, () => run(["doctor", "--json"], home));
    const codes = await Promise.all(procs.map((p) => p.exited));
    expect(codes).toEqual([0, 0, 0, 0]);
    const libDir = join(home, ".cache", "splash", "lib");
    const files = readdirSync(libDir);
    expect(files.filter((f) => f.endsWith(".tmp"))).toEqual([]);
    expect(files.filter((f) => /^libsplash.*\.(so|dylib)$/.test(f))).toHaveLength(1);
  });

  test("runs the embedded model with nothing else on disk, extracting it once even when started twice at once", async () => {
    const home = mkdtempSync(join(tmpdir(), "splash-home-"));
    const procs = [0, 1].map(() => run(["run", "def add(a, b):", "--max-tokens", "8", "--temperature", "0", "--no-think"], home));
    const outs = await Promise.all(procs.map((p) => new Response(p.stdout).text()));
    expect(await Promise.all(procs.map((p) => p.exited))).toEqual([0, 0]);
    expect(outs[0]!.length).toBeGreaterThan(0);
    expect(outs[1]).toBe(outs[0]!); // greedy: the same answer
    const models = readdirSync(join(home, ".cache", "splash", "models"));
    expect(models.filter((f) => f.startsWith("splash-tiny-") && !f.endsWith(".tmp"))).toHaveLength(1);
    expect(models.filter((f) => f.endsWith(".tmp"))).toEqual([]);
    // what `models` reports and `tokenize` reads is that extracted copy, not a path inside the binary
    const extracted = join(home, ".cache", "splash", "models", models.find((f) => f.startsWith("splash-tiny-"))!);
    const list = run(["models", "--json"], home);
    const listed = JSON.parse(await new Response(list.stdout).text()) as { id: string; loadsFrom: string; files: { installed: { dir: string; complete: boolean } }[] }[];
    expect(await list.exited).toBe(0);
    const tiny = listed.find((m) => m.id === "splash-tiny")!;
    expect(tiny.loadsFrom).toBe(extracted);
    expect(tiny.files[0]!.installed).toMatchObject({ dir: extracted, complete: true });
    const tok = Bun.spawn([join(dir, "splash"), "tokenize"], { cwd: dir, env: { PATH: process.env.PATH ?? "", HOME: home }, stdin: new Blob(["def add(a, b):"]), stdout: "pipe" });
    const ids = JSON.parse(await new Response(tok.stdout).text()) as number[];
    expect(await tok.exited).toBe(0);
    expect(ids.length).toBeGreaterThan(0);
  }, 120_000);

  test("serves the built-in page, bundled into it at build time", async () => {
    const home = mkdtempSync(join(tmpdir(), "splash-home-"));
    const proc = run(["serve", "--port", "0"], home);
    try {
      const reader = proc.stdout.getReader();
      let out = "";
      while (!out.includes('"listening"')) {
        const { value, done } = await reader.read();
        if (done) throw new Error("splash serve exited before listening");
        out += new TextDecoder().decode(value);
      }
      const { url } = JSON.parse(out.split("\n").find((l) => l.includes('"listening"'))!) as { url: string };
      const res = await fetch(`${url}/`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-security-policy")).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+={0,2}'/);
      const html = await res.text();
      expect(html).toContain('id="messages"');
      const script = /<script type="module">([\s\S]*)<\/script>/.exec(html)?.[1] ?? "";
      expect(script).toContain("MarkdownIt"); // the bundle, its markdown renderer included
      expect((await (await fetch(`${url}/status`)).json()).models[0].id).toBe("splash-tiny");
    } finally {
      proc.kill("SIGTERM");
      await proc.exited;
    }
  }, 120_000);

  test("serves structured output: the grammar worker is bundled inside", async () => {
    const home = mkdtempSync(join(tmpdir(), "splash-home-"));
    const server = run(["serve", "--port", "0"], home);
    try {
      const reader = server.stdout.getReader();
      let text = "";
      while (!text.includes('"listening"')) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`serve ended: ${text}`);
        text += new TextDecoder().decode(value);
      }
      const url = (JSON.parse(text.split("\n").find((l) => l.includes('"listening"'))!) as { url: string }).url;
      const schema = { type: "object", properties: { name: { type: "string", maxLength: 3 }, tags: { type: "array", items: { type: "integer" }, minItems: 1, maxItems: 2 } }, required: ["name", "tags"] };
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "splash-tiny", max_tokens: 60, messages: [{ role: "user", content: "JSON please" }], response_format: { type: "json_schema", json_schema: { name: "x", schema } } }),
      });
      expect(res.status).toBe(200);
      const value = JSON.parse(((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content) as { name: string; tags: number[] };
      expect([...value.name].length).toBeLessThanOrEqual(3);
      expect(value.tags.length).toBeGreaterThanOrEqual(1);
      expect(value.tags.length).toBeLessThanOrEqual(2);
    } finally {
      server.kill();
      await server.exited;
    }
  }, 120_000);
});
