// The model / cache / step binding on the tiny fixture checkpoints: what a load reports, refusals with the status
// and a message naming the tensor and file, cache sizes and copy/clear semantics, argument checks of a step,
// and sampling (greedy = argmax of the returned logits, the same draw alone or batched, top logprobs).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Sampling } from "../../../src/engine/types.ts";
import { NativeError, StepRefusals } from "../../../src/native/errors.ts";
import { Model, type StepInput } from "../../../src/native/model.ts";
import { readSafetensorsHeader } from "../../../src/models/safetensors.ts";

const FIXTURES = join(import.meta.dir, "../../fixtures/models");
const DENSE = join(FIXTURES, "qwen35-dense-tiny");
const greedy: Sampling = { temperature: 0, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 0 };
const tokens = Int32Array.from([5, 17, 300, 2, 999, 41, 7, 7, 64]);
const pages = Int32Array.from([0, 1]);

async function nativeError(p: Promise<unknown> | (() => unknown)): Promise<NativeError> {
  try {
    await (typeof p === "function" ? p() : p);
  } catch (e) {
    if (e instanceof NativeError) return e;
    throw e;
  }
  throw new Error("expected a NativeError");
}

// A copy of a fixture with config.json edited.
function withConfig(src: string, edit: (text: Record<string, unknown>) => void): string {
  const dir = mkdtempSync(join(tmpdir(), "splash-model-"));
  const config = JSON.parse(readFileSync(join(src, "config.json"), "utf8")) as Record<string, unknown>;
  edit(config);
  writeFileSync(join(dir, "config.json"), JSON.stringify(config));
  copyFileSync(join(src, "model.safetensors"), join(dir, "model.safetensors"));
  return dir;
}

describe("loading", () => {
  test("reports the shapes and sizes of the checkpoint", async () => {
    const m = await Model.load(DENSE, { threads: 2, maxStepTokens: 64 });
    expect(m.info).toMatchObject({
      arch: "qwen3_5",
      vocabSize: 1024,
      hiddenSize: 64,
      layers: 8,
      fullAttentionLayers: 2,
      linearAttentionLayers: 6,
      hasMtp: true,
      hasVision: true,
      threads: 2,
      maxStepTokens: 64,
    });
    // K + V of 2 kv heads × 32 dims in 2 layers; S (4 × 16 × 24) + conv tail (3 × 160) in 6 layers, all f32
    expect(m.info.kvBytesPerToken).toBe(2 * 2 * 2 * 32 * 4);
    expect(m.info.stateBytes).toBe(6 * (4 * 16 * 24 + 3 * 160) * 4);
    expect(m.pageBytes(16)).toBe(16 * m.info.kvBytesPerToken);
    expect(m.slotBytes).toBe(m.info.stateBytes);
    m.free();
    m.free();
    const moe = await Model.load(join(FIXTURES, "qwen35-moe-tiny"));
    expect(moe.info.arch).toBe("qwen3_5_moe");
    expect(moe.info.maxStepTokens).toBe(512);
    moe.free();
  });

  test("a missing directory is an IO error naming it", async () => {
    const e = await nativeError(Model.load("/nonexistent/model"));
    expect(e.statusName).toBe("SPLASH_ERR_IO");
    expect(e.message).toContain("/nonexistent/model");
  });

  test("a tensor whose shape disagrees with the config is refused, naming the tensor and the file", async () => {
    const dir = withConfig(DENSE, (c) => ((c.text_config as Record<string, unknown>).intermediate_size = 96));
    const e = await nativeError(Model.load(dir));
    expect(e.statusName).toBe("SPLASH_ERR_FORMAT");
    expect(e.message).toContain("model.language_model.layers.0.mlp.gate_proj.weight");
    expect(e.message).toContain(join(dir, "model.safetensors"));
    expect(e.message).toContain("[96, 64]");
  });

  test("a missing tensor is refused by name", async () => {
    const dir = withConfig(DENSE, (c) => ((c.text_config as Record<string, unknown>).num_hidden_layers = 9));
    const tc = JSON.parse(readFileSync(join(dir, "config.json"), "utf8")) as { text_config: { layer_types: string[] } };
    tc.text_config.layer_types.push("linear_attention");
    writeFileSync(join(dir, "config.json"), JSON.stringify(tc));
    const e = await nativeError(Model.load(dir));
    expect(e.message).toContain("model.language_model.layers.8.input_layernorm.weight");
  });

  test("weights holding NaN are refused at load, naming the tensor, at every quantization", async () => {
    const dir = withConfig(DENSE, () => {});
    const file = join(dir, "model.safetensors");
    const tensor = "model.language_model.layers.3.mlp.up_proj.weight";
    const t = readSafetensorsHeader(file);
    const at = 8 + t.headerLength + t.tensors.get(tensor)!.begin;
    const data = readFileSync(file);
    data.fill(0xff, at, 8 + t.headerLength + t.tensors.get(tensor)!.end); // all-ones: NaN in BF16, F16 and F32
    writeFileSync(file, data);
    for (const quant of ["none", "q8", "q4"] as const) {
      const e = await nativeError(Model.load(dir, { quant }));
      expect(e.statusName).toBe("SPLASH_ERR_FORMAT");
      expect(e.detail).toContain(`tensor ${tensor} in ${file}: element 0 is not a finite number`);
    }
    const inf = withConfig(DENSE, () => {});
    const bytes = readFileSync(join(inf, "model.safetensors"));
    const norm = t.tensors.get("model.language_model.norm.weight")!;
    expect(norm.dtype).toBe("BF16");
    bytes.writeUInt16LE(0x7f80, 8 + t.headerLength + norm.begin + 2); // +inf at element 1
    writeFileSync(join(inf, "model.safetensors"), bytes);
    expect((await nativeError(Model.load(inf))).detail).toContain("tensor model.language_model.norm.weight in ");
  });

  test("another architecture is refused as unsupported", async () => {
    const dir = withConfig(DENSE, (c) => (c.model_type = "llama"));
    const e = await nativeError(Model.load(dir));
    expect(e.statusName).toBe("SPLASH_ERR_UNSUPPORTED");
    expect(e.message).toContain('"llama"');
  });

  test("family variants the forward pass does not compute are refused, not run without their part", async () => {
    for (const [key, value] of [["attention_bias", true], ["attn_output_gate", false], ["hidden_act", "gelu"]] as const) {
      const dir = withConfig(DENSE, (c) => ((c.text_config as Record<string, unknown>)[key] = value));
      const e = await nativeError(Model.load(dir));
      expect(e.statusName).toBe("SPLASH_ERR_UNSUPPORTED");
      expect(e.message).toContain(key);
    }
  });

  test("bad options are refused before anything loads", async () => {
    const e = await nativeError(Model.load(DENSE, { maxStepTokens: -1 }));
    expect(e.statusName).toBe("SPLASH_ERR_INVALID_ARGUMENT");
  });
});

describe("cache and step", () => {
  let model: Model;
  beforeAll(async () => {
    model = await Model.load(DENSE, { maxStepTokens: 32 });
  });
  afterAll(() => model.free());
  const V = () => model.info.vocabSize;

  function prefill(cache: ReturnType<Model["createCache"]>, slot: number, p: Int32Array, toks: Int32Array): Float32Array {
    const logits = new Float32Array(toks.length * V());
    cache.step([{ slot, nPast: 0, tokens: toks, pages: p, logits }]);
    return logits;
  }

  test("a snapshot copied to another slot, with copied pages, continues exactly like the original", () => {
    const cache = model.createCache({ pageTokens: 4, nPages: 8, nSlots: 2 });
    prefill(cache, 0, Int32Array.from([0, 1, 2]), tokens);
    cache.copySlot(0, 1);
    for (let p = 0; p < 3; p++) cache.copyPage(p, p + 4);
    const a = new Float32Array(V());
    const b = new Float32Array(V());
    cache.step([
      { slot: 0, nPast: tokens.length, tokens: Int32Array.from([3]), pages: Int32Array.from([0, 1, 2]), logits: a },
      { slot: 1, nPast: tokens.length, tokens: Int32Array.from([3]), pages: Int32Array.from([4, 5, 6]), logits: b },
    ]);
    expect(b).toEqual(a);
    cache.free();
  });

  test("pages and a slot read to host bytes and written into another cache continue exactly like the original, for every KV type (CPU) and on Vulkan", async () => {
    for (const [backend, kv] of [["cpu", "f32"], ["cpu", "f16"], ["cpu", "int8"], ["vulkan", "f32"]] as const) {
      const m = await Model.load(DENSE, { maxStepTokens: 32, backend, ...(backend === "cpu" ? { drafter: { kind: "mtp" } } : {}) });
      m.setKvType(kv);
      const a = m.createCache({ pageTokens: 4, nPages: 3, nSlots: 1 });
      const b = m.createCache({ pageTokens: 4, nPages: 6, nSlots: 2 });
      const page = new Uint8Array(m.pageBytes(4));
      const slot = new Uint8Array(m.slotBytes);
      a.step([{ slot: 0, nPast: 0, tokens, pages: Int32Array.from([0, 1, 2]) }]);
      for (let p = 0; p < 3; p++) {
        a.readPage(p, page);
        b.writePage(5 - p, page); // anywhere in the other cache
      }
      a.readSlot(0, slot);
      b.writeSlot(1, slot);
      const want = new Float32Array(m.info.vocabSize);
      const got = new Float32Array(m.info.vocabSize);
      a.step([{ slot: 0, nPast: tokens.length, tokens: Int32Array.from([3]), pages: Int32Array.from([0, 1, 2]), logits: want }]);
      b.step([{ slot: 1, nPast: tokens.length, tokens: Int32Array.from([3]), pages: Int32Array.from([5, 4, 3]), logits: got }]);
      expect(got).toEqual(want);
      // the host copy is exactly a page (the drafter's K/V included): any other length is refused
      expect((await nativeError(() => a.readPage(0, new Uint8Array(page.length - 4)))).detail).toContain(`a page of this cache is ${page.length} bytes`);
      expect((await nativeError(() => b.writeSlot(2, slot))).statusName).toBe("SPLASH_ERR_CAPACITY");
      a.free();
      b.free();
      m.free();
    }
  });

  test("position 0 starts from a zero state whatever the slot held; clearSlot empties it", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
    const first = prefill(cache, 0, pages, tokens);
    expect(prefill(cache, 0, pages, tokens)).toEqual(first);
    cache.clearSlot(0);
    expect(prefill(cache, 0, pages, tokens)).toEqual(first);
    cache.free();
  });

  test("ids outside the cache and malformed sequences are refused with the field named", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 2 });
    const cases: [() => unknown, string, string][] = [
      [() => cache.copySlot(0, 2), "SPLASH_ERR_CAPACITY", "slot 2"],
      [() => cache.copyPage(-1, 0), "SPLASH_ERR_CAPACITY", "page -1"],
      [() => cache.step([{ slot: 5, nPast: 0, tokens, pages }]), "SPLASH_ERR_CAPACITY", "seqs[0].slot 5"],
      [() => cache.step([{ slot: 0, nPast: 0, tokens: Int32Array.from([1024]), pages }]), "SPLASH_ERR_INVALID_ARGUMENT", "tokens[0] = 1024"],
      [() => cache.step([{ slot: 0, nPast: 30, tokens, pages }]), "SPLASH_ERR_INVALID_ARGUMENT", "need 3 pages"],
      [() => cache.step([{ slot: 0, nPast: 16, tokens, pages: Int32Array.from([0, 7]) }]), "SPLASH_ERR_CAPACITY", "pages[1] = 7"],
      [() => cache.step([{ slot: 0, nPast: 0, tokens: new Int32Array(33), pages: new Int32Array(3) }]), "SPLASH_ERR_INVALID_ARGUMENT", "max_step_tokens"],
      [
        () => cache.step([{ slot: 1, nPast: 0, tokens, pages }, { slot: 1, nPast: 0, tokens, pages }]),
        "SPLASH_ERR_INVALID_ARGUMENT",
        "both use slot 1",
      ],
    ];
    for (const [call, status, text] of cases) {
      let err: unknown;
      try {
        call();
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(NativeError);
      expect<string>((err as NativeError).statusName).toBe(status);
      expect((err as NativeError).message).toContain(text);
    }
    cache.free();
  });

  test("on the model's call thread: the same samples as a blocking step, refusals with the library's message from that thread, one call at a time per cache", async () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 4, nSlots: 2 });
    const other = model.createCache({ pageTokens: 16, nPages: 4, nSlots: 2 });
    const hot: Sampling = { ...greedy, temperature: 1.2, topK: 50, seed: 7 };
    const seq: StepInput = { slot: 0, nPast: 0, tokens, pages, sample: { sampling: hot, topLogprobs: 3 } };
    const blocking = cache.step([seq]);
    // while it computes, the JavaScript thread goes on: a copy on another cache of the model waits for the lock
    const pending = other.stepAsync([seq]);
    expect(() => other.step([seq])).toThrow(/still running/);
    cache.copySlot(0, 1);
    expect(await pending).toEqual(blocking);
    const e = await nativeError(other.stepAsync([{ slot: 5, nPast: 0, tokens, pages }]));
    expect<string>(e.statusName).toBe("SPLASH_ERR_CAPACITY");
    expect(e.message).toContain("splash_step: SPLASH_ERR_CAPACITY");
    expect(e.message).toContain("seqs[0].slot 5");
    expect(model.lib.splash_last_error()).not.toContain("seqs[0].slot 5"); // set on the call thread, not here
    const refused = await other.stepAsync([{ ...seq, slot: 1, sample: { sampling: { ...greedy, topP: 1.5 } } }]).catch((x: unknown) => x);
    expect(refused).toBeInstanceOf(StepRefusals);
    expect(((refused as StepRefusals).results[0] as Error).message).toContain("sampling.top_p 1.5");
    cache.free();
    other.free();
  });

  test("a sequence whose sample cannot be taken is refused alone; the rest of the step samples as it would alone", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 6, nSlots: 3 });
    const hot: Sampling = { ...greedy, temperature: 1.2, topK: 50, seed: 7 };
    const seq = (slot: number, sample: StepInput["sample"]): StepInput => ({ slot, nPast: 0, tokens, pages: Int32Array.from([2 * slot, 2 * slot + 1]), sample });
    const alone = [cache.step([seq(0, { sampling: hot, topLogprobs: 3 })])[0]!, cache.step([seq(2, { sampling: greedy })])[0]!];
    const f32 = (x: number) => Math.fround(x);
    const bad: [string, StepInput["sample"]][] = [
      ["sampling.top_k -727379968", { sampling: { ...greedy, topK: 1e12 | 0 } }], // 1e12 wraps negative in int32
      ["sampling.repetition_penalty 0", { sampling: { ...greedy, repetitionPenalty: f32(1e-308) } }],
      ["sampling.repetition_penalty inf", { sampling: { ...greedy, repetitionPenalty: 1e308 } }],
      ["sampling.temperature -1", { sampling: { ...greedy, temperature: -1 } }],
      ["sampling.top_p 1.5", { sampling: { ...greedy, topP: 1.5 } }],
      ["sampling.min_p nan", { sampling: { ...greedy, minP: NaN } }],
      ["penalties must be finite", { sampling: { ...greedy, presencePenalty: Infinity } }],
      ["allowed allows none of the model's tokens", { sampling: greedy, allowed: new Uint32Array(32) }],
      ["bias_ids[1] = 1024 is not a token", { sampling: { ...greedy, logitBias: { ids: Int32Array.from([5, 1024]), values: Float32Array.from([1, 1]) } } }],
      ["bias[0] nan: expected a finite value", { sampling: { ...greedy, logitBias: { ids: Int32Array.from([5]), values: Float32Array.from([NaN]) } } }],
    ];
    for (const [text, sample] of bad) {
      let err: unknown;
      try {
        cache.step([seq(0, { sampling: hot, topLogprobs: 3 }), seq(1, sample), seq(2, { sampling: greedy })]);
      } catch (e) {
        err = e;
      }
      expect(err, text).toBeInstanceOf(StepRefusals);
      const [first, refused, last] = (err as StepRefusals).results;
      expect(refused, text).toBeInstanceOf(Error);
      expect((refused as Error).message).toContain(`seqs[1]`);
      expect((refused as Error).message).toContain(text);
      expect(first).toEqual(alone[0]!);
      expect(last).toEqual(alone[1]!);
    }
    cache.free();
  });

  test("a logit bias moves the choice and the log-probabilities it reports, greedy and sampled", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
    const logits = new Float32Array(V());
    const [plain] = cache.step([{ slot: 0, nPast: 0, tokens, pages, logits, sample: { sampling: greedy } }]);
    const target = (plain!.token + 1) % V();
    const logitBias = { ids: Int32Array.from([target, plain!.token]), values: Float32Array.from([30, -30]) };
    const [biased] = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling: { ...greedy, logitBias }, topLogprobs: 2 } }]);
    expect(biased!.token).toBe(target);
    const z = Float32Array.from(logits, (x, t) => x + (t === target ? 30 : t === plain!.token ? -30 : 0));
    const lse = Math.log(z.reduce((s, x) => s + Math.exp(x), 0));
    expect(biased!.logprob).toBeCloseTo(z[target]! - lse, 3);
    for (let seed = 0; seed < 8; seed++) {
      const [out] = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling: { ...greedy, temperature: 1, seed, logitBias: { ids: Int32Array.from([target]), values: Float32Array.from([100]) } } } }]);
      expect(out!.token).toBe(target);
    }
    cache.free();
  });

  test("top_p 0 keeps the most likely token alone, whatever the temperature", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
    const argmax = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling: greedy } }])[0]!.token;
    for (let seed = 0; seed < 8; seed++) {
      const [out] = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling: { ...greedy, temperature: 2, topP: 0, seed } } }]);
      expect(out!.token).toBe(argmax);
    }
    cache.free();
  });

  test("greedy sampling picks the argmax of the returned logits, with its log-probability and the top 5", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 2, nSlots: 1 });
    const logits = new Float32Array(V());
    const [out] = cache.step([{ slot: 0, nPast: 0, tokens, pages, logits, sample: { sampling: greedy, topLogprobs: 5 } }]);
    let best = 0;
    for (let v = 1; v < V(); v++) if (logits[v]! > logits[best]!) best = v;
    const lse = Math.log(logits.reduce((s, x) => s + Math.exp(x), 0));
    expect(out!.token).toBe(best);
    expect(out!.logprob).toBeCloseTo(logits[best]! - lse, 4);
    expect(out!.top!.length).toBe(5);
    expect(out!.top![0]!.id).toBe(best);
    for (let i = 1; i < 5; i++) expect(out!.top![i]!.logprob).toBeLessThanOrEqual(out!.top![i - 1]!.logprob);
    cache.free();
  });

  test("a sampled token depends on the seed and position only, not on the rest of the batch", () => {
    const cache = model.createCache({ pageTokens: 16, nPages: 8, nSlots: 4 });
    const hot: Sampling = { ...greedy, temperature: 1.3, topK: 200, topP: 0.95, seed: 1234 };
    const seq = (slot: number, t: Int32Array, seed: number): StepInput => ({
      slot,
      nPast: 0,
      tokens: t,
      pages: Int32Array.from([2 * slot, 2 * slot + 1]),
      sample: { sampling: { ...hot, seed } },
    });
    const alone = Array.from({ length: 8 }, (_, seed) => cache.step([seq(0, tokens, seed)])[0]!.token);
    const batched = Array.from({ length: 8 }, (_, seed) => {
      const outs = cache.step([seq(1, tokens.slice(0, 4), 99), seq(0, tokens, seed), seq(2, tokens.slice(2), 7)]);
      return outs[1]!.token;
    });
    expect(batched).toEqual(alone);
    expect(new Set(alone).size).toBeGreaterThan(1); // the seed matters at this temperature
    cache.free();
  });
});
