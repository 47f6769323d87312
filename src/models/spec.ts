// The model spec: what `models/<id>/spec.json` says about one model Splash knows by name. Two kinds share it:
//   - a hub model (qwen3.8-27b, qwen3.6-35b-a3b): where its files live on the Hugging Face hub per format, the
//     text_config a checkpoint must match exactly, the quantization recipe and the memory plan (computed by
//     scripts/models/memory_plan.ts from the config's tensor shapes, never typed in);
//   - an embedded model (splash-tiny): its files sit beside the spec and ship inside dist/splash.
// One strict schema for both, so a typo in a spec is an error at load, not a silently ignored key.
import { z } from "zod";
import { KV_TYPES } from "./kv-type.ts";

export const ARCHITECTURES = ["qwen3_5", "qwen3_5_moe"] as const;
export type Architecture = (typeof ARCHITECTURES)[number];

// Formats a hub model can be pulled in. bf16 is the official checkpoint; the MLX ones are mlx-community's affine
// quantizations (what Mac users already have on disk).
export const FORMATS = ["bf16", "mlx-4bit", "mlx-8bit"] as const;
export type Format = (typeof FORMATS)[number];

// Splash's own weight levels: as stored (bf16), or quantized at load / by `splash import` per the recipe.
export const QUANTS = ["bf16", "q8", "q4"] as const;
export type Quant = (typeof QUANTS)[number];

export const DRAFT_METHODS = ["none", "mtp", "dflash", "dflash2"] as const;
export type DraftMethod = (typeof DRAFT_METHODS)[number];
export type Drafter = Exclude<DraftMethod, "none">; // a drafter a model can have attached
export const DRAFTER_NAMES: Record<Drafter, string> = { mtp: "MTP", dflash: "DFlash", dflash2: "DFlash2" };

// Storage of one tensor: as stored, Splash's Q8/Q4 rows (native/core/quant.h), or MLX affine (packed uint32 +
// bf16 scales and biases per group).
export const WEIGHT_TYPES = ["bf16", "q8", "q4", "mlx-affine-4", "mlx-affine-8"] as const;
export type WeightType = (typeof WEIGHT_TYPES)[number];

// What each tensor of a checkpoint is, for the quantization recipe and the memory plan: libsplash's list
// (splash_tensor_kind in native/include/splash.h, whose loaders name each matrix's kind), in its order, which
// test/unit/native/load-recipe.test.ts checks; src/models/packed.ts assigns them from the tensor names.
export const TENSOR_KINDS = [
  "embed", // embed_tokens [vocab, hidden]
  "lm_head", // [vocab, hidden]
  "norm", // every RMSNorm / LayerNorm weight and bias (1-D)
  "attn_proj", // q_proj (query+gate), k_proj, v_proj, o_proj
  "gdn_proj", // in_proj_qkv, in_proj_z, out_proj
  "gdn_gate_proj", // in_proj_a, in_proj_b: [value heads, hidden], small and feed the decay and beta
  "gdn_conv", // conv1d.weight [conv_dim, 1, kernel]
  "gdn_param", // A_log, dt_bias [value heads]
  "mlp", // dense gate_proj, up_proj, down_proj
  "moe_router", // mlp.gate [experts, hidden]
  "moe_experts", // experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]
  "shared_expert", // shared_expert.{gate,up,down}_proj
  "shared_expert_gate", // [1, hidden]
  "mtp_fc", // mtp.fc [hidden, 2·hidden]
  "vision", // every tensor of the vision tower
  "dflash", // every tensor of a DFlash or DFlash2 drafter
] as const;
export type TensorKind = (typeof TENSOR_KINDS)[number];

const id = z.string().regex(/^[a-z0-9][a-z0-9.-]*$/, { error: "lowercase letters, digits, '.' and '-'" });
const repoId = z.string().regex(/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/, { error: "a hub repository id such as Qwen/Qwen3.8-27B" });
const int = z.number().int().nonnegative();
const configValue = z.union([z.number(), z.string(), z.boolean(), z.null(), z.array(z.union([z.number(), z.string()]))]);

// How sure we are that a repository is what the spec says: "verified" = seen in primary material (the hub or its
// mirrors, the publisher's own pages), "assumed" = named by third parties or by convention only. `evidence` says which.
const provenance = {
  status: z.enum(["verified", "assumed"]),
  evidence: z.string().min(1),
};

const mlxQuantization = z.strictObject({
  mode: z.literal("affine"),
  bits: z.union([z.literal(4), z.literal(8)]),
  groupSize: z.literal(64),
  // Kinds mlx-lm keeps at another bit width (its quant_predicate): the MoE router and shared-expert gate at 8.
  overrides: z.partialRecord(z.enum(TENSOR_KINDS), z.union([z.literal(4), z.literal(8)])).default({}),
});
export type MlxQuantization = z.infer<typeof mlxQuantization>;

const source = z.strictObject({
  repo: repoId,
  revision: z.string().default("main"),
  ...provenance,
  gated: z.boolean().default(false),
  // Which parts of the official checkpoint the repository carries (mlx-lm conversions drop mtp.* and the vision tower).
  contains: z.strictObject({ mtp: z.boolean(), vision: z.boolean() }),
  quantization: mlxQuantization.optional(),
});
export type Source = z.infer<typeof source>;

// The shapes of a DFlash drafter, in the names of its config.json (dflash_config flattened in); a DFlash2 drafter
// adds its per-layer attention/MLP convolutions (conv_kernel_size, conv_group_size) and candidate selector.
const dflashShapes = z.strictObject({
  hidden_size: int,
  num_hidden_layers: int,
  num_attention_heads: int,
  num_key_value_heads: int,
  head_dim: int,
  intermediate_size: int,
  target_hidden_size: int,
  target_layer_ids: z.array(int),
  block_size: int,
  vocab_size: int,
});
const dflash2Shapes = dflashShapes.extend({
  conv_kernel_size: int,
  conv_group_size: int,
  selector_rank: int,
  selector_top_k: int,
});
export type DflashShapes = z.infer<typeof dflashShapes> & Partial<z.infer<typeof dflash2Shapes>>;

// A hub repository holding a drafter: where it is and what shapes it must have.
const drafterRepo = <S extends z.ZodType>(shapes: S) =>
  z.strictObject({
    repo: repoId,
    revision: z.string().default("main"),
    ...provenance,
    gated: z.boolean().default(false),
    shapes,
    shapesEvidence: z.string().min(1),
  });
const dflashDrafter = drafterRepo(dflashShapes);
const dflash2Drafter = drafterRepo(dflash2Shapes);
export type DflashDrafter = z.infer<typeof dflashDrafter> | z.infer<typeof dflash2Drafter>;

// A recipe rule: the kinds it covers and their storage at each Splash quant level. Every kind of a checkpoint
// must be covered exactly once (checked below), so adding a kind forces a decision.
const recipeRule = z.strictObject({
  kinds: z.array(z.enum(TENSOR_KINDS)).min(1),
  q8: z.enum(["bf16", "q8", "q4"]),
  q4: z.enum(["bf16", "q8", "q4"]),
  why: z.string().min(1),
});
export type RecipeRule = z.infer<typeof recipeRule>;

const bytesByQuant = z.strictObject({ bf16: int, q8: int, q4: int });
const bytesByDraft = z.strictObject({ none: int, mtp: int.nullable(), dflash: int.nullable(), dflash2: int.nullable() });
const bytesByKv = z.strictObject({ f32: int, f16: int, int8: int });

// Generated by scripts/models/memory_plan.ts; test/unit/models/memory.test.ts fails when it is stale.
const memoryPlan = z.strictObject({
  generatedBy: z.literal("scripts/models/memory_plan.ts"),
  parameters: z.strictObject({ text: int, mtp: int, vision: int, dflash: int.nullable(), dflash2: int.nullable() }),
  // Resident bytes of each part at each level (text = embeddings, decoder layers, final norm, lm_head).
  text: z.strictObject({ bf16: int, q8: int, q4: int, "mlx-4bit": int, "mlx-8bit": int }),
  mtp: bytesByQuant,
  vision: z.strictObject({ bf16: int }),
  dflash: bytesByQuant.nullable(),
  dflash2: bytesByQuant.nullable(),
  // What a download of each format holds (tensor payload; headers and small files are a few MB more).
  download: z.strictObject({ bf16: int, "mlx-4bit": int, "mlx-8bit": int, dflash: int.nullable(), dflash2: int.nullable() }),
  // Fixed bytes = weights + drafter, per level and draft method (null: that draft is not available there).
  fixed: z.strictObject({ bf16: bytesByDraft, q8: bytesByDraft, q4: bytesByDraft, "mlx-4bit": bytesByDraft, "mlx-8bit": bytesByDraft }),
  // Sequence state, as the native allocator sizes it: KV of every full-attention layer (K and V) per token in each
  // KV type, a drafter's own KV per token (the MTP layer's, a DFlash or DFlash2 drafter's; null: none), one
  // sequence's GDN state (recurrent S + conv tail), and the MTP layer's state (its last hidden row).
  kvBytesPerToken: bytesByKv,
  mtpKvBytesPerToken: bytesByKv,
  dflashKvBytesPerToken: bytesByKv.nullable(),
  dflash2KvBytesPerToken: bytesByKv.nullable(),
  stateBytesPerSequence: int,
  mtpStateBytes: int,
});
export type MemoryPlan = z.infer<typeof memoryPlan>;

// Element types of the sequence state; the memory plan multiplies by them and native must allocate the same. `kv`
// is the KV type `--kv-type auto` picks (src/models/kv-type.ts): the most compact one measured to hold the parity
// bound for this model (`splash bench kv`, BENCHMARKS.md).
const cacheTypes = z.strictObject({
  kv: z.enum(KV_TYPES),
  gdnState: z.literal("f32"),
  convState: z.literal("f32"),
});
export type CacheTypes = z.infer<typeof cacheTypes>;

const thinking = z.strictObject({ start: z.string(), end: z.string(), defaultEnabled: z.boolean() });

const speedups = z.strictObject({
  mtp: z.number().positive().optional(),
  dflash: z.number().positive().optional(),
  dflash2: z.number().positive().optional(),
  command: z.string().min(1),
});
// What a model runs on (Model.info.backend before its colon), the keys of measuredSpeedup.
export type BackendKind = "cpu" | "vulkan" | "metal";

export const ModelSpecSchema = z
  .strictObject({
    id,
    displayName: z.string().min(1).optional(),
    aliases: z.array(z.string().min(1)).default([]),
    architecture: z.enum(ARCHITECTURES),
    contextLength: int,
    maxOutputTokens: int,
    vocabSize: int.optional(),
    eosTokenIds: z.array(int).optional(),
    padTokenId: int.optional(),
    thinking: thinking.optional(),
    toolCallFormat: z.literal("qwen3_xml").optional(),
    vision: z.boolean().optional(),

    // Embedded model: file names inside models/<id>/.
    files: z.record(z.string(), z.string()).optional(),

    // Hub model: the text_config (and vision_config) values a checkpoint must match exactly. Keys are the
    // config's own names; "rope_parameters.rope_theta" style paths reach into nested objects.
    config: z.strictObject({ text: z.record(z.string(), configValue), vision: z.record(z.string(), configValue).optional() }).optional(),
    sources: z.partialRecord(z.enum(FORMATS), source).optional(),
    defaultFormat: z.enum(FORMATS).optional(),

    draft: z.strictObject({
      default: z.enum(DRAFT_METHODS).optional(),
      mtp: z.boolean(),
      // Each a directory beside the spec (embedded model) or a hub repository.
      dflash: z.union([z.string(), dflashDrafter]).optional(),
      dflash2: z.union([z.string(), dflash2Drafter]).optional(),
      maskTokenId: int.optional(),
    }),
    measuredAcceptance: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
    // Decode speedup of each drafter over none per backend, measured by the engine (`splash bench spec --backend B`;
    // `command` says how): what --draft auto picks from on that backend (a drafter's cost against a step differs
    // between a CPU computing every row and a GPU streaming the weights once for all of them).
    measuredSpeedup: z.strictObject({ cpu: speedups.optional(), vulkan: speedups.optional(), metal: speedups.optional() }).optional(),

    quantization: z.strictObject({ default: z.enum(QUANTS), recipe: z.array(recipeRule).min(1) }).optional(),
    cache: cacheTypes.optional(),
    memory: memoryPlan.optional(),
    template: z.strictObject({ quirks: z.array(z.string()) }).optional(),
  })
  .superRefine((s, ctx) => {
    const hub = s.sources !== undefined;
    if (hub === (s.files !== undefined)) ctx.addIssue({ code: "custom", message: "a spec has either `sources` (hub model) or `files` (embedded model)" });
    if (hub) {
      for (const key of ["config", "defaultFormat", "quantization", "cache", "displayName"] as const) {
        if (s[key] === undefined) ctx.addIssue({ code: "custom", path: [key], message: `a hub model needs \`${key}\`` });
      }
      if (s.defaultFormat && !s.sources?.[s.defaultFormat]) ctx.addIssue({ code: "custom", path: ["defaultFormat"], message: `no source for ${s.defaultFormat}` });
      for (const d of ["dflash", "dflash2"] as const)
        if (typeof s.draft[d] === "string") ctx.addIssue({ code: "custom", path: ["draft", d], message: "a hub model's drafter is a repository" });
      if (s.draft.dflash && s.draft.dflash2) ctx.addIssue({ code: "custom", path: ["draft"], message: "a hub model names one drafter repository (dflash or dflash2)" });
    }
    for (const [i, rule] of (s.quantization?.recipe ?? []).entries()) {
      for (const kind of rule.kinds) {
        const first = s.quantization!.recipe.findIndex((r) => r.kinds.includes(kind));
        if (first !== i) ctx.addIssue({ code: "custom", path: ["quantization", "recipe", i], message: `${kind} is covered by rule ${first} already` });
      }
    }
  });

export type ModelSpec = z.infer<typeof ModelSpecSchema>;
// A spec with the hub-model sections present (checked by the schema's refinement).
export type HubModelSpec = ModelSpec & Required<Pick<ModelSpec, "config" | "sources" | "defaultFormat" | "quantization" | "cache" | "displayName">>;

export function isHubSpec(s: ModelSpec): s is HubModelSpec {
  return s.sources !== undefined;
}

// The separately downloaded drafter of a hub model (`splash pull MODEL --drafter`), if its spec names one.
export function hubDrafter(s: HubModelSpec): { method: "dflash" | "dflash2"; repo: DflashDrafter } | undefined {
  for (const method of ["dflash", "dflash2"] as const) {
    const d = s.draft[method];
    if (typeof d === "object") return { method, repo: d };
  }
  return undefined;
}

// Parses one spec file's JSON; the error names the file and the first bad field.
export function parseSpec(json: unknown, where: string): ModelSpec {
  const r = ModelSpecSchema.safeParse(json);
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  throw new Error(`${where}: ${issue.path.join(".") || "(root)"}: ${issue.message}`);
}

// Storage of a kind at a Splash level, per the recipe. A kind the recipe does not name is a spec bug (the memory
// test checks every kind of the model's inventory is covered), so it throws rather than guessing.
export function recipeType(recipe: readonly RecipeRule[], kind: TensorKind, quant: Quant): RecipeRule["q4"] {
  if (quant === "bf16") return "bf16";
  const rule = recipe.find((r) => r.kinds.includes(kind));
  if (!rule) throw new Error(`the quantization recipe does not cover tensor kind ${kind}`);
  return rule[quant];
}
