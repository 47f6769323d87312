// Assembles a served model from a resolved MODEL argument: the native weights, the tokenizer, the chat template and
// one engine loop, behind the ChatModel seam the server and `splash run` use.
//
//   resolveModel ─▶ Model.load (native, mmap + optional quantization) ─▶ createEngine (memory plan, cache, loop)
//                   Tokenizer.load + ChatTemplate.load (the checkpoint's own files) ─▶ chatModel(parts)
// Structured output is prepared for the model's vocabulary on the first request that needs it (seconds for a 150K
// vocabulary), not at load: most requests never need it.
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { ChatModel, SamplingOptions } from "../chat/ir.ts";
import { chatModel, endOfTurnTokens } from "../chat/generate.ts";
import { ChatTemplate } from "../chat/template.ts";
import { createEngine, type SplashEngine } from "../engine/engine.ts";
import { LazyStructuredOutput, vocabularyFromTokenizer } from "../engine/grammar/index.ts";
import { nativeStepModel } from "../engine/native-runner.ts";
import { NativeError } from "../native/errors.ts";
import { type Backend, Model, type Quant as NativeQuant } from "../native/model.ts";
import { Tokenizer } from "../tokenizer/tokenizer.ts";
import { VisionEncoder, type VisionOptions } from "../vision/encoder.ts";
import { log } from "../log.ts";
import { formatBytes } from "../format.ts";
import { chooseDrafter, type DraftChoice } from "./drafter.ts";
import type { ResolvedModel } from "./resolve.ts";
import { DRAFTER_NAMES, type DraftMethod, type Quant } from "./spec.ts";

export type LoadModelOptions = {
  quant?: Quant; // default: the spec's default for hub models, the weights as stored otherwise
  kvBudget?: number; // bytes of sequence state (default: derived from the machine)
  threads?: number; // 0 / undefined = one per core
  backend?: Backend; // default: SPLASH_BACKEND, else auto (the GPU when one is usable)
  draft?: DraftChoice; // speculative drafter (default auto: see src/models/drafter.ts)
  drafterDir?: string; // a DFlash drafter directory to use instead of the model's own (checkpoint directories, tests)
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

// The sampling fields of generation_config.json that map onto ours; anything else in the file is ignored.
const GenerationConfig = z.object({
  temperature: z.number().min(0).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  min_p: z.number().min(0).max(1).optional(),
  repetition_penalty: z.number().gt(0).optional(),
  presence_penalty: z.number().optional(),
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
  if (g.temperature !== undefined) out.temperature = g.temperature;
  if (g.top_p !== undefined) out.topP = g.top_p;
  if (g.top_k !== undefined) out.topK = g.top_k;
  if (g.min_p !== undefined) out.minP = g.min_p;
  if (g.repetition_penalty !== undefined) out.repetitionPenalty = g.repetition_penalty;
  if (g.presence_penalty !== undefined) out.presencePenalty = g.presence_penalty;
  return out;
}

const NATIVE_QUANT: Record<Quant, NativeQuant> = { bf16: "none", q8: "q8", q4: "q4" };

export async function loadModel(resolved: ResolvedModel, options: LoadModelOptions = {}): Promise<LoadedModel> {
  // An imported (packed) model's weights are already at their level: the file decides, nothing is quantized at load.
  const quant: Quant = resolved.packed ?? options.quant ?? (resolved.kind === "hub" ? resolved.spec.quantization.default : "bf16");
  const started = performance.now();
  log.info(`loading ${resolved.id} from ${resolved.dir}${resolved.packed ? ` (imported at ${quant})` : quant === "bf16" ? "" : ` (quantizing to ${quant})`}`);
  const [tokenizer, model] = await Promise.all([Tokenizer.load(resolved.dir), Model.load(resolved.dir, { quant: resolved.packed ? "none" : NATIVE_QUANT[quant], threads: options.threads, ...(options.backend ? { backend: options.backend } : {}) })]);
  try {
    const drafter = chooseDrafter(resolved, options.draft ?? "auto", model.info.hasMtp, options.drafterDir);
    if (drafter) {
      try {
        model.attachDrafter(drafter);
        log.info(`speculative decoding with ${drafter.kind === "mtp" ? "the MTP layer" : `the ${DRAFTER_NAMES[drafter.kind]} drafter in ${drafter.dir}`} (${model.drafter!.maxDraft} drafts a cycle at most)`);
      } catch (e) {
        // draft auto on a GPU backend without the drafters' ops (Vulkan): run without speculation rather than not at all
        if ((options.draft ?? "auto") !== "auto" || !(e instanceof NativeError) || e.statusName !== "SPLASH_ERR_UNSUPPORTED") throw e;
        log.info(`speculative decoding off: ${e.detail}`);
      }
    }
    const template = ChatTemplate.load(resolved.dir);
    if (tokenizer.vocabSize > model.info.vocabSize) {
      throw new Error(`${resolved.dir}: the tokenizer has ${tokenizer.vocabSize} tokens but the model's embedding only ${model.info.vocabSize}`);
    }
    const engine = createEngine(nativeStepModel(model), { kvBudget: options.kvBudget, cacheSalt: `${resolved.id}:${quant}` });
    const spec = resolved.spec;
    const vision = VisionEncoder.open(model, resolved.dir, options.vision);
    const contextLength = Math.min(spec?.contextLength ?? model.info.maxPositionEmbeddings, engine.contextTokens);
    const stopTokens = endOfTurnTokens(tokenizer); // the engine's and the grammar's: one set
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
      structuredOutput: new LazyStructuredOutput(() => vocabularyFromTokenizer(tokenizer, { id: `${resolved.id}:${resolved.dir}`, size: model.info.vocabSize, stopTokens })),
    });
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    log.info(`loaded ${resolved.id} in ${seconds} s on ${model.info.backend}: ${formatBytes(model.info.weightBytes)} of weights, context ${contextLength} tokens${vision ? `, images (${formatBytes(vision.info.weightBytes)} vision tower)` : ""}`);
    return {
      chat,
      model,
      engine,
      quant,
      draft: drafter?.kind ?? "none",
      sampling: recommendedSampling(resolved.dir),
      async close() {
        await engine.close();
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
