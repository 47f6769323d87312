// The whole TypeScript image path against the vision fixture's transformers goldens: the committed PNG/JPEG files
// decoded and preprocessed here, encoded by the native tower through the binding, M-RoPE positions from the prompt,
// and the multimodal prompt's logits at every position (one image; two images of different grids; an upscaled one),
// whole and in chunks that split an image across steps. Bar: max |Δlogit| ≤ 1e-3 × std, the same argmax everywhere.
// On the CPU backend, and on Vulkan (lavapipe in CI, as parity-vulkan.test.ts): image rows and M-RoPE positions go
// through the backend's write and rope like any activation.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { stepImages } from "../../src/engine/images.ts";
import { type Backend, Model } from "../../src/native/model.ts";
import { VisionEncoder } from "../../src/vision/encoder.ts";
import { expandImagePads, promptImages } from "../../src/vision/prompt.ts";

const dir = join(import.meta.dir, "../fixtures/models/qwen35-vision-tiny");
type Entry = { file: string; shape: number[] };
const manifest = JSON.parse(readFileSync(join(dir, "golden/manifest.json"), "utf8")) as {
  token_ids: { image_token_id: number };
  prompts: { input_ids: number[]; position_ids: number[][]; std_logits: number; logits: Entry; image_embeds: Entry; images: { file: string }[] }[];
};
const f32 = (e: Entry) => new Float32Array(readFileSync(join(dir, "golden", e.file)).buffer.slice(0));

const BACKENDS: Backend[] = process.platform === "darwin" ? ["cpu"] : ["cpu", "vulkan"];

describe.each(BACKENDS)("multimodal prompts match transformers (%s)", (backend) => {
  let model: Model;
  let vision: VisionEncoder;
  beforeAll(async () => {
    model = await Model.load(dir, { threads: 2, backend });
    vision = VisionEncoder.open(model, dir)!;
  });
  afterAll(() => model.free());

  for (const [pi, p] of manifest.prompts.entries()) {
    test(`prompt ${pi}: ${p.images.map((im) => im.file.split("/").pop()).join(" + ")}`, async () => {
      const pad = manifest.token_ids.image_token_id;
      const encoded = [];
      for (const im of p.images) encoded.push(await vision.encode({ kind: "bytes", data: new Uint8Array(readFileSync(join(dir, "golden", im.file))) }));
      // the tower's rows against image_embeds (decoding and preprocessing included)
      const want = f32(p.image_embeds);
      const got = new Float32Array(want.length);
      let o = 0;
      for (const im of encoded) got.set(im.embeds, o), (o += im.embeds.length);
      const scale = want.reduce((m, x) => Math.max(m, Math.abs(x)), 0);
      expect(got.reduce((m, x, i) => Math.max(m, Math.abs(x - want[i]!)), 0) / scale).toBeLessThan(1e-4);
      // the prompt as the template renders it (one pad per image), expanded: the fixture's input_ids
      const collapsed = Int32Array.from(p.input_ids.filter((t, i) => t !== pad || p.input_ids[i - 1] !== pad));
      const expanded = expandImagePads(collapsed, pad, encoded.map((im) => im.tokens));
      expect(Array.from(expanded.ids)).toEqual(p.input_ids);
      const images = promptImages(expanded.ids.length, expanded.starts, encoded, 2);
      expect([0, 1, 2].map((s) => p.input_ids.map((_, i) => images.positions[3 * i + s]))).toEqual(p.position_ids);
      const golden = f32(p.logits);
      const V = model.info.vocabSize;
      const n = p.input_ids.length;
      for (const chunk of [n, 7]) {
        const cache = model.createCache({ pageTokens: 16, nPages: 8, nSlots: 1 });
        const logits = new Float32Array(n * V);
        for (let start = 0; start < n; start += chunk) {
          const count = Math.min(chunk, n - start);
          cache.step([{ slot: 0, nPast: start, tokens: expanded.ids.subarray(start, start + count), pages: Int32Array.from({ length: 8 }, (_, i) => i), logits: logits.subarray(start * V, (start + count) * V), ...stepImages(images, start, count) }]);
        }
        cache.free();
        let worst = 0;
        let argmaxDiffs = 0;
        for (let i = 0; i < n; i++) {
          let a = 0;
          let b = 0;
          for (let v = 0; v < V; v++) {
            worst = Math.max(worst, Math.abs(logits[i * V + v]! - golden[i * V + v]!));
            if (logits[i * V + v]! > logits[i * V + a]!) a = v;
            if (golden[i * V + v]! > golden[i * V + b]!) b = v;
          }
          argmaxDiffs += a === b ? 0 : 1;
        }
        expect(worst / p.std_logits, `chunks of ${chunk}`).toBeLessThanOrEqual(1e-3);
        expect(argmaxDiffs, `chunks of ${chunk}`).toBe(0);
      }
    });
  }

  test("without the M-RoPE positions the same prompt misses the bar (the test can fail)", async () => {
    const p = manifest.prompts[0]!;
    const im = await vision.encode({ kind: "bytes", data: new Uint8Array(readFileSync(join(dir, "golden", p.images[0]!.file))) });
    const ids = Int32Array.from(p.input_ids);
    const start = p.input_ids.indexOf(manifest.token_ids.image_token_id);
    const V = model.info.vocabSize;
    const cache = model.createCache({ pageTokens: 16, nPages: 8, nSlots: 1 });
    const logits = new Float32Array(ids.length * V);
    cache.step([{ slot: 0, nPast: 0, tokens: ids, pages: Int32Array.from({ length: 8 }, (_, i) => i), logits, embeds: im.embeds }]);
    cache.free();
    const golden = f32(p.logits);
    const worst = logits.reduce((m, x, i) => Math.max(m, Math.abs(x - golden[i]!)), 0);
    expect(start).toBeGreaterThan(0);
    expect(worst / p.std_logits).toBeGreaterThan(1e-2);
  });
});

test("an image is encoded once: concurrent and repeated requests share the cached rows", async () => {
  const model = await Model.load(dir, { threads: 2, backend: "cpu" });
  try {
    const vision = VisionEncoder.open(model, dir)!;
    const data = new Uint8Array(readFileSync(join(dir, "golden", manifest.prompts[0]!.images[0]!.file)));
    const [a, b] = await Promise.all([vision.encode({ kind: "bytes", data }), vision.encode({ kind: "bytes", data: data.slice() })]);
    const c = await vision.encode({ kind: "bytes", data });
    expect(b).toBe(a);
    expect(c).toBe(a);
    expect(vision.cache.size).toBe(1);
    expect(vision.cache.hits).toBe(1); // the repeat; the concurrent twin waited on the first encode
  } finally {
    model.free();
  }
});
