// The prefix cache's disk tier through `splash serve` (splash-tiny, int8 KV, the MTP drafter: pages carry its K/V):
// a conversation's prefix is served from disk after the server restarts, with the same answer as before; two
// servers share one cache directory; with --disk-cache 0 a restart starts cold; /metrics shows the tiers.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splashServe, type ServeProcess } from "../helpers/splash-serve.ts";

const cacheDir = mkdtempSync(join(tmpdir(), "splash-prefix-disk-"));
afterAll(() => rmSync(cacheDir, { recursive: true, force: true }));
const env = { SPLASH_CACHE_DIR: cacheDir };

// A long system prompt, as an agent sends: several blocks of 64 tokens and a rolling snapshot inside.
const system = Array.from({ length: 60 }, (_, i) => `Rule ${i}: keep functions short, name things plainly, test what you change.`).join("\n");

async function ask(server: ServeProcess, question: string, stream = false): Promise<{ text: string; cached: number }> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "splash-tiny",
      messages: [{ role: "system", content: system }, { role: "user", content: question }],
      max_tokens: 24,
      temperature: 0,
      stream,
      ...(stream ? { stream_options: { include_usage: true } } : {}),
    }),
  });
  expect(res.status).toBe(200);
  if (!stream) {
    const body = (await res.json()) as { choices: { message: { content: string } }[]; usage: { prompt_tokens_details?: { cached_tokens?: number } } };
    return { text: body.choices[0]!.message.content, cached: body.usage.prompt_tokens_details?.cached_tokens ?? 0 };
  }
  let text = "";
  let cached = -1;
  for (const line of (await res.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice(6)) as { choices: { delta: { content?: string } }[]; usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
    text += chunk.choices[0]?.delta.content ?? "";
    if (chunk.usage) cached = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
  }
  return { text, cached };
}

async function metric(server: ServeProcess, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(" ").at(-1)) : NaN;
}

describe("prefix cache on disk across restarts", () => {
  const question = "Write a Python function that reverses a string.";
  let first: { text: string; cached: number };

  test("first server: a cold answer; the prefix goes to disk", async () => {
    const server = await splashServe(["--disk-cache", "256M"], env);
    try {
      first = await ask(server, question);
      expect(first.cached).toBe(0);
      expect(first.text.length).toBeGreaterThan(0);
      expect(await metric(server, "splash_prefix_cache_disk_budget_bytes", "")).toBe(256 * 2 ** 20);
      expect(server.log()).toMatch(/prefix cache on disk: .* in .*prefix/);
    } finally {
      await server.stop(); // flushes the writes
    }
    const dirs = readdirSync(join(cacheDir, "prefix"));
    expect(dirs.length).toBe(1);
    const files = readdirSync(join(cacheDir, "prefix", dirs[0]!));
    expect(files.some((f) => f.endsWith(".state"))).toBe(true);
    expect(files.some((f) => f.endsWith(".tmp"))).toBe(false);
  }, 120_000);

  test("after a restart: the prefix is read from disk, the answer is the same, streamed or not", async () => {
    const server = await splashServe(["--disk-cache", "256M"], env);
    try {
      const again = await ask(server, question, true);
      expect(again.text).toBe(first.text);
      expect(again.cached).toBeGreaterThan(0);
      expect(await metric(server, "splash_prefix_cache_tier_hit_tokens_total", 'tier="disk"')).toBe(again.cached);
      expect(await metric(server, "splash_prefix_cache_disk_io_bytes_total", 'direction="read"')).toBeGreaterThan(0);
      // a different question after the same system prompt resumes from the system prompt's snapshot (in memory now)
      const other = await ask(server, "Write a Python function that adds two numbers.");
      expect(other.cached).toBeGreaterThan(0);
      expect(await metric(server, "splash_prefix_cache_tier_hit_tokens_total", 'tier="memory"')).toBe(other.cached);
    } finally {
      await server.stop();
    }
  }, 120_000);

  test("two servers on one cache directory at once: the same answers, both from disk", async () => {
    const [a, b] = await Promise.all([splashServe(["--disk-cache", "256M"], env), splashServe(["--disk-cache", "256M"], env)]);
    try {
      const [x, y] = await Promise.all([ask(a, question), ask(b, question)]);
      expect([x.text, y.text]).toEqual([first.text, first.text]);
      expect(x.cached).toBeGreaterThan(0);
      expect(y.cached).toBeGreaterThan(0);
      const [p, q] = await Promise.all([ask(a, "Write a Python function that sorts a list."), ask(b, "Write a Python function that sorts a list.")]);
      expect(p.text).toBe(q.text);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    const dir = join(cacheDir, "prefix", readdirSync(join(cacheDir, "prefix"))[0]!);
    expect(readdirSync(dir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  }, 180_000);

  test("--disk-cache 0: a restart starts cold, and /metrics has no disk tier", async () => {
    const server = await splashServe(["--disk-cache", "0"], env);
    try {
      const cold = await ask(server, question);
      expect(cold).toEqual({ text: first.text, cached: 0 });
      expect(await metric(server, "splash_prefix_cache_disk_budget_bytes", "")).toBeNaN();
      expect(await metric(server, "splash_prefix_cache_bytes", 'tier="memory"')).toBeGreaterThan(0);
    } finally {
      await server.stop();
    }
  }, 120_000);

  test("a bad --disk-cache is a usage error", async () => {
    await expect(splashServe(["--disk-cache", "lots"], env)).rejects.toThrow("--disk-cache");
  });
});
