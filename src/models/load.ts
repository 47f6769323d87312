// Assembles a served model from a resolved MODEL argument: the native weights, the tokenizer, the chat template and
// one engine loop, behind the ChatModel seam the server and `splash run` use.
//
//   resolveModel ─▶ Model.load (native, mmap + optional quantization) ─▶ createEngine (memory plan, cache, loop)
//                   Tokenizer.load + ChatTemplate.load (the checkpoint's own files) ─▶ chatModel(parts)
// Structured output is prepared for the model's vocabulary on the first request that needs it (seconds for a 150K
// vocabulary), not at load: most requests never need it.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ChatModel, SamplingOptions } from "../chat/ir.ts";
import { chatModel, endOfTurnTokens } from "../chat/generate.ts";
import { ChatTemplate } from "../chat/template.ts";
import { createEngine, type SplashEngine } from "../engine/engine.ts";
import { StructuredOutput, vocabularyFromTokenizer } from "../engine/grammar/index.ts";
import { nativeStepModel } from "../engine/native-runner.ts";
import { type Backend, Model, NATIVE_QUANT } from "../native/model.ts";
import { modelRecipe } from "./packed.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { VisionEncoder, type VisionOptions } from "../vision/encoder.ts";
import { log } from "../log.ts";
import { formatBytes } from "../format.ts";
import { cacheDir } from "../paths.ts";
import { topKOrOff } from "../api/options.ts";
import { Penalty, Probability, RepetitionPenalty, Temperature, TopK } from "../api/schema-common.ts";
import { backendKind, chooseDrafter, type DraftChoice } from "./drafter.ts";
import { applyKvType, type KvChoice } from "./kv-type.ts";
import type { ResolvedModel } from "./resolve.ts";
import { DRAFTER_NAMES, type DraftMethod, type Quant } from "./spec.ts";

export type LoadModelOptions = {
  quant?: Quant; // default: the spec's default for hub models, the weights as stored otherwise
  kvBudget?: number; // bytes of sequence state (default: derived from the machine)
  threads?: number; // 0 / undefined = one per core
  backend?: Backend; // default: SPLASH_BACKEND, else auto (the GPU when one is usable)
  kvType?: KvChoice; // KV cache element type (default auto: src/models/kv-type.ts)
  diskCache?: number; // bytes of the prefix cache's disk tier under <cache>/prefix/ (default 0: none)
  draft?: DraftChoice; // speculative drafter (default auto: see src/models/drafter.ts)
  drafterDir?: string; // a DFlash drafter directory to use instead of the model's own (checkpoint directories, tests)
  draftLength?: number; // drafts per cycle, fixed (benchmarks, tests); default: the adaptive policy (engine/speculation.ts)
  vision?: VisionOptions; // image inputs of a checkpoint with a vision tower (URL fetching, limits, cache size)
};

export type LoadedModel = {
  chat: ChatModel;
  model: Model;
  engine: SplashEngine;
  quant: Quant;
  draft: DraftMethod; // the drafter attached
  sampling: Partial<SamplingOptions>; // the checkpoint's recommended settings (generation_config.json)
  // Stops the engine loop and frees native memory; the ChatModel must not be used after.
  close(): Promise<void>;
};

// The sampling fields of generation_config.json that map onto ours, within the bounds a request's own are held to
// (they become every request's defaults); anything else in the file is ignored.
const GenerationConfig = z.object({
  temperature: Temperature(2),
  top_p: Probability,
  top_k: TopK,
  min_p: Probability,
  repetition_penalty: RepetitionPenalty,
  presence_penalty: Penalty,
});

function recommendedSampling(dir: string): Partial<SamplingOptions> {
  const path = join(dir, "generation_config.json");
  if (!existsSync(path)) return {};
  const parsed = GenerationConfig.safeParse(JSON.parse(readFileSync(path, "utf8")));
  if (!parsed.success) {
    log.warn(`${path}: ignoring sampling settings (${parsed.error.issues[0]?.message})`);
    return {};
  }
  const g = parsed.data;
  const out: Partial<SamplingOptions> = {};
  if (g.temperature != null) out.temperature = g.temperature;
  if (g.top_p != null) out.topP = g.top_p;
  if (g.top_k != null) out.topK = topKOrOff(g.top_k);
  if (g.min_p != null) out.minP = g.min_p;
  if (g.repetition_penalty != null) out.repetitionPenalty = g.repetition_penalty;
  if (g.presence_penalty != null) out.presencePenalty = g.presence_penalty;
  return out;
}

// The weight files of a checkpoint directory, by name, size and modification time: a new download or import is a
// different checkpoint (hashing gigabytes of weights at every start would cost more than the cache saves).
function weightsFingerprint(dir: string): string {
  const files = readdirSync(dir).filter((f) => f.endsWith(".safetensors") || f.endsWith(".splash")).sort();
  return files.map((f) => {
    const st = statSync(join(dir, f));
    return `${f}:${st.size}:${Math.floor(st.mtimeMs)}`;
  }).join(",");
}

// What produced a model's sequence state, in the prefix cache's hashes (and so its disk directory): the same
// tokens give the same state only for the same weights, quantization, KV type, drafter (its K/V rides in the
// pages), backend and library.
function stateSalt(resolved: ResolvedModel, quant: Quant, model: Model, drafterDir: string | undefined): string {
  const info = model.info;
  return JSON.stringify({
    model: resolved.id,
    weights: weightsFingerprint(resolved.dir),
    quant,
    kv: info.kvType,
    drafter: model.drafter ? `${model.drafter.kind}${drafterDir ? `:${weightsFingerprint(drafterDir)}` : ""}` : "none",
    backend: info.backend,
    library: String(model.lib.splash_version()),
  });
}

export async function loadModel(resolved: ResolvedModel, options: LoadModelOptions = {}): Promise<LoadedModel> {
  // An imported (packed) model's weights are already at their level: the file decides, nothing is quantized at load.
  const quant: Quant = resolved.packed ?? options.quant ?? (resolved.kind === "hub" ? resolved.spec.quantization.default : "bf16");
  const started = performance.now();
  log.info(`loading ${resolved.id} from ${resolved.dir}${resolved.packed ? ` (imported at ${quant})` : quant === "bf16" ? "" : ` (quantizing to ${quant})`}`);
  // The tokenizer first: the model samples only ids that are tokens (checkpoints pad the output head).
  const tokenizer = await Tokenizer.load(resolved.dir);
  let model: Model;
  try {
    model = await Model.load(resolved.dir, { quant: resolved.packed ? "none" : NATIVE_QUANT[quant], recipe: modelRecipe(resolved.spec), threads: options.threads, tokens: tokenizer.tokenIds(), ...(options.backend ? { backend: options.backend } : {}) });
  } catch (e) {
    tokenizer.free();
    throw e;
  }
  try {
    const drafter = chooseDrafter(resolved, options.draft ?? "auto", model.info.hasMtp, backendKind(model.info.backend), options.drafterDir);
    if (drafter) {
      model.attachDrafter(drafter);
      log.info(`speculative decoding with ${drafter.kind === "mtp" ? "the MTP layer" : `the ${DRAFTER_NAMES[drafter.kind]} drafter in ${drafter.dir}`} (${model.drafter!.maxDraft} drafts a cycle at most)`);
    }
    applyKvType(model, options.kvType ?? "auto", resolved.spec?.cache?.kv);
    const template = ChatTemplate.load(resolved.dir);
    const engine = createEngine(nativeStepModel(model), {
      kvBudget: options.kvBudget,
      cacheSalt: stateSalt(resolved, quant, model, drafter?.dir),
      ...(options.draftLength !== undefined ? { draftLength: options.draftLength } : {}),
      ...(options.diskCache ? { diskCache: { dir: join(cacheDir(), "prefix"), budget: options.diskCache } } : {}),
    });
    const spec = resolved.spec;
    const vision = VisionEncoder.open(model, resolved.dir, options.vision);
    const contextLength = Math.min(spec?.contextLength ?? model.info.maxPositionEmbeddings, engine.contextTokens);
    const stopTokens = endOfTurnTokens(tokenizer); // the engine's and the grammar's: one set
    const structuredOutput = new StructuredOutput(vocabularyFromTokenizer(tokenizer, { id: `${resolved.id}:${resolved.dir}`, size: model.info.vocabSize, stopTokens }));
    const chat = chatModel({
      id: resolved.id,
      tokenizer,
      template,
      engine,
      stopTokens,
      contextLength,
      maxOutputTokens: Math.min(spec?.maxOutputTokens ?? 32768, contextLength),
      runtime: { backend: model.info.backend, weights: quant, weightBytes: model.info.weightBytes, memory: engine.plan },
      ...(vision ? { vision } : {}),
      structuredOutput,
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    log.info(`loaded ${resolved.id} in ${seconds} s on ${model.info.backend}: ${formatBytes(model.info.weightBytes)} of weights, ${model.info.kvType} KV cache, context ${contextLength} tokens${vision ? `, images (${formatBytes(vision.info.weightBytes)} vision tower)` : ""}`);
    return {
      chat,
      model,
      engine,
      quant,
      draft: drafter?.kind ?? "none",
      sampling: recommendedSampling(resolved.dir),
      async close() {
        await engine.close();
        structuredOutput.close();
        await model.settled();
        model.free();
        tokenizer.free();
      },
    };
  } catch (e) {
    model.free();
    tokenizer.free();
    throw e;
  }
}
