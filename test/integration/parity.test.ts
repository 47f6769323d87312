// Parity of the native forward pass with Hugging Face transformers (golden logits made by scripts/fixtures/ with
// transformers 5.17, float32 compute on the fixtures' bf16 weights; test/fixtures/models/README.md) on every
// execution path: the whole prompt at once, chunks of 1, 3 and 64, batched decode of several sequences together,
// a mixed batch (sequences advancing by different chunk sizes in the same steps) and block verification (K
// positions with logits per step, several sequences at once). bf16: max |Δlogit| ≤ 1e-3 × std(logits) and the same
// argmax at every position. Quantized weights are judged against the same goldens, and here the issue's criterion
// for q8 (the same argmax at ≥ 99% of positions) cannot be met by any q8 format: these random fixtures are chaotic
// (a quarter of their positions have a top-1/top-2 margin under 0.1 × std), and transformers itself, run on the same
// weights quantized to q8 (weights only), keeps the argmax at only 86–91% of positions. So q8 is held to what does
// separate a correct q8 path from a broken one: mean |Δlogit| ≤ 0.15 × std (measured 0.04–0.08; a wrong scale or
// layout gives ~1) and the argmax kept at ≥ 95% of the confident positions (golden margin ≥ 0.5 × std); the
// agreement over all positions is reported, and so is everything about q4.
// Prints the evidence table.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Model, type Quant, type StepInput } from "../../src/native/model.ts";

const ROOT = join(import.meta.dir, "../fixtures/models");
const TRACE = join(import.meta.dir, "../../build/debug/tests/qwen35_trace");
const PAGE = 16;

type Prompt = { tokens: number[]; n_tokens: number; std_logits: number; argmax: number[]; logits: { file: string }; hidden: { file: string; shape: number[] } };
type Manifest = { prompts: Prompt[] };

const FIXTURES = [
  { dir: "qwen35-dense-tiny", golden: "qwen35-dense-tiny" },
  { dir: "qwen35-dense-tiny-sharded", golden: "qwen35-dense-tiny" },
  { dir: "qwen35-dense-rope50", golden: "qwen35-dense-rope50" },
  { dir: "qwen35-moe-tiny", golden: "qwen35-moe-tiny" },
  { dir: "qwen35-moe-tiny-fused", golden: "qwen35-moe-tiny" },
];

function f32(path: string): Float32Array {
  const b = readFileSync(path);
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
}

function manifest(golden: string): Manifest {
  return JSON.parse(readFileSync(join(ROOT, golden, "golden/manifest.json"), "utf8")) as Manifest;
}

// Runs every prompt as its own sequence (slot k, its own pages). Each step, prompt k advances by advance(k, done)
// tokens and asks logits for all of them, so the logits of every position come back. Returns [n][vocab] per prompt.
function run(model: Model, prompts: Prompt[], advance: (k: number, done: number) => number): Float32Array[] {
  const V = model.info.vocabSize;
  const pagesPer = Math.ceil(Math.max(...prompts.map((p) => p.n_tokens)) / PAGE);
  const cache = model.createCache({ pageTokens: PAGE, nPages: pagesPer * prompts.length, nSlots: prompts.length });
  try {
    const out = prompts.map((p) => new Float32Array(p.n_tokens * V));
    const done = prompts.map(() => 0);
    // page tables interleave the prompts' pages, so a wrong page lookup reads another sequence's keys
    const pages = prompts.map((_, k) => Int32Array.from({ length: pagesPer }, (_, i) => i * prompts.length + k));
    while (done.some((d, k) => d < prompts[k]!.n_tokens)) {
      const seqs: StepInput[] = [];
      prompts.forEach((p, k) => {
        const n = Math.min(advance(k, done[k]!), p.n_tokens - done[k]!);
        if (n <= 0) return;
        seqs.push({
          slot: k,
          nPast: done[k]!,
          tokens: Int32Array.from(p.tokens.slice(done[k]!, done[k]! + n)),
          pages: pages[k]!,
          logits: out[k]!.subarray(done[k]! * V, (done[k]! + n) * V),
        });
        done[k]! += n;
      });
      cache.step(seqs);
    }
    return out;
  } finally {
    cache.free();
  }
}

const PATHS: { name: string; advance: (prompt: Prompt) => (k: number, done: number) => number; together: boolean }[] = [
  { name: "whole", advance: (p) => () => p.n_tokens, together: false },
  { name: "chunks of 1", advance: () => () => 1, together: false },
  { name: "chunks of 3", advance: () => () => 3, together: false },
  { name: "chunks of 64", advance: () => () => 64, together: false },
  // every prompt decoded token by token, all sequences in the same steps
  { name: "batched decode", advance: () => () => 1, together: true },
  // prefill chunks and single-token decodes in the same steps
  { name: "mixed batch 1/2/5/7", advance: () => (k) => [1, 2, 5, 7][k % 4]!, together: true },
  // half the prompt as a prefill, then verify blocks of 4 positions (n_logits = 4) for every sequence at once
  { name: "verify blocks of 4", advance: (p) => (_, done) => (done === 0 ? Math.ceil(p.n_tokens / 2) : 4), together: true },
];

type Row = { fixture: string; weights: string; path: string; maxOverStd: number; argmax: string; note?: string };
const evidence: Row[] = [];

// Max and mean |Δ| / std over every prompt, how many positions keep the golden argmax, and the same count over the
// confident positions (golden top-1/top-2 margin ≥ 0.5 × std).
function compare(prompts: Prompt[], golden: string, got: Float32Array[], V: number) {
  let maxOverStd = 0;
  let sumOverStd = 0;
  let same = 0;
  let total = 0;
  let confidentSame = 0;
  let confident = 0;
  prompts.forEach((p, k) => {
    const g = f32(join(ROOT, golden, "golden", p.logits.file));
    const o = got[k]!;
    let md = 0;
    for (let i = 0; i < g.length; i++) {
      const d = Math.abs(g[i]! - o[i]!);
      md = Math.max(md, Number.isFinite(d) ? d : Infinity);
      sumOverStd += d / p.std_logits;
    }
    maxOverStd = Math.max(maxOverStd, md / p.std_logits);
    for (let t = 0; t < p.n_tokens; t++) {
      let a = 0;
      let first = -Infinity;
      let second = -Infinity;
      for (let v = 0; v < V; v++) {
        if (o[t * V + v]! > o[t * V + a]!) a = v;
        const x = g[t * V + v]!;
        if (x > first) (second = first), (first = x);
        else if (x > second) second = x;
      }
      const ok = a === p.argmax[t] ? 1 : 0;
      same += ok;
      total++;
      if (first - second >= 0.5 * p.std_logits) (confidentSame += ok), confident++;
    }
  });
  return { maxOverStd, meanOverStd: sumOverStd / (total * V), same, total, confidentSame, confident };
}

// The first traced intermediate (embeddings, each layer's residual stream, final norm) that leaves the golden
// hidden states, from the debug build's trace tool: where to look when the logits disagree.
function divergence(dir: string, golden: string, prompt: Prompt): { layers: { name: string; maxDiff: number }[] } {
  const out = mkdtempSync(join(tmpdir(), "splash-trace-"));
  try {
    const r = Bun.spawnSync([TRACE, join(ROOT, dir), prompt.tokens.join(","), out]);
    if (r.exitCode !== 0) throw new Error(`qwen35_trace failed: ${r.stderr.toString()}`);
    const hidden = f32(join(ROOT, golden, "golden", prompt.hidden.file));
    const [stack, n, H] = prompt.hidden.shape as [number, number, number]; // [L + 2][n][hidden]
    const names = ["embed.-1", ...Array.from({ length: stack - 2 }, (_, i) => `layer_out.${i}`), "final_norm.-1"];
    const size = n * H;
    return {
      layers: names.map((name, i) => {
        const ours = f32(join(out, `${name}.f32`));
        const ref = hidden.subarray(i * size, (i + 1) * size);
        let md = 0;
        for (let j = 0; j < size; j++) md = Math.max(md, Math.abs(ours[j]! - ref[j]!));
        return { name, maxDiff: md };
      }),
    };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

describe.each(FIXTURES)("parity $dir", ({ dir, golden }) => {
  const prompts = manifest(golden).prompts;

  test("bf16 weights: every path within 1e-3 × std with the same argmax everywhere", async () => {
    const model = await Model.load(join(ROOT, dir), { maxStepTokens: 512 });
    try {
      const whole = run(model, prompts, (k) => prompts[k]!.n_tokens);
      for (const path of PATHS) {
        const got = path.together
          ? run(model, prompts, (k, done) => path.advance(prompts[k]!)(k, done))
          : prompts.map((p, k) => run(model, [p], (_, done) => path.advance(p)(k, done))[0]!);
        const c = compare(prompts, golden, got, model.info.vocabSize);
        const identical = got.every((g, k) => g.every((x, i) => x === whole[k]![i]));
        evidence.push({
          fixture: dir,
          weights: "bf16",
          path: path.name + (identical ? " (bit-identical to whole)" : ""),
          maxOverStd: c.maxOverStd,
          argmax: `${c.same}/${c.total}`,
        });
        if (c.maxOverStd > 1e-3 || c.same !== c.total) {
          const worst = prompts[prompts.length - 1]!;
          const d = divergence(dir, golden, worst);
          throw new Error(
            `${dir} ${path.name}: max |Δ|/std ${c.maxOverStd.toExponential(2)}, argmax ${c.same}/${c.total}; ` +
              `per layer (prompt of ${worst.n_tokens}): ${d.layers.map((l) => `${l.name} ${l.maxDiff.toExponential(1)}`).join(", ")}`,
          );
        }
      }
    } finally {
      model.free();
    }
  });

  for (const quant of ["q8", "q4"] as Quant[]) {
    test(`${quant} weights: ${quant === "q8" ? "confident positions keep the argmax" : "reported"}`, async () => {
      const model = await Model.load(join(ROOT, dir), { quant, maxStepTokens: 512 });
      try {
        for (const path of [PATHS[0]!, PATHS[4]!]) {
          const got = path.together
            ? run(model, prompts, (k, done) => path.advance(prompts[k]!)(k, done))
            : prompts.map((p, k) => run(model, [p], (_, done) => path.advance(p)(k, done))[0]!);
          const c = compare(prompts, golden, got, model.info.vocabSize);
          evidence.push({
            fixture: dir,
            weights: quant,
            path: path.name,
            maxOverStd: c.maxOverStd,
            argmax: `${c.same}/${c.total}`,
            note: `mean ${c.meanOverStd.toExponential(1)}, confident ${c.confidentSame}/${c.confident}`,
          });
          expect(Number.isFinite(c.maxOverStd)).toBe(true);
          if (quant === "q8") {
            expect(c.meanOverStd).toBeLessThan(0.15);
            expect(c.confidentSame / c.confident).toBeGreaterThanOrEqual(0.95);
          }
        }
      } finally {
        model.free();
      }
    });
  }
});

describe("per-layer hidden states against the golden (debug build's trace hook)", () => {
  for (const { dir, golden } of [FIXTURES[0]!, FIXTURES[2]!, FIXTURES[3]!]) {
    test(dir, () => {
      expect(existsSync(TRACE)).toBe(true);
      const prompt = manifest(golden).prompts.at(-1)!;
      const d = divergence(dir, golden, prompt);
      console.log(`${dir}, prompt of ${prompt.n_tokens}: ${d.layers.map((l) => `${l.name} ${l.maxDiff.toExponential(1)}`).join("  ")}`);
      for (const l of d.layers) expect(l.maxDiff).toBeLessThan(1e-3);
    });
  }
});

afterAll(() => {
  if (!evidence.length) return;
  const w = Math.max(...evidence.map((r) => r.path.length));
  console.log("\nfixture                     weights  path" + " ".repeat(w - 4) + "  max|Δ|/std   argmax");
  for (const r of evidence)
    console.log(
      `${r.fixture.padEnd(28)}${r.weights.padEnd(9)}${r.path.padEnd(w)}  ${r.maxOverStd.toExponential(2).padStart(9)}   ${r.argmax.padEnd(8)} ${r.note ?? ""}`,
    );
});
