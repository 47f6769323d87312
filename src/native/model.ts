// Typed wrappers over the model, cache and step ABI (native/include/splash.h): what src/engine and the CLI use.
//
//   const model = await Model.load(dir, { quant: "q8" });
//   const cache = model.createCache({ pageTokens: 16, nPages: 64, nSlots: 4 });
//   const [out] = cache.step([{ slot: 0, nPast: 0, tokens, pages, sample: { sampling } }]);
//   cache.free(); model.free();
//
// Handles are freed explicitly (free() is idempotent); a failing call throws NativeError with the status name and
// the library's message. step() blocks its caller (tools, tests); stepAsync() and encodeImage() run on the model's
// call thread (call-thread.ts), so the JavaScript thread goes on meanwhile.
import { CString, ptr, type Pointer } from "bun:ffi";
import type { Sampling } from "../engine/types.ts";
import { DEFAULT_RECIPE } from "../models/packed.ts";
import { recipeType, TENSOR_KINDS, type Drafter, type Quant as Level, type RecipeRule } from "../models/spec.ts";
import { CallThread, invoke, type ThreadCall } from "./call-thread.ts";
import { check, StepRefusals } from "./errors.ts";
import { libraryPath, native, type NativeLibrary } from "./library.ts";
import { recordMetal } from "../machine.ts";
import { metalInfo } from "./metal.ts";
import { KV_TYPES, type KvType } from "../models/kv-type.ts";
import { DRAFTER_INFO, DRAFTER_OPTIONS, getField, LOAD_OPTIONS, MODEL_INFO, SEQ, setField, SPECULATE, VISION_INFO, type StructLayout } from "./layout.ts";

export type Quant = "none" | "q8" | "q4";
// The weight level a user names (models/spec.ts QUANTS; bf16 = as stored) as a load option.
export const NATIVE_QUANT: Record<Level, Quant> = { bf16: "none", q8: "q8", q4: "q4" };
// The enum codes of splash.h (SPLASH_QUANT_*, SPLASH_BACKEND_*, SPLASH_DRAFT_*, SPLASH_ARCH_*), by the name after the
// prefix: test/unit/native/layout.test.ts checks each against the header.
export const QUANT_CODES: Record<Quant, number> = { none: 0, q8: 1, q4: 2 };
// splash_load_options.quant: SPLASH_QUANT_* per tensor kind (TENSOR_KINDS is splash_tensor_kind_name's list, in its
// order), the recipe's storage of each kind at the level, as `splash import` packs it, so a float checkpoint loaded at
// a level is the model its import would be.
export function kindQuants(quant: Quant, recipe: readonly RecipeRule[]): Int32Array {
  return Int32Array.from(TENSOR_KINDS, (kind) => {
    const type = quant === "none" ? "bf16" : recipeType(recipe, kind, quant);
    return QUANT_CODES[type === "bf16" ? "none" : type];
  });
}
// auto: the GPU when one is usable (Metal on macOS, Vulkan elsewhere), else the CPU; vulkan: any Vulkan device,
// lavapipe included (tests); metal: the Mac's GPU or an error saying why.
export const BACKENDS = ["auto", "cpu", "vulkan", "metal"] as const;
export type Backend = (typeof BACKENDS)[number];
export const BACKEND_CODES: Record<Backend, number> = { auto: 0, cpu: 1, vulkan: 2, metal: 3 };
// SPLASH_BACKEND=cpu|vulkan|metal replaces "auto" when a load names no backend: CI runs the whole suite on one.
function defaultBackend(): Backend {
  const b = process.env.SPLASH_BACKEND;
  if (b === undefined || b === "") return "auto";
  if (b in BACKEND_CODES) return b as Backend;
  throw new Error(`SPLASH_BACKEND=${b}: expected one of ${Object.keys(BACKEND_CODES).join(", ")}`);
}
export const ARCH_CODES = { qwen3_5: 1, qwen3_5_moe: 2 } as const;
export const MAX_TOP_LOGPROBS = 20; // SPLASH_MAX_TOP_LOGPROBS

// What a load asking for `backend` would run on, found by creating that backend and letting it go (no model):
// runsOn is what Model.info.backend would say ("cpu", "vulkan: NVIDIA H200"), or null where the load would fail;
// why says why auto passed over each GPU, or why the load would fail.
export type BackendProbe = { asked: Backend; runsOn: string | null; why: string };

export function probeBackend(backend: Backend = defaultBackend(), lib: NativeLibrary = native()): BackendProbe {
  const name = Buffer.alloc(256);
  const why = Buffer.alloc(1024);
  const text = (b: Buffer) => b.toString("utf8", 0, b.indexOf(0));
  if (lib.splash_backend_probe(BACKEND_CODES[backend], name, name.length, why, why.length) !== 0)
    return { asked: backend, runsOn: null, why: String(lib.splash_last_error()).replace(/^[\w.]+:\d+: /, "") };
  return { asked: backend, runsOn: text(name), why: text(why) };
}

export type LoadOptions = {
  quant?: Quant; // default "none": bf16/f32 weights as stored
  recipe?: readonly RecipeRule[]; // each tensor kind's storage at `quant` (default DEFAULT_RECIPE, as import's)
  threads?: number; // default: every core
  maxStepTokens?: number; // most tokens one step carries over all its sequences (default: the backend's measured step for this model, else 512)
  backend?: Backend; // default "auto"
  drafter?: DrafterOptions; // speculative decoding: attached at load, before any cache exists
  tokens?: TokenIds; // the ids that are tokens (default: every row of the output head)
};

// The ids of a tokenizer: 0 … count − 1, of which those set in `mask` (bit t of word t >> 5) when some are unused
// (null: all of them). Rows of the output head past them are padding: never sampled, drafted or listed.
export type TokenIds = { count: number; mask: Uint32Array | null };

export type DrafterKind = Drafter;
export const DRAFTER_CODES: Record<DrafterKind, number> = { mtp: 1, dflash: 2, dflash2: 3 }; // SPLASH_DRAFT_NONE (0): no drafter
const DRAFTER_KINDS = Object.fromEntries(Object.entries(DRAFTER_CODES).map(([k, v]) => [v, k])) as Record<number, DrafterKind>;

export type DrafterOptions = {
  kind: DrafterKind;
  dir?: string; // DFlash and DFlash2: the drafter's directory
  maxDraft?: number; // drafts per cycle at most (MTP default 3; DFlash and DFlash2 default block_size − 1)
  maxSeqs?: number; // sequences one draft or verify call handles at most (default 8)
};

export type DrafterInfo = {
  kind: DrafterKind;
  maxDraft: number;
  maxSeqs: number;
  blockSize: number; // DFlash and DFlash2: B (0 for MTP)
  maskTokenId: number; // DFlash and DFlash2 (−1 for MTP)
  weightBytes: number;
  scratchBytes: number;
  kvBytesPerToken: number;
  stateBytes: number;
};

export type ModelInfo = {
  arch: "qwen3_5" | "qwen3_5_moe";
  vocabSize: number;
  hiddenSize: number;
  layers: number;
  fullAttentionLayers: number;
  linearAttentionLayers: number;
  maxPositionEmbeddings: number;
  hasMtp: boolean;
  hasVision: boolean;
  threads: number;
  maxStepTokens: number;
  weightBytes: number;
  scratchBytes: number;
  kvType: KvType; // of the caches created now (setKvType)
  kvBytesPerToken: number; // all full-attention layers, K + V, in kvType
  stateBytes: number; // one GDN state slot
  decodeBytesPerToken: number; // weight bytes a single-token decode reads (MoE: top-k experts)
  backend: string; // what it runs on, auto resolved: "cpu", "vulkan: NVIDIA H200", "metal: Apple M4"
};

// The checkpoint's vision tower (splash_vision_info).
export type VisionInfo = {
  depth: number;
  hiddenSize: number;
  outHiddenSize: number; // = the language model's hidden size
  inChannels: number;
  patchSize: number;
  temporalPatchSize: number;
  spatialMergeSize: number;
  imageTokenId: number;
  videoTokenId: number;
  visionStartTokenId: number;
  visionEndTokenId: number;
  weightBytes: number;
};

export type CacheGeometry = { pageTokens: number; nPages: number; nSlots: number };

// What a sequence asks of the sampler for the position after its last token.
export type SampleRequest = {
  sampling: Sampling;
  penaltyTokens?: Int32Array; // generated tokens so far
  topLogprobs?: number; // 0..MAX_TOP_LOGPROBS
  allowed?: Uint32Array | null; // bitmask [ceil(vocab / 32)], null = every token
};

// The speculative part of a step's sequence (splash_speculate, needs `sample`). verify: tokens = [anchor, ...drafts],
// the first nDraft of the drafts the sequence's previous step proposed (nProposed: nDraft + 1 when a grammar refused
// the next one, which then counts as rejected). next: drafts wanted after this step's token (SampledToken.drafts).
export type SpeculateInput = {
  verify?: { nDraft: number; nProposed: number; allowed?: Uint32Array | null }; // allowed: [nDraft + 1][ceil(vocab / 32)]
  next?: number;
  nextLogits?: Float32Array; // out [next][vocab]: the drafter's raw logits (tests)
  nextProbs?: Float32Array; // out [next][vocab]: the distribution each draft was drawn from, q (tests)
};

// One sequence's share of a step.
export type StepInput = {
  slot: number;
  nPast: number; // positions already in the cache
  tokens: Int32Array; // ≥ 1 new positions
  pages: Int32Array; // page table covering [0, nPast + tokens.length)
  // Out: logits of the last (logits.length / vocab) positions, [n][vocab] (K for a verify block, 1 for logprobs).
  logits?: Float32Array;
  sample?: SampleRequest;
  speculate?: SpeculateInput;
  // Images: the rows of this step's image-pad tokens, in order ([n][hiddenSize], from Model.encodeImage), and the
  // M-RoPE positions of every token ([tokens.length][3]); without them row j sits at position nPast + j.
  embeds?: Float32Array;
  positions?: Int32Array;
};

// Log-probabilities are log_softmax of the logits after penalties, the bias and the masks (allowed, the model's
// tokens), before temperature and top-k / top-p / min-p. `top` lists the most likely ids that could have been chosen (fewer than asked for when a
// mask leaves fewer).
export type TokenChoice = { token: number; logprob: number; top: { id: number; logprob: number }[] | null };
// Verify blocks: `accepted` holds the drafts kept (they precede `token`) with their log-probabilities and alternatives;
// `drafts`: the next block's drafts, when the step was asked for them.
export type SampledToken = TokenChoice & { accepted?: TokenChoice[]; drafts?: Int32Array };

// Top-logprob outputs without the entries (id −1) a mask left with no alternative.
function alternatives(ids: Int32Array, logprobs: Float32Array): { id: number; logprob: number }[] {
  const out: { id: number; logprob: number }[] = [];
  ids.forEach((id, k) => {
    if (id >= 0) out.push({ id, logprob: logprobs[k]! });
  });
  return out;
}

function u64(n: number): bigint {
  return BigInt.asUintN(64, BigInt(Math.trunc(n)));
}

function addr(a: Uint8Array | Int32Array | Uint32Array | Float32Array | null | undefined): number {
  return a && a.byteLength > 0 ? ptr(a) : 0;
}

function writeSampling(view: DataView, layout: StructLayout, base: number, p: Sampling): void {
  if (p.logitBias && p.logitBias.ids.length !== p.logitBias.values.length) throw new RangeError(`logitBias: ${p.logitBias.ids.length} ids, ${p.logitBias.values.length} values`);
  const set = (field: string, v: number | bigint) => setField(view, layout, `sampling.${field}`, v, base);
  set("temperature", p.temperature);
  set("top_p", p.topP);
  set("top_k", p.topK);
  set("min_p", p.minP);
  set("presence_penalty", p.presencePenalty);
  set("frequency_penalty", p.frequencyPenalty);
  set("repetition_penalty", p.repetitionPenalty);
  set("seed", u64(p.seed));
  set("n_bias", p.logitBias?.ids.length ?? 0);
  set("bias_ids", addr(p.logitBias?.ids));
  set("bias", addr(p.logitBias?.values));
}

// The acceptance rule alone on given distributions (draft/accept.h): p [k + 1][vocab], q [qRows][vocab] (qRows = k,
// or k + 1 when a further draft was refused before verification), drafts [k]. For tests with fixed probabilities.
export function draftAccept(lib: NativeLibrary, p: Float32Array, q: Float32Array, qRows: number, vocab: number, drafts: Int32Array, seed: number, pos0: number): { accepted: number; token: number } {
  const token = new Int32Array(1);
  const accepted = lib.splash_draft_accept(p, q.byteLength ? q : null, qRows, vocab, drafts.byteLength ? drafts : null, drafts.length, u64(seed), u64(pos0), token);
  if (accepted < 0) throw new RangeError("draftAccept: bad arguments");
  return { accepted, token: token[0]! };
}

export class Model {
  #handle: Pointer | null;
  #info!: ModelInfo;
  #drafter: DrafterInfo | null = null;
  #vision: VisionInfo | null = null;
  #thread: CallThread | null = null;

  private constructor(
    readonly lib: NativeLibrary,
    handle: Pointer,
    readonly dir: string,
  ) {
    this.#handle = handle;
    this.#read();
  }

  get info(): ModelInfo {
    return this.#info;
  }

  // The checkpoint's vision tower, or null.
  get vision(): VisionInfo | null {
    return this.#vision;
  }

  // The thread the model's long calls run on, started by the first of them.
  get thread(): CallThread {
    return (this.#thread ??= new CallThread(libraryPath(this.lib)));
  }

  // One image's patches ([t·h·w][C·T·P·P], the processor's order) through the tower, on the call thread:
  // [t·h·w / merge²][outHiddenSize].
  async encodeImage(pixels: Float32Array, grid: readonly [number, number, number]): Promise<Float32Array> {
    const v = this.#vision;
    if (!v) throw new Error("encodeImage: this checkpoint has no vision tower");
    const [t, h, w] = grid;
    const rowFloats = v.inChannels * v.temporalPatchSize * v.patchSize * v.patchSize;
    if (pixels.length !== t * h * w * rowFloats)
      throw new RangeError(`encodeImage: ${pixels.length} floats for a ${t}×${h}×${w} grid of ${rowFloats}-float patches`);
    const out = new Float32Array(((t * h * w) / v.spatialMergeSize ** 2) * v.outHiddenSize);
    await this.thread.run({ fn: "splash_vision_encode", args: [this.handle, addr(pixels), t, h, w, addr(out)] }); // pixels and out live on here
    return out;
  }

  // The attached speculative drafter, or null.
  get drafter(): DrafterInfo | null {
    return this.#drafter;
  }

  #read(): void {
    const lib = this.lib;
    const handle = this.handle;
    const bytes = new Uint8Array(MODEL_INFO.size);
    const buf = new DataView(bytes.buffer);
    setField(buf, MODEL_INFO, "struct_size", MODEL_INFO.size);
    check(lib, "splash_model_get_info", lib.splash_model_get_info(handle, bytes));
    const f = (name: string) => getField(buf, MODEL_INFO, name);
    this.#info = {
      arch: f("arch") === ARCH_CODES.qwen3_5_moe ? "qwen3_5_moe" : "qwen3_5",
      vocabSize: f("vocab_size"),
      hiddenSize: f("hidden_size"),
      layers: f("n_layers"),
      fullAttentionLayers: f("n_full_attention_layers"),
      linearAttentionLayers: f("n_linear_attention_layers"),
      maxPositionEmbeddings: f("max_position_embeddings"),
      hasMtp: f("has_mtp") !== 0,
      hasVision: f("has_vision") !== 0,
      threads: f("n_threads"),
      maxStepTokens: f("max_step_tokens"),
      weightBytes: f("weight_bytes"),
      scratchBytes: f("scratch_bytes"),
      kvType: KV_TYPES[f("kv_type")]!,
      kvBytesPerToken: f("kv_bytes_per_token"),
      stateBytes: f("state_bytes"),
      decodeBytesPerToken: f("decode_bytes_per_token"),
      backend: String(lib.splash_model_backend(handle)),
    };
    const vbytes = new Uint8Array(VISION_INFO.size);
    const vbuf = new DataView(vbytes.buffer);
    setField(vbuf, VISION_INFO, "struct_size", VISION_INFO.size);
    const v = (name: string) => getField(vbuf, VISION_INFO, name);
    this.#vision =
      this.#info.hasVision && lib.splash_vision_get_info(handle, vbytes) === 0
        ? {
            depth: v("depth"),
            hiddenSize: v("hidden_size"),
            outHiddenSize: v("out_hidden_size"),
            inChannels: v("in_channels"),
            patchSize: v("patch_size"),
            temporalPatchSize: v("temporal_patch_size"),
            spatialMergeSize: v("spatial_merge_size"),
            imageTokenId: v("image_token_id"),
            videoTokenId: v("video_token_id"),
            visionStartTokenId: v("vision_start_token_id"),
            visionEndTokenId: v("vision_end_token_id"),
            weightBytes: v("weight_bytes"),
          }
        : null;
    const dbytes = new Uint8Array(DRAFTER_INFO.size);
    const dbuf = new DataView(dbytes.buffer);
    setField(dbuf, DRAFTER_INFO, "struct_size", DRAFTER_INFO.size);
    check(lib, "splash_model_get_drafter_info", lib.splash_model_get_drafter_info(handle, dbytes));
    const d = (name: string) => getField(dbuf, DRAFTER_INFO, name);
    this.#drafter =
      d("kind") === 0
        ? null
        : {
            kind: DRAFTER_KINDS[d("kind")]!,
            maxDraft: d("max_draft"),
            maxSeqs: d("max_seqs"),
            blockSize: d("block_size"),
            maskTokenId: d("mask_token_id"),
            weightBytes: d("weight_bytes"),
            scratchBytes: d("scratch_bytes"),
            kvBytesPerToken: d("kv_bytes_per_token"),
            stateBytes: d("state_bytes"),
          };
  }

  // Loads a checkpoint directory (config.json + safetensors). Throws NativeError naming the file or tensor at fault.
  static async load(dir: string, options: LoadOptions = {}, lib?: NativeLibrary): Promise<Model> {
    const l = lib ?? native();
    if (process.platform === "darwin") recordMetal(metalInfo(l)); // the memory plan keeps to the GPU's working set
    const bytes = new Uint8Array(LOAD_OPTIONS.size);
    const opts = new DataView(bytes.buffer);
    setField(opts, LOAD_OPTIONS, "struct_size", LOAD_OPTIONS.size);
    const quant = kindQuants(options.quant ?? "none", options.recipe ?? DEFAULT_RECIPE);
    setField(opts, LOAD_OPTIONS, "quant", addr(quant)); // copied by the load
    setField(opts, LOAD_OPTIONS, "n_threads", options.threads ?? 0);
    setField(opts, LOAD_OPTIONS, "max_step_tokens", options.maxStepTokens ?? 0);
    setField(opts, LOAD_OPTIONS, "backend", BACKEND_CODES[options.backend ?? defaultBackend()]);
    const tokens = options.tokens;
    if (tokens?.mask && tokens.mask.length < Math.ceil(tokens.count / 32)) throw new RangeError(`tokens: a mask of ${tokens.mask.length} words for ${tokens.count} ids`);
    setField(opts, LOAD_OPTIONS, "n_tokens", tokens?.count ?? 0);
    setField(opts, LOAD_OPTIONS, "tokens", addr(tokens?.mask)); // copied by the load
    const out = new BigUint64Array(1);
    check(l, "splash_model_load", l.splash_model_load(Buffer.from(`${dir}\0`), bytes, out));
    const model = new Model(l, Number(out[0]) as Pointer, dir);
    try {
      if (options.drafter) model.attachDrafter(options.drafter);
    } catch (e) {
      model.free();
      throw e;
    }
    return model;
  }

  // Attaches a speculative drafter (before any cache of the model exists): info then includes its weights and
  // scratch, and page and slot sizes its per-position K/V and per-sequence state.
  attachDrafter(d: DrafterOptions): void {
    const bytes = new Uint8Array(DRAFTER_OPTIONS.size);
    const view = new DataView(bytes.buffer);
    const dir = d.dir === undefined ? null : Buffer.from(`${d.dir}\0`);
    setField(view, DRAFTER_OPTIONS, "struct_size", DRAFTER_OPTIONS.size);
    setField(view, DRAFTER_OPTIONS, "kind", DRAFTER_CODES[d.kind]);
    setField(view, DRAFTER_OPTIONS, "dir", dir ? ptr(dir) : 0);
    setField(view, DRAFTER_OPTIONS, "max_draft", d.maxDraft ?? 0);
    setField(view, DRAFTER_OPTIONS, "max_seqs", d.maxSeqs ?? 0);
    check(this.lib, "splash_model_attach_drafter", this.lib.splash_model_attach_drafter(this.handle, bytes));
    this.#read();
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new Error("the model was freed");
    return this.#handle;
  }

  // The KV types the model's backend runs.
  get kvTypes(): KvType[] {
    const mask = this.lib.splash_model_kv_types(this.handle);
    return KV_TYPES.filter((_, code) => (mask >>> code) & 1);
  }

  // The KV type of the caches created from now on (before the first one); throws NativeError
  // (SPLASH_ERR_UNSUPPORTED) when the backend lacks it.
  setKvType(type: KvType): void {
    check(this.lib, "splash_model_set_kv_type", this.lib.splash_model_set_kv_type(this.handle, KV_TYPES.indexOf(type)));
    this.#read();
  }

  // Bytes of one KV page of `pageTokens` positions and of one GDN state slot: the sizes the cache allocates.
  pageBytes(pageTokens: number): number {
    return Number(this.lib.splash_cache_page_bytes(this.handle, pageTokens));
  }
  get slotBytes(): number {
    return Number(this.lib.splash_cache_slot_bytes(this.handle));
  }

  createCache(geometry: CacheGeometry): Cache {
    const out = new BigUint64Array(1);
    const { pageTokens, nPages, nSlots } = geometry;
    check(this.lib, "splash_cache_create", this.lib.splash_cache_create(this.handle, pageTokens, nPages, nSlots, out));
    return new Cache(this, Number(out[0]) as Pointer, geometry);
  }

  // Resolves once none of the model's calls is running on its thread: free() may follow.
  settled(): Promise<void> {
    return this.#thread?.settled() ?? Promise.resolve();
  }

  // Frees the model (its caches first; no call may be running: see settled()).
  free(): void {
    if (this.#handle === null) return;
    this.#thread?.close();
    this.#thread = null;
    this.lib.splash_model_free(this.#handle);
    this.#handle = null;
  }
}

// A call built for the thread or for the caller's, and what reads its outputs once it returned. Holding it holds
// every buffer the call's structs point at.
type PreparedCall<T> = { call: ThreadCall; buffers: unknown; finish(): T };

export class Cache {
  #handle: Pointer | null;
  #seqs = new Uint8Array(0);
  #busy = false; // a call on the thread is in flight (it may be reading #seqs)

  constructor(
    readonly model: Model,
    handle: Pointer,
    readonly geometry: CacheGeometry,
  ) {
    this.#handle = handle;
  }

  get handle(): Pointer {
    if (this.#handle === null) throw new Error("the cache was freed");
    return this.#handle;
  }

  copyPage(src: number, dst: number): void {
    check(this.model.lib, "splash_cache_copy_page", this.model.lib.splash_cache_copy_page(this.handle, src, dst));
  }
  copySlot(src: number, dst: number): void {
    check(this.model.lib, "splash_cache_copy_slot", this.model.lib.splash_cache_copy_slot(this.handle, src, dst));
  }
  clearSlot(slot: number): void {
    check(this.model.lib, "splash_cache_clear_slot", this.model.lib.splash_cache_clear_slot(this.handle, slot));
  }

  // A page or a slot to or from host bytes (model.pageBytes(pageTokens) / model.slotBytes long): the prefix cache's
  // disk copies.
  readPage(page: number, dst: Uint8Array): void {
    check(this.model.lib, "splash_cache_read_page", this.model.lib.splash_cache_read_page(this.handle, page, dst, dst.byteLength));
  }
  writePage(page: number, src: Uint8Array): void {
    check(this.model.lib, "splash_cache_write_page", this.model.lib.splash_cache_write_page(this.handle, page, src, src.byteLength));
  }
  readSlot(slot: number, dst: Uint8Array): void {
    check(this.model.lib, "splash_cache_read_slot", this.model.lib.splash_cache_read_slot(this.handle, slot, dst, dst.byteLength));
  }
  writeSlot(slot: number, src: Uint8Array): void {
    check(this.model.lib, "splash_cache_write_slot", this.model.lib.splash_cache_write_slot(this.handle, slot, src, src.byteLength));
  }

  // Runs one forward step over the sequences (one native call); returns, per sequence, its sampled token or null.
  // Throws StepRefusals when libsplash refused some sequences alone (the others' results are in it).
  step(seqs: readonly StepInput[]): (SampledToken | null)[] {
    return this.#blocking(this.#stepCall(seqs));
  }
  stepAsync(seqs: readonly StepInput[]): Promise<(SampledToken | null)[]> {
    return this.#onThread(this.#stepCall(seqs));
  }

  #blocking<T>(p: PreparedCall<T>): T {
    check(this.model.lib, p.call.fn, invoke(this.model.lib, p.call));
    return p.finish();
  }

  // One call in flight per cache: the engine runs its steps one after the other.
  async #onThread<T>(p: PreparedCall<T>): Promise<T> {
    this.#busy = true;
    try {
      await this.model.thread.run(p.call);
    } finally {
      this.#busy = false;
    }
    return p.finish();
  }

  #stepCall(seqs: readonly StepInput[]): PreparedCall<(SampledToken | null)[]> {
    if (this.#busy) throw new Error("a call on this cache is still running");
    const V = this.model.info.vocabSize;
    const size = seqs.length * SEQ.size;
    if (this.#seqs.byteLength < size) this.#seqs = new Uint8Array(size);
    const bytes = this.#seqs.subarray(0, size);
    const view = new DataView(bytes.buffer, 0, size);
    const tops: { ids: Int32Array; logprobs: Float32Array }[] = [];
    seqs.forEach((s, i) => {
      const base = i * SEQ.size;
      const set = (field: string, v: number | bigint) => setField(view, SEQ, field, v, base);
      const nLogits = s.logits ? s.logits.length / V : 0;
      if (!Number.isInteger(nLogits) || nLogits > s.tokens.length)
        throw new RangeError(`step: seqs[${i}].logits holds ${s.logits?.length} floats, not a whole number ≤ ${s.tokens.length} of rows of ${V}`);
      set("slot", s.slot);
      set("n_past", s.nPast);
      set("n_tokens", s.tokens.length);
      set("n_logits", nLogits);
      set("tokens", addr(s.tokens));
      set("pages", addr(s.pages));
      set("n_pages", s.pages.length);
      set("logits", addr(s.logits));
      // always written: the struct buffer is reused across steps
      const H = this.model.info.hiddenSize;
      if (s.embeds && s.embeds.length % H) throw new RangeError(`step: seqs[${i}].embeds holds ${s.embeds.length} floats, not rows of ${H}`);
      if (s.positions && s.positions.length !== 3 * s.tokens.length)
        throw new RangeError(`step: seqs[${i}].positions holds ${s.positions.length} ids for ${s.tokens.length} tokens (3 each)`);
      set("embeds", addr(s.embeds));
      set("n_embeds", s.embeds ? s.embeds.length / H : 0);
      set("positions", addr(s.positions));
      set("speculate", 0);
      const r = s.sample;
      set("sample", r ? 1 : 0);
      const top = Math.min(r?.topLogprobs ?? 0, MAX_TOP_LOGPROBS);
      const t = { ids: new Int32Array(top), logprobs: new Float32Array(top) };
      tops.push(t);
      if (!r) return;
      writeSampling(view, SEQ, base, r.sampling);
      set("penalty_tokens", addr(r.penaltyTokens));
      set("n_penalty_tokens", r.penaltyTokens?.length ?? 0);
      set("n_top_logprobs", top);
      set("allowed", addr(r.allowed));
      set("top_ids", addr(t.ids));
      set("top_logprobs", addr(t.logprobs));
    });
    const speculate = seqs.some((s) => s.speculate) ? this.speculateParts(seqs, view) : null;
    const call: ThreadCall = { fn: "splash_step", args: [this.model.handle, this.handle, addr(bytes), seqs.length] };
    return { call, buffers: [bytes, speculate, seqs, tops], finish: () => this.stepResults(seqs, view, tops, speculate) };
  }

  // Each sequence's sample after the step returned.
  private stepResults(seqs: readonly StepInput[], view: DataView, tops: { ids: Int32Array; logprobs: Float32Array }[], speculate: ReturnType<Cache["speculateParts"]> | null): (SampledToken | null)[] {
    let refused = false;
    const results = seqs.map((s, i): SampledToken | Error | null => {
      if (!s.sample) return null;
      const base = i * SEQ.size;
      const error = getField(view, SEQ, "error", base);
      if (error !== 0) {
        refused = true;
        return new Error(new CString(error as Pointer).toString());
      }
      const t = tops[i]!;
      const out: SampledToken = {
        token: getField(view, SEQ, "token", base),
        logprob: getField(view, SEQ, "logprob", base),
        top: t.ids.length ? alternatives(t.ids, t.logprobs) : null,
      };
      const o = speculate?.outs[i];
      const lp = o?.logprobs;
      if (o && lp) {
        const n = getField(speculate.view, SPECULATE, "n_accepted", i * SPECULATE.size);
        const k = o.topIds.length / lp.length;
        out.accepted = Array.from({ length: n }, (_, r) => ({
          token: s.tokens[1 + r]!,
          logprob: lp[r]!,
          top: k ? alternatives(o.topIds.subarray(r * k, (r + 1) * k), o.topLogprobs.subarray(r * k, (r + 1) * k)) : null,
        }));
      }
      if (o?.next) out.drafts = o.next;
      return out;
    });
    if (refused) throw new StepRefusals(results);
    return results as (SampledToken | null)[]; // no Error: none was refused
  }

  // The splash_speculate of each sequence that has one (its splash_seq points to it) and that part's outputs: a verify
  // block's per-row log-probabilities and alternatives, the next drafts.
  private speculateParts(seqs: readonly StepInput[], seqView: DataView) {
    const bytes = new Uint8Array(seqs.length * SPECULATE.size);
    const view = new DataView(bytes.buffer);
    const outs = seqs.map((s, i) => {
      const p = s.speculate;
      if (!p) return null;
      const base = i * SPECULATE.size;
      const set = (field: string, x: number | bigint) => setField(view, SPECULATE, field, x, base);
      const v = p.verify;
      const rows = v ? v.nDraft + 1 : 0;
      const top = Math.min(s.sample?.topLogprobs ?? 0, MAX_TOP_LOGPROBS);
      const o = {
        logprobs: v ? new Float32Array(rows) : null,
        topIds: new Int32Array(rows * top),
        topLogprobs: new Float32Array(rows * top),
        next: p.next ? new Int32Array(p.next) : null,
      };
      if (v) {
        set("n_draft", v.nDraft);
        set("n_proposed", v.nProposed);
        set("allowed", addr(v.allowed));
        set("logprobs", addr(o.logprobs));
        set("top_ids", addr(o.topIds));
        set("top_logprobs", addr(o.topLogprobs));
      }
      set("n_next", p.next ?? 0);
      set("next", addr(o.next));
      set("next_logits", addr(p.nextLogits));
      set("next_probs", addr(p.nextProbs));
      setField(seqView, SEQ, "speculate", ptr(bytes) + base, i * SEQ.size);
      return o;
    });
    return { bytes, view, outs };
  }

  free(): void {
    if (this.#handle === null) return;
    if (this.#busy) throw new Error("the cache is still computing");
    this.model.lib.splash_cache_free(this.#handle);
    this.#handle = null;
  }
}
