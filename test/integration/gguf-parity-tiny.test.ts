// The embedded model (splash-tiny, a real trained qwen3_5 with tokenizer and chat template) exported to GGUF and run
// in llama.cpp (node-llama-cpp 3.21.1, CPU, flash attention off, F32 KV): the same distribution as Splash on the
// safetensors (f32: same argmax everywhere, |Δ log-prob| ≤ 1e-3, measured ~3e-4; f16: same argmax; q8_0: ≥ 90%,
// measured 95%), and llama.cpp tokenizes text exactly as Splash does (pre-tokenizer qwen35, merges, added tokens).
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LlamaPeer } from "../../src/bench/peers-client.ts";
import { NODE_LLAMA_CPP_INSTALL_TIMEOUT_MS } from "../../src/bench/node-llama-cpp.ts";
import { exportGguf } from "../../src/gguf/export.ts";
import type { Model } from "../../src/native/model.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { parity, type ParityContext } from "./gguf-parity-lib.ts";

const TINY = join(import.meta.dir, "../../models/splash-tiny");
let dir: string;
let peer: LlamaPeer;
const models = new Map<string, Model>();
const ctx = (): ParityContext => ({ dir, peer, models });

// the first run installs node-llama-cpp (src/bench/node-llama-cpp.ts)
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "splash-gguf-tiny-"));
  peer = await LlamaPeer.start();
}, NODE_LLAMA_CPP_INSTALL_TIMEOUT_MS + 60_000);

afterAll(async () => {
  await peer?.close();
  for (const m of models.values()) m.free();
  rmSync(dir, { recursive: true, force: true });
});

test("f32: same argmax everywhere, log-probs within 1e-3", async () => {
  const c = await parity(ctx(), TINY, "f32", [9, 70]);
  expect(c.argmaxAgree).toBe(c.positions);
  expect(c.maxAbsDelta).toBeLessThan(1e-3);
}, 60_000);

test("f16: same argmax everywhere", async () => {
  const c = await parity(ctx(), TINY, "f16", [9, 70]);
  expect(c.argmaxAgree).toBe(c.positions);
}, 60_000);

test("q8_0: argmax mostly the unquantized one", async () => {
  const c = await parity(ctx(), TINY, "q8_0", [9, 70]);
  expect(c.argmaxAgree / c.positions).toBeGreaterThanOrEqual(0.9);
}, 60_000);

test("llama.cpp tokenizes text as Splash does with the exported tokenizer (pre-tokenizer qwen35)", async () => {
  const file = join(dir, "tokenizer.gguf");
  exportGguf(TINY, file, "q8_0");
  await peer.load({ model: file, contextSize: 256 });
  const tok = await Tokenizer.load(TINY);
  const texts = [
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "Hello, world! It's 2026; naïve café — 日本語 テスト 🎉",
    "  multiple   spaces\n\n\ttabs\r\n123456 x̃ é <|im_end|>",
  ];
  for (const text of texts) {
    const theirs = (await peer.request<{ tokens: number[] }>({ op: "tokenize", text })).tokens;
    expect(theirs).toEqual(Array.from(tok.encode(text)));
  }
}, 60_000);
