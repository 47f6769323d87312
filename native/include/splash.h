/*
 * splash.h — the whole ABI of libsplash.
 *
 * TypeScript calls this library through bun:ffi at the granularity of a scheduler step (ARCHITECTURE.md §2):
 * load a model, create the sequence-state cache, run one mixed batch per step, copy pages and state slots for the
 * prefix cache. Big buffers (weights, logits) stay here unless the caller passes a buffer for them.
 *
 * Conventions
 *  - Every function that can fail returns splash_status; splash_last_error() then holds a message for the calling
 *    thread naming what failed (file, tensor, value) and, where there is one, the fix.
 *  - Structs passed in carry `struct_size` first so the layout can grow; the binding writes sizeof as it knows it.
 *  - Sizes and byte counts are 64-bit. Token ids, positions, page ids and slot ids are int32.
 *  - The library never exits or prints; it never keeps hidden global state beyond the per-thread error message.
 *  - A model and its caches may be called from any thread: calls that run on the model (steps, drafts, images, cache
 *    copies) hold the model's lock, so calls from two threads take turns. A tokenizer serves one thread at a time.
 *
 * Bump SPLASH_ABI_VERSION on any change a binding must know about; src/native/ checks it at load.
 */
#ifndef SPLASH_H
#define SPLASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SPLASH_BUILD)
#define SPLASH_API __attribute__((visibility("default")))
#else
#define SPLASH_API
#endif

#define SPLASH_ABI_VERSION 16

typedef enum splash_status {
    SPLASH_OK = 0,
    SPLASH_ERR_INVALID_ARGUMENT = 1, /* the caller passed something wrong */
    SPLASH_ERR_IO = 2,               /* a file could not be opened, read or mapped */
    SPLASH_ERR_FORMAT = 3,           /* a file is malformed: header, JSON, shapes, truncated data */
    SPLASH_ERR_UNSUPPORTED = 4,      /* well-formed but not supported: dtype, architecture, option */
    SPLASH_ERR_OUT_OF_MEMORY = 5,    /* an allocation failed */
    SPLASH_ERR_CAPACITY = 6,         /* a page or slot id out of the cache's range */
    SPLASH_ERR_INTERNAL = 7,         /* a bug: please report */
} splash_status;

/* ---- library ------------------------------------------------------------------------------------------------ */

SPLASH_API int32_t splash_abi_version(void);
SPLASH_API const char *splash_version(void);
/* Message of the last failing call on this thread ("" if none). Valid until the next failing call on this thread. */
SPLASH_API const char *splash_last_error(void);
/* Space-separated CPU features the library detected and uses, e.g. "avx2 fma f16c". */
SPLASH_API const char *splash_cpu_features(void);

/* ---- tokenizer (src/tokenizer/) ---------------------------------------------------------------------------- */
/* The byte-level BPE hot path: pre-tokenizer regex split + merges. Normalization (NFC) and added/special tokens are
 * the caller's: it passes the plain-text segments between them, one call each. One thread at a time per tokenizer. */

typedef struct splash_tokenizer splash_tokenizer;
/* pattern: the Split pre-tokenizer regex (Oniguruma syntax, native/tokenizer/regex.h), NULL or "" for none.
 * Token id i's bytes are token_bytes[token_offsets[i] .. token_offsets[i+1]) (empty = unused id); merges holds
 * n_merges pairs (left id, right id) in rank order. ignore_merges: a piece that is a token is taken whole. */
SPLASH_API splash_status splash_tokenizer_create(const char *pattern, const uint8_t *token_bytes, const uint32_t *token_offsets,
                                                 int32_t n_tokens, const int32_t *merges, int32_t n_merges, int32_t ignore_merges,
                                                 splash_tokenizer **out);
SPLASH_API void splash_tokenizer_free(splash_tokenizer *t);
/* Encodes UTF-8 text (already normalized, no added tokens) into ids; max_ids must be >= n_bytes. */
SPLASH_API splash_status splash_tokenizer_encode(splash_tokenizer *t, const uint8_t *text, int64_t n_bytes, int32_t *ids,
                                                 int64_t max_ids, int64_t *n_ids);

/* ---- checkpoint files (src/models/files.ts) ------------------------------------------------------------------ */
/* The files of a checkpoint directory as splash_model_load finds them (model.splash; else the index and the shards
 * its weight_map names; else model.safetensors; else every *.safetensors), checked without reading tensor data:
 * each file a plain name in the directory whose target after symlinks is inside it (or a Hugging Face cache blob),
 * every header valid and inside its file, index and headers in agreement. A refusal names the file and, where
 * there is one, the index entry. splash_model_load makes the same checks and also samples the values. */

typedef struct splash_checkpoint splash_checkpoint;
SPLASH_API splash_status splash_checkpoint_open(const char *dir, splash_checkpoint **out);
SPLASH_API void splash_checkpoint_close(splash_checkpoint *ck);
/* Tensors in all files. */
SPLASH_API int64_t splash_checkpoint_tensor_count(const splash_checkpoint *ck);
/* File i (0-based) as the checkpoint names it, relative to the directory, and its size in *bytes; NULL past the
 * last. The text lives as long as ck. */
SPLASH_API const char *splash_checkpoint_file(const splash_checkpoint *ck, int32_t i, uint64_t *bytes);

/* ---- model (native/arch/ + native/api/) ------------------------------------------------------------------- */

typedef struct splash_model splash_model;
typedef struct splash_cache splash_cache;

enum { SPLASH_QUANT_NONE = 0, SPLASH_QUANT_Q8 = 1, SPLASH_QUANT_Q4 = 2 };
/* What each tensor of a checkpoint is, as the loaders name it: a quantization recipe (src/models/spec.ts, whose
 * TENSOR_KINDS is checked equal to splash_tensor_kind_name's list) gives each kind its storage. */
typedef enum splash_tensor_kind {
    SPLASH_KIND_EMBED,              /* embed_tokens [vocab, hidden] */
    SPLASH_KIND_LM_HEAD,            /* [vocab, hidden] */
    SPLASH_KIND_NORM,               /* every RMSNorm / LayerNorm weight and bias */
    SPLASH_KIND_ATTN_PROJ,          /* q_proj (query + gate), k_proj, v_proj, o_proj */
    SPLASH_KIND_GDN_PROJ,           /* in_proj_qkv, in_proj_z, out_proj */
    SPLASH_KIND_GDN_GATE_PROJ,      /* in_proj_a, in_proj_b: [value heads, hidden], feed the decay and beta */
    SPLASH_KIND_GDN_CONV,           /* conv1d.weight */
    SPLASH_KIND_GDN_PARAM,          /* A_log, dt_bias */
    SPLASH_KIND_MLP,                /* dense gate_proj, up_proj, down_proj */
    SPLASH_KIND_MOE_ROUTER,         /* mlp.gate [experts, hidden] */
    SPLASH_KIND_MOE_EXPERTS,        /* the routed experts */
    SPLASH_KIND_SHARED_EXPERT,      /* shared_expert.{gate,up,down}_proj */
    SPLASH_KIND_SHARED_EXPERT_GATE, /* [1, hidden] */
    SPLASH_KIND_MTP_FC,             /* mtp.fc [hidden, 2·hidden] */
    SPLASH_KIND_VISION,             /* every tensor of the vision tower */
    SPLASH_KIND_DFLASH,             /* every tensor of a DFlash or DFlash2 drafter */
    SPLASH_N_TENSOR_KINDS
} splash_tensor_kind;
/* The name of kind k ("embed", "lm_head", …, as the recipes spell it); NULL past the last. */
SPLASH_API const char *splash_tensor_kind_name(int32_t kind);
enum { SPLASH_ARCH_QWEN3_5 = 1, SPLASH_ARCH_QWEN3_5_MOE = 2 };
/* AUTO: the GPU when one is usable — Metal on macOS, Vulkan elsewhere (never a CPU implementation of Vulkan) —
 * else the CPU. METAL: the Mac's GPU or a failure saying why (macOS builds only). */
enum { SPLASH_BACKEND_AUTO = 0, SPLASH_BACKEND_CPU = 1, SPLASH_BACKEND_VULKAN = 2, SPLASH_BACKEND_METAL = 3 };
/* Element type of the KV cache (every attention layer's K and V, the drafter's too): f32; f16; int8 in groups of 32
 * values with an f16 scale per group (8.5 bits a value). Attention accumulates in f32 whatever the type; the GDN
 * recurrent state and conv tail stay f32. */
enum { SPLASH_KV_F32 = 0, SPLASH_KV_F16 = 1, SPLASH_KV_INT8 = 2 };
#define SPLASH_MAX_TOP_LOGPROBS 20

typedef struct splash_load_options {
    uint32_t struct_size;    /* sizeof(splash_load_options) */
    /* [SPLASH_N_TENSOR_KINDS] SPLASH_QUANT_* per tensor kind: each matrix of a float checkpoint is quantized to its
     * kind's type at load, NONE keeping it as stored (mapped, zero-copy); vectors always stay as stored and the vision
     * tower computes in f32 (its kind must be NONE). NULL: every kind NONE. Copied at load; drafters attached later
     * follow it. A packed or MLX checkpoint's quantized matrices load as stored whatever it says. */
    const int32_t *quant;
    int32_t n_threads;       /* 0 = every core */
    int32_t max_step_tokens; /* most tokens one splash_step may carry over all its sequences; 0 = the backend's measured step for
                              * this model (a GPU's models/<id>/vulkan.json "prefillChunk"), else 512 */
    int32_t backend;         /* SPLASH_BACKEND_*; VULKAN takes any Vulkan device (SPLASH_VULKAN_DEVICE=<index> picks) */
    /* The rows of the output head that are tokens. Checkpoints pad the head beyond the tokenizer (Qwen3.5: 248,320
     * rows); a row that is no token is never sampled, drafted, accepted or listed among the top log-probabilities,
     * and is left out of the distribution `logprob` is taken from. n_tokens: the tokenizer's ids are 0 … n_tokens − 1,
     * at most vocab_size (0 = every row is a token); tokens: NULL (each of those ids is a token) or a bitmask
     * [ceil(n_tokens / 32)], bit t set = id t is a token (tokenizers with unused ids). Copied at load. */
    int32_t n_tokens;
    const uint32_t *tokens;
} splash_load_options;

typedef struct splash_model_info {
    uint32_t struct_size;
    int32_t arch;                      /* SPLASH_ARCH_* */
    int32_t vocab_size, hidden_size, n_layers, n_full_attention_layers, n_linear_attention_layers;
    int32_t max_position_embeddings, has_mtp, has_vision, n_threads, max_step_tokens;
    int32_t kv_type;                   /* SPLASH_KV_* of the caches created now (splash_model_set_kv_type) */
    uint64_t weight_bytes;             /* weights this model holds in memory (mapped or quantized) */
    uint64_t scratch_bytes;            /* activations and work buffers, sized for max_step_tokens */
    uint64_t kv_bytes_per_token;       /* all full-attention layers, K + V, in kv_type */
    uint64_t state_bytes;              /* one GDN state slot: recurrent S (fp32) + conv tail, all GDN layers */
    uint64_t decode_bytes_per_token;   /* weight bytes one single-token decode step reads (MoE: top_k experts) */
} splash_model_info;

/* Loads a checkpoint directory (config.json with text_config, safetensors with or without an index). Refuses a
 * missing or mis-shaped tensor with a message naming the tensor and the file. */
SPLASH_API splash_status splash_model_load(const char *dir, const splash_load_options *opts, splash_model **out);
SPLASH_API void splash_model_free(splash_model *m);
SPLASH_API splash_status splash_model_get_info(const splash_model *m, splash_model_info *out);
/* The backend the model runs on ("auto" resolved) and its device: "cpu", "vulkan: NVIDIA H200", "metal: Apple M4".
 * The text lives as long as the model. */
SPLASH_API const char *splash_model_backend(const splash_model *m);
/* The KV types the model's backend runs: bit (1 << SPLASH_KV_*) set for each. */
SPLASH_API uint32_t splash_model_kv_types(const splash_model *m);
/* The KV type of the model's caches (SPLASH_KV_F32 after load). Set it before the first cache exists, as page sizes
 * follow it; SPLASH_ERR_UNSUPPORTED, naming the backend and the types it has, when its backend lacks the type. */
SPLASH_API splash_status splash_model_set_kv_type(splash_model *m, int32_t kv_type);
/* The backend a load would run on for `backend` (SPLASH_BACKEND_*), found by creating it and letting it go, without
 * a model: `name` gets what splash_model_backend would say; when AUTO settles for the CPU, `why` (may be NULL) gets
 * why each GPU backend was passed over ("" when one was taken). Texts are truncated to their capacity. Fails as the
 * load would where an explicit VULKAN or METAL cannot be had. */
SPLASH_API splash_status splash_backend_probe(int32_t backend, char *name, int32_t name_cap, char *why, int32_t why_cap);

/* Sequence-state memory, sized by the caller's memory plan: n_pages KV pages of page_tokens positions each (every
 * full-attention layer's K and V), n_slots GDN state slots (recurrent S fp32 + conv tail of every GDN layer). Ids
 * are 0..n−1; the caller (src/engine) owns allocation, reference counts and the prefix cache: native only reads and
 * writes what a step names. The two size functions are the ones the memory planner uses. */
SPLASH_API splash_status splash_cache_create(splash_model *m, int32_t page_tokens, int32_t n_pages, int32_t n_slots,
                                             splash_cache **out);
SPLASH_API void splash_cache_free(splash_cache *c);
SPLASH_API uint64_t splash_cache_page_bytes(const splash_model *m, int32_t page_tokens);
SPLASH_API uint64_t splash_cache_slot_bytes(const splash_model *m);
SPLASH_API splash_status splash_cache_copy_page(splash_cache *c, int32_t src, int32_t dst); /* copy-on-write */
SPLASH_API splash_status splash_cache_copy_slot(splash_cache *c, int32_t src, int32_t dst); /* GDN snapshot save/restore */
SPLASH_API splash_status splash_cache_clear_slot(splash_cache *c, int32_t slot);             /* a fresh sequence */
/* A page or a slot to and from host memory (a copy of the prefix cache kept on disk): `bytes` is exactly
 * splash_cache_page_bytes / splash_cache_slot_bytes of the cache's model, the target's state and the drafter's
 * together; nothing else is read or written. */
SPLASH_API splash_status splash_cache_read_page(splash_cache *c, int32_t page, void *dst, uint64_t bytes);
SPLASH_API splash_status splash_cache_write_page(splash_cache *c, int32_t page, const void *src, uint64_t bytes);
SPLASH_API splash_status splash_cache_read_slot(splash_cache *c, int32_t slot, void *dst, uint64_t bytes);
SPLASH_API splash_status splash_cache_write_slot(splash_cache *c, int32_t slot, const void *src, uint64_t bytes);

typedef struct splash_sampling {
    float temperature;        /* 0 = greedy (argmax) */
    float top_p;              /* 1 = off; 0 keeps the most likely token alone */
    int32_t top_k;            /* 0 = off */
    float min_p;              /* 0 = off; relative to the most likely token */
    float presence_penalty;   /* 0 = off; subtracted once from every token in penalty_tokens */
    float frequency_penalty;  /* 0 = off; subtracted once per occurrence in penalty_tokens */
    float repetition_penalty; /* 1 = off; HF rule: logit > 0 ? logit / r : logit · r, once per distinct token */
    int32_t n_bias;           /* logit bias (OpenAI's logit_bias): bias[k] is added to the logit of token bias_ids[k] */
    uint64_t seed;
    const int32_t *bias_ids;  /* [n_bias] ids that are tokens (splash_load_options.tokens) */
    const float *bias;        /* [n_bias] finite values, added after the penalties */
} splash_sampling;

/* The speculative part of one sequence of a step (splash_seq.speculate; speculative decoding below); a sequence
 * that uses it samples (sample = 1).
 *
 * Verify (n_proposed > 0): tokens = [anchor, d1 … d_n_draft], the anchor being the token the sequence's previous step
 * sampled and d the first drafts that step proposed (`next`). At temperature > 0 they must be exactly those (same
 * slot and position: the draft distributions stay in the model until the sequence's next step); at temperature 0
 * drafts from anywhere are verified (greedy acceptance needs no distribution). The step accepts, writes the final
 * token to splash_seq.token and leaves the GDN state and K/V as if only the accepted tokens had been decoded
 * (positions past them are overwritten by later steps).
 *
 * Draft (n_next > 0): after the step, the drafter proposes n_next tokens to follow the sampled token, which sits at
 * position n_past + n_accepted + 1 once accepted drafts are counted. Temperature 0: the argmax (DFlash2: the
 * selector's best candidate); else drawn from the drafter's distribution under the sequence's settings (DFlash2:
 * softmax(selector scores / temperature) over its candidates, taken from its row after the penalties and the bias),
 * RNG = f(seed, position); the penalties count the generated tokens, the ones this step emitted and the earlier
 * drafts. The page table must cover n_past + n_tokens + n_next positions (the drafter writes its K/V ahead). */
typedef struct splash_speculate {
    int32_t n_draft;          /* drafts verified: seqs[i].n_tokens = n_draft + 1 */
    int32_t n_proposed;       /* drafts proposed, ≥ n_draft: n_draft + 1 when draft n_draft was refused before
                                 verification (a grammar), which then counts as rejected at its position; n_draft when
                                 the rest were dropped unseen (they do not count); 0 = no verify block */
    const uint32_t *allowed;  /* NULL or [n_draft + 1][ceil(vocab / 32)]: allowed tokens at each block position
                                 (instead of seqs[i].allowed) */
    int32_t n_accepted;       /* out: drafts accepted, 0 .. n_draft; seqs[i].token is the target's token after them */
    float *logprobs;          /* NULL or out [n_draft + 1]: each emitted token's (accepted drafts, then the last) */
    int32_t *top_ids;         /* NULL or out [n_draft + 1][seqs[i].n_top_logprobs] */
    float *top_logprobs;      /* NULL or out, same shape */
    int32_t n_next;           /* drafts wanted after this step's token: 0 .. max_draft */
    int32_t *next;            /* out [n_next]: the drafts (−1 when the sequence was refused) */
    float *next_logits;       /* NULL or out [n_next][vocab]: the drafter's raw logits of each draft */
    float *next_probs;        /* NULL or out [n_next][vocab]: the distribution each draft was drawn from (the q the
                                 acceptance uses; one-hot at temperature 0) */
} splash_speculate;


/* One sequence's share of a step. A step carries any mix: prefill chunks, single-token decodes, verify blocks of
 * drafts, and drafts of the next block. All positions of all sequences go through each weight matrix together. */
typedef struct splash_seq {
    int32_t slot;                     /* GDN state slot; n_past == 0 starts from a zero state whatever the slot holds */
    int32_t n_past;                   /* positions already in the cache (KV pages and GDN state) */
    int32_t n_tokens;                 /* ≥ 1 new positions */
    int32_t n_logits;                 /* trailing positions whose logits are written to `logits` (0..n_tokens) */
    const int32_t *tokens;            /* [n_tokens] */
    const int32_t *pages;             /* page table covering positions [0, n_past + n_tokens) */
    int32_t n_pages;
    int32_t sample;                   /* 1 = sample one token after the last position */
    splash_sampling sampling;         /* RNG = f(seed, n_past + n_tokens): the same draw alone or batched */
    const int32_t *penalty_tokens;    /* tokens generated so far, for the penalties */
    int32_t n_penalty_tokens;
    int32_t n_top_logprobs;           /* 0..SPLASH_MAX_TOP_LOGPROBS */
    const uint32_t *allowed;          /* NULL or bitmask [ceil(vocab/32)] for the sampled position */
    float *logits;                    /* NULL or out [n_logits][vocab]: raw logits, before penalties */
    int32_t token;                    /* out: the sampled token */
    float logprob;                    /* out: its log-probability under log_softmax(logits after penalties, the bias,
                                         the allowed mask and the model's tokens), before temperature and
                                         top-k/top-p/min-p */
    int32_t *top_ids;                 /* out [n_top_logprobs], most likely first, same distribution as `logprob`; ids
                                         that could not be chosen are not listed: −1 fills what they leave */
    float *top_logprobs;              /* out [n_top_logprobs] */
    /* images (splash_vision_encode); NULL for text */
    const float *embeds;              /* NULL or [n_embeds][hidden_size]: the input rows of this step's image-pad tokens
                                         (splash_vision_info.image_token_id), in order, instead of their embedding */
    int32_t n_embeds;                 /* the number of image-pad tokens in tokens[] when embeds is set */
    const int32_t *positions;         /* NULL (row j at position n_past + j) or [n_tokens][3]: M-RoPE (t, h, w)
                                         positions, as transformers' get_rope_index gives them (text: three equal) */
    const char *error;                /* out: NULL, or why this sequence alone was refused (its sampling settings,
                                         penalty or top-logprob buffers, or an allowed mask that leaves no token): it
                                         was not sampled (token −1) and a verify block accepted nothing; the step
                                         still computed its positions. The text lives in the cache until its next
                                         step. */
    splash_speculate *speculate;      /* NULL, or this sequence's verify block and next drafts (a model with a drafter) */
} splash_seq;

/* Runs one forward step over n_seqs sequences (distinct slots; Σ n_tokens ≤ max_step_tokens). Each sequence's new
 * K/V and GDN state are written to its pages and slot; with a drafter, verify blocks are accepted and the next drafts
 * proposed in the same call (splash_speculate). Arguments are checked before anything is written: what
 * concerns the whole step (slots, pages, tokens, sizes) fails the call; what concerns one sequence's sample refuses
 * that sequence alone (splash_seq.error) while the others are sampled. Steps on one model must not overlap (they
 * share its scratch); the call returns when the step is done. */
SPLASH_API splash_status splash_step(splash_model *m, splash_cache *c, splash_seq *seqs, int32_t n_seqs);

/* ---- vision (native/arch/qwen3_5_vision.c, native/api/vision.c) -----------------------------------------------
 * The checkpoint's vision tower turns an image's patches into the rows that replace its <|image_pad|> tokens (passed
 * to a step through splash_seq.embeds, with M-RoPE positions in splash_seq.positions). Preprocessing (resize,
 * normalize, patch order) and the positions are the caller's (src/vision/); the tower runs on the CPU. */

typedef struct splash_vision_info {
    uint32_t struct_size;
    int32_t depth, hidden_size, out_hidden_size; /* out_hidden_size = the language model's hidden_size */
    int32_t in_channels, patch_size, temporal_patch_size, spatial_merge_size;
    int32_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
    uint64_t weight_bytes;            /* the tower's weights (not in splash_model_info.weight_bytes) */
} splash_vision_info;

/* SPLASH_ERR_UNSUPPORTED when the checkpoint has no vision tower. */
SPLASH_API splash_status splash_vision_get_info(const splash_model *m, splash_vision_info *info);
/* Encodes one image: grid_t frames of grid_h × grid_w patches (h, w multiples of spatial_merge_size). pixels:
 * [t·h·w][in_channels · temporal_patch_size · patch_size²], rows in merge-window order as the Qwen2-VL processor lays
 * them out; out: [t·h·w / spatial_merge_size²][out_hidden_size]. Must not overlap a step on the same model. */
SPLASH_API splash_status splash_vision_encode(splash_model *m, const float *pixels, int32_t grid_t, int32_t grid_h,
                                              int32_t grid_w, float *out);

/* ---- speculative decoding (native/api/speculate.c) -----------------------------------------------------------
 * A drafter proposes tokens; the target scores them in one verify block; the longest prefix it agrees with (greedy)
 * or that rejection sampling keeps (temperature > 0) is accepted, plus one token of the target's own. The outputs are
 * exactly what decoding without a drafter gives (greedy) or distributed exactly like them (sampling). One splash_step
 * per cycle: it verifies the drafts the sequence's previous step proposed, accepts, and drafts the next block from
 * the token it samples; the caller carries the drafts over (a grammar cuts them and gives one mask per block position
 * in between; splash_speculate, above). Every other sequence of the step rides along. */

enum { SPLASH_DRAFT_NONE = 0, SPLASH_DRAFT_MTP = 1, SPLASH_DRAFT_DFLASH = 2, SPLASH_DRAFT_DFLASH2 = 3 };

typedef struct splash_drafter_options {
    uint32_t struct_size;
    int32_t kind;             /* SPLASH_DRAFT_MTP (the checkpoint's mtp.* layer), SPLASH_DRAFT_DFLASH or _DFLASH2 */
    const char *dir;          /* DFlash/DFlash2: the drafter's directory (config.json + safetensors); MTP: NULL */
    int32_t max_draft;        /* most drafts per cycle: MTP chain length (0 = 3), DFlash ≤ block_size − 1 (0 = that) */
    int32_t max_seqs;         /* most sequences one step verifies, and most it drafts for (0 = 8) */
} splash_drafter_options;

typedef struct splash_drafter_info {
    uint32_t struct_size;
    int32_t kind, max_draft, max_seqs;
    int32_t block_size;       /* DFlash and DFlash2: B (0 for MTP) */
    int32_t mask_token_id;    /* DFlash and DFlash2 (−1 for MTP) */
    uint64_t weight_bytes;    /* the drafter's weights (also in splash_model_info.weight_bytes) */
    uint64_t scratch_bytes;   /* its activations, draft distributions and verify buffers (also in .scratch_bytes) */
    uint64_t kv_bytes_per_token; /* its K/V per position (also in splash_cache_page_bytes) */
    uint64_t state_bytes;     /* its per-sequence state (also in splash_cache_slot_bytes) */
} splash_drafter_info;

/* Attaches a drafter before any cache of the model exists: its weights load now; from then on page and slot sizes,
 * weight and scratch bytes include it, and every step writes its K/V for the positions it commits, so pages the
 * caller's prefix cache shares hold the drafter's K/V as well. One drafter per model. */
SPLASH_API splash_status splash_model_attach_drafter(splash_model *m, const splash_drafter_options *opts);
SPLASH_API splash_status splash_model_get_drafter_info(const splash_model *m, splash_drafter_info *out);


/* The acceptance rule alone, on given distributions (for tests): p [k + 1][vocab] target, q [q_rows][vocab] draft
 * (q_rows = k, or k + 1 when a (k+1)-th draft was refused before verification), drafts [k]; draws from (seed,
 * position pos0 + i). Writes the final token; returns the number of drafts accepted. */
SPLASH_API int32_t splash_draft_accept(const float *p, const float *q, int32_t q_rows, int32_t vocab, const int32_t *draft,
                                       int32_t k, uint64_t seed, uint64_t pos0, int32_t *token);

/* ---- tensor inventory (native/api/inventory.c, src/models/inventory.ts) ---------------------------------------------
 * The tensors a checkpoint of a given config.json holds, without any weights: the loaders run over a checkpoint that
 * makes each tensor as they require it, so the list is exactly what a load reads, in the official layout (the hub's
 * safetensors: a multimodal config's language model under model.language_model., MoE experts fused, mtp.* when the
 * config has MTP layers, model.visual.* with a vision_config). A config the loader refuses is refused the same way. */

enum { SPLASH_PART_TEXT = 0, SPLASH_PART_MTP = 1, SPLASH_PART_VISION = 2, SPLASH_PART_DRAFTER = 3 };
/* How a tensor may be stored, rows of its last dimension: the hub's bf16; Splash's Q8 and Q4 rows; MLX affine at 4
 * or 8 bits (packed, plus a bf16 scale and bias per 64), where a row of a length MLX cannot group counts as bf16 (mlx-lm
 * leaves such a layer as it is). */
enum { SPLASH_WEIGHT_BF16 = 0, SPLASH_WEIGHT_Q8 = 1, SPLASH_WEIGHT_Q4 = 2, SPLASH_WEIGHT_MLX4 = 3, SPLASH_WEIGHT_MLX8 = 4 };
#define SPLASH_N_WEIGHT_TYPES 5
#define SPLASH_MAX_DIMS 8

typedef struct splash_inventory splash_inventory;
/* config_json: a target's config.json. drafter_kind SPLASH_DRAFT_NONE: the target's tensors (parts TEXT, MTP,
 * VISION); SPLASH_DRAFT_DFLASH or _DFLASH2: the tensors of the drafter whose config.json is drafter_config_json alone
 * (part DRAFTER), as attaching it to that target would read them. */
SPLASH_API splash_status splash_inventory_create(const char *config_json, int32_t drafter_kind, const char *drafter_config_json,
                                                 splash_inventory **out);
SPLASH_API void splash_inventory_free(splash_inventory *inv);
SPLASH_API int64_t splash_inventory_count(const splash_inventory *inv);
/* Tensor i's name (lives as long as inv; NULL past the last), its part (SPLASH_PART_*), its kind as the loader took it
 * (SPLASH_KIND_*: what a recipe gives a storage to), ndim and shape
 * [SPLASH_MAX_DIMS] (PyTorch order, zero past ndim), and its bytes stored as each type [SPLASH_N_WEIGHT_TYPES]. Any out
 * pointer may be NULL. */
SPLASH_API const char *splash_inventory_tensor(const splash_inventory *inv, int64_t i, int32_t *part, int32_t *kind,
                                               int32_t *ndim, int64_t *shape, uint64_t *bytes);
/* The sequence state as a load of the config sizes it (splash_cache_page_bytes and _slot_bytes are the two added):
 * the target's K/V bytes per token of all its full-attention layers in each SPLASH_KV_* type [3] and one GDN state
 * slot's bytes; and the drafter's, the MTP layer's in a target's inventory (zeros without one), the DFlash drafter's in
 * a drafter's. Any out pointer may be NULL. */
SPLASH_API void splash_inventory_state(const splash_inventory *inv, uint64_t *kv_bytes_per_token, uint64_t *slot_bytes,
                                       uint64_t *drafter_kv_bytes_per_token, uint64_t *drafter_slot_bytes);

/* ---- benchmarks (`splash bench …`) ---------------------------------------------------------------------------- */

/* This machine's memory read bandwidth in GB/s: n_threads (0 = every core) stream over `bytes`, best of `reps`.
 * gbs: over wall time; cpu_gbs: over the process's CPU time ÷ threads, what the threads get while they hold the
 * cores (the honest figure on a machine shared with other work). */
SPLASH_API splash_status splash_bench_memory_bandwidth(int32_t n_threads, uint64_t bytes, int32_t reps, double *gbs,
                                                       double *cpu_gbs);

/* ---- the Mac's GPU (native/backends/metal/) ---------------------------------------------------------------- */
/* What Metal reports about the default GPU, without loading a model: `splash doctor` shows it and the memory plan
 * keeps a Mac's models within what the GPU can hold resident (unified memory). */
typedef struct splash_metal_info {
    uint32_t struct_size;             /* sizeof(splash_metal_info) */
    int32_t apple_family;             /* highest MTLGPUFamilyAppleN supported: 7 = M1, 8 = M2, 9 = M3/M4; 0 = none */
    int32_t metal3;                   /* 1: supports MTLGPUFamilyMetal3 */
    int32_t usable;                   /* 1: the Metal backend runs here (Metal 3, Apple family ≥ 7, unified memory) */
    uint64_t recommended_working_set; /* MTLDevice.recommendedMaxWorkingSetSize: bytes the GPU keeps resident */
    uint64_t max_buffer;              /* MTLDevice.maxBufferLength: the largest single allocation */
    uint64_t wired_limit;             /* sysctl iogpu.wired_limit_mb in bytes; 0 = the system's default */
} splash_metal_info;
/* SPLASH_ERR_UNSUPPORTED when this library has no Metal backend (built elsewhere than macOS) or there is no GPU. */
SPLASH_API splash_status splash_metal_query(splash_metal_info *out);

#ifdef __cplusplus
}
#endif

#endif /* SPLASH_H */
