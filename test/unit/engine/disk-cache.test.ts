// The prefix cache's disk tier (src/engine/disk-cache.ts): entries round-trip, a damaged one is refused and deleted,
// the files stay under the budget least-recently-used first, two caches on one directory share it safely, and
// leftovers of a dead writer are cleaned. Then the engine on the toy model (toy-runner.ts): a restart (a new engine
// on the same directory) serves a prompt's prefix from disk with the output of a cold run; a damaged entry costs a
// prefill, never the request; the disk part of a prefix is read in the background and a cancel during it is clean.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BlockHash } from "../../../src/engine/block-hash.ts";
import { DiskPrefixCache } from "../../../src/engine/disk-cache.ts";
import { SplashEngine, type EngineOptions } from "../../../src/engine/engine.ts";
import { planMemory } from "../../../src/engine/memory-plan.ts";
import type { EngineEvent, GenerateRequest, Sampling } from "../../../src/engine/types.ts";
import type { Machine } from "../../../src/machine.ts";
import { ToyModel, toyPrompt } from "./toy-runner.ts";

const tmp = mkdtempSync(join(tmpdir(), "splash-disk-cache-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => join(tmp, `d${dirs++}`);

const h = (s: string) => s.padEnd(22, "x") as BlockHash;
const bytes = (n: number, fill: number) => new Uint8Array(n).fill(fill);

describe("DiskPrefixCache", () => {
  test("an entry round-trips; a missing one is a miss", async () => {
    const c = new DiskPrefixCache({ dir: freshDir(), budget: 1 << 20, entryBytes: { page: 16, state: 4 } });
    c.write("page", h("a"), bytes(16, 7));
    c.write("state", h("a"), bytes(4, 9));
    await c.flush();
    expect(c.has("page", h("a"))).toBe(true);
    expect(await c.read("page", h("a"))).toEqual(bytes(16, 7));
    expect(await c.read("state", h("a"))).toEqual(bytes(4, 9));
    expect(await c.read("page", h("b"))).toBeUndefined();
    expect(c.stats()).toMatchObject({ files: 2, bytes: 2 * 64 + 20, hits: 2, misses: 1, writes: 2, refused: 0 });
    expect(() => c.write("page", h("c"), bytes(15, 0))).toThrow("a page entry is 16 bytes, not 15");
  });

  test("a damaged entry (flipped payload byte, truncated, another entry's file) is refused and deleted", async () => {
    const dir = freshDir();
    const c = new DiskPrefixCache({ dir, budget: 1 << 20, entryBytes: { page: 16, state: 4 } });
    for (const k of ["a", "b", "c"]) c.write("page", h(k), bytes(16, 1));
    await c.flush();
    const file = (k: string) => join(dir, `${h(k)}.page`);
    const a = readFileSync(file("a"));
    a[70]! ^= 1;
    writeFileSync(file("a"), a);
    writeFileSync(file("b"), readFileSync(file("b")).subarray(0, 70));
    writeFileSync(file("c"), readFileSync(join(dir, `${h("a")}.page`))); // a's bytes under c's name
    for (const k of ["a", "b", "c"]) {
      expect(await c.read("page", h(k))).toBeUndefined();
      expect(existsSync(file(k))).toBe(false);
    }
    expect(c.stats().refused).toBe(3);
  });

  test("over the budget the least recently used entries go; a read makes an entry recent", async () => {
    const dir = freshDir();
    const entry = 64 + 100;
    const c = new DiskPrefixCache({ dir, budget: 3 * entry, entryBytes: { page: 100, state: 4 } });
    for (const [i, k] of ["a", "b", "c"].entries()) {
      c.write("page", h(k), bytes(100, i));
      await c.flush();
      utimesSync(join(dir, `${h(k)}.page`), new Date(1000 * (i + 1)), new Date(1000 * (i + 1))); // a oldest
    }
    expect(await c.read("page", h("a"))).toEqual(bytes(100, 0)); // a is now the most recent
    c.write("page", h("d"), bytes(100, 3));
    await c.flush();
    expect(["a", "b", "c", "d"].map((k) => c.has("page", h(k)))).toEqual([true, false, true, true]);
    expect(c.stats()).toMatchObject({ files: 3, bytes: 3 * entry, evicted: 1 });
  });

  test("two caches on one directory: the same entry written by both is one good file, each reads the other's", async () => {
    const dir = freshDir();
    const one = new DiskPrefixCache({ dir, budget: 1 << 20, entryBytes: { page: 1000, state: 4 } });
    const two = new DiskPrefixCache({ dir, budget: 1 << 20, entryBytes: { page: 1000, state: 4 } });
    for (let i = 0; i < 20; i++) {
      one.write("page", h(`s${i}`), bytes(1000, i));
      two.write("page", h(`s${i}`), bytes(1000, i));
    }
    two.write("page", h("only2"), bytes(1000, 99));
    await Promise.all([one.flush(), two.flush()]);
    expect(readdirSync(dir).filter((f) => f.endsWith(".tmp"))).toEqual([]);
    for (let i = 0; i < 20; i++) expect(await two.read("page", h(`s${i}`))).toEqual(bytes(1000, i));
    expect(await one.read("page", h("only2"))).toEqual(bytes(1000, 99));
  });

  test("a writer's temporary file is cleaned at start once its process is gone, kept while it lives", () => {
    const dir = freshDir();
    new DiskPrefixCache({ dir, budget: 1 << 20, entryBytes: { page: 4, state: 4 } });
    writeFileSync(join(dir, `${h("x")}.page.999999999.abc.tmp`), "partial");
    writeFileSync(join(dir, `${h("y")}.page.${process.pid}.abc.tmp`), "partial");
    new DiskPrefixCache({ dir, budget: 1 << 20, entryBytes: { page: 4, state: 4 } });
    expect(readdirSync(dir).sort()).toEqual([`${h("y")}.page.${process.pid}.abc.tmp`]);
  });
});

const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const bigMachine: Machine = { os: "linux", arch: "x64", cpuModel: "toy", cores: 2, totalMemory: 1e12, availableMemory: 1e12 };

// A toy engine whose host copies match the plan's sizes (4 bytes a position, 4 a slot).
function engine(options: EngineOptions = {}) {
  const model = new ToyModel({ kvBytesPerToken: 4, slotBytes: 4 });
  const pageTokens = 4;
  const plan = planMemory(model, { kvBudget: 1e5, pageTokens, maxSeqs: 8 }, bigMachine);
  const runner = model.createRunner({ pageTokens, nPages: plan.nPages, nSlots: plan.nSlots });
  const e = new SplashEngine(model, runner, plan, { maxStepTokens: 32, snapshotInterval: 16, cacheSalt: "toy", ...options, pageTokens });
  runner.readOnly = (page) => e.cache.pool.refCount(page) > 1 || e.cache.pool.pageHashOf(page) !== undefined;
  return { e, runner };
}

function request(prompt: Int32Array, maxTokens: number, signal = new AbortController().signal): GenerateRequest {
  return { prompt, maxTokens, sampling: greedy, stopTokens: [], signal };
}

async function collect(stream: AsyncIterable<EngineEvent>): Promise<{ tokens: number[]; cached: number; reason: string }> {
  const out = { tokens: [] as number[], cached: -1, reason: "" };
  for await (const ev of stream) {
    if (ev.type === "admitted") out.cached = ev.cachedPromptTokens;
    if (ev.type === "tokens") out.tokens.push(...ev.tokens.map((t) => t.id));
    if (ev.type === "done") out.reason = ev.reason;
  }
  return out;
}

describe("the engine with a disk tier (toy model)", () => {
  const prompt = toyPrompt(70, 5); // snapshots at 16, 32, 48 and 68 (the last block boundary before token 70)

  test("after a restart the prefix comes from disk: the output of a cold run, fewer tokens computed", async () => {
    const dir = freshDir();
    const cold = engine({ prefixCache: false });
    const want = await collect(cold.e.generate(request(prompt, 12)));
    await cold.e.close();

    const first = engine({ diskCache: { dir, budget: 1 << 20 } });
    const a = await collect(first.e.generate(request(prompt, 12)));
    await first.e.close(); // flushes the writes
    expect(a).toEqual({ ...want, cached: 0 });

    const second = engine({ diskCache: { dir, budget: 1 << 20 } });
    const b = await collect(second.e.generate(request(prompt, 12)));
    expect(b).toEqual({ ...want, cached: 68 });
    const s = second.e.stats();
    expect(s.promptTokensComputed).toBe(70 - 68);
    expect(s.prefixCacheTiers).toMatchObject({ memory: { hitTokens: 0 }, disk: { hitTokens: 68, hits: 18 } }); // 17 pages + the state
    // now hot in memory as well: the next identical request is a memory hit
    const c = await collect(second.e.generate(request(prompt, 12)));
    expect(c).toEqual({ ...want, cached: 68 });
    expect(second.e.stats().prefixCacheTiers?.memory.hitTokens).toBe(68);
    await second.e.close();
  });

  test("a longer prompt resumes from a disk snapshot inside the shared part (the rolling ones every 16 tokens)", async () => {
    const dir = freshDir();
    const first = engine({ diskCache: { dir, budget: 1 << 20 } });
    await collect(first.e.generate(request(prompt, 2)));
    await first.e.close();
    const other = Int32Array.from([...prompt.subarray(0, 40), ...toyPrompt(30, 99)]); // diverges at 40
    const cold = engine({ prefixCache: false });
    const want = await collect(cold.e.generate(request(other, 8)));
    await cold.e.close();
    const second = engine({ diskCache: { dir, budget: 1 << 20 } });
    expect(await collect(second.e.generate(request(other, 8)))).toEqual({ ...want, cached: 32 });
    await second.e.close();
  });

  test("a damaged entry costs a prefill, not the request: the output is the cold run's", async () => {
    const dir = freshDir();
    const first = engine({ diskCache: { dir, budget: 1 << 20 } });
    const want = await collect(first.e.generate(request(prompt, 12)));
    await first.e.close();
    const root = readdirSync(dir)[0]!;
    const pages = readdirSync(join(dir, root)).filter((f) => f.endsWith(".page"));
    for (const f of pages) writeFileSync(join(dir, root, f), "not an entry");
    const second = engine({ diskCache: { dir, budget: 1 << 20 } });
    const b = await collect(second.e.generate(request(prompt, 12)));
    expect(b).toEqual({ ...want, cached: 0 });
    expect(second.e.stats().prefixCacheTiers?.disk?.refused).toBeGreaterThan(0);
    expect(second.e.stats().promptTokensComputed).toBe(70);
    await second.e.close();
  });

  test("a request cancelled while its prefix is read from disk ends cleanly and holds nothing", async () => {
    const dir = freshDir();
    const first = engine({ diskCache: { dir, budget: 1 << 20 } });
    await collect(first.e.generate(request(prompt, 2)));
    await first.e.close();
    const second = engine({ diskCache: { dir, budget: 1 << 20 } });
    const ac = new AbortController();
    const run = collect(second.e.generate(request(prompt, 12, ac.signal)));
    ac.abort(); // before the loop applied the read
    expect((await run).reason).toBe("cancelled");
    await Bun.sleep(50); // the read completes and is dropped
    const s = second.e.stats();
    expect([s.running, s.queued, s.sequenceStateBytes]).toEqual([0, 0, 0]);
    expect(second.e.cache.outstandingPages).toBe(0);
    await second.e.close();
  });

  test("without a disk tier (or with the prefix cache off) nothing is written", async () => {
    const dir = freshDir();
    const { e } = engine({ prefixCache: false, diskCache: { dir, budget: 1 << 20 } });
    await collect(e.generate(request(prompt, 4)));
    await e.close();
    expect(existsSync(dir)).toBe(false);
    expect(e.stats().prefixCacheTiers?.disk).toBeUndefined();
  });
});
