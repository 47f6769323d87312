/* qwen3_5_vision.c — the Qwen3.5-family vision tower: a ViT over 16-px patches with a 2×2 patch merger, whose rows
 * replace the image's <|image_pad|> embeddings in the language model (qwen3_5.c).
 *
 * Reference: HF transformers models/qwen3_5/modeling_qwen3_5.py (Qwen3_5VisionModel) and vision_utils.py (position
 * interpolation, rotary ids); facts in shared/reference/qwen35-architecture.md §2.7. Per image of N = t·h·w patches:
 *   x = patch_embed(pixels) + bilinear(pos_embed grid → h × w)     Conv3d as a matmul over flattened patches
 *   per block:  x = x + proj(attn(rope2d(qkv(LN1(x)))))              non-causal within each frame
 *               x = x + fc2(gelu_tanh(fc1(LN2(x))))
 *   out = fc2(gelu(fc1(LN(x) viewed as [N/4][4·D])))                 merger: 4 consecutive rows = one 2×2 window
 * Rows stay in the processor's merge-window order throughout, so the merger's view is a plain reshape.
 *
 * The tower always runs on a CPU backend of its own (weights mapped as stored, f32 compute): images are encoded once
 * per content (the TS side caches them) and the text model's backend may be a GPU without these ops. */
#include "qwen3_5_vision.h"

#include "arch/loader.h"
#include "core/error.h"
#include "core/quant.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 256 };

/* ---- config (HF vision_config names) ------------------------------------------------------------------------ */

typedef struct vision_config {
    int32_t depth, hidden_size, num_heads, intermediate_size;
    int32_t in_channels, patch_size, temporal_patch_size, spatial_merge_size;
    int32_t num_position_embeddings, out_hidden_size;
    int32_t head_dim;            /* hidden_size / num_heads */
    int32_t num_grid_per_side;   /* √num_position_embeddings: the learned position grid is square */
    int32_t patch_dim;           /* in_channels · temporal_patch_size · patch_size²: one flattened patch */
    float rope_theta;
    /* from the top-level config: what the language model's prompt carries */
    int32_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
} vision_config;

/* ---- weights (matrices [out, in] as stored; vectors f32) ------------------------------------------------------ */

typedef struct vision_block {
    const float *norm1_w, *norm1_b, *norm2_w, *norm2_b; /* (D) */
    sp_matrix qkv;               /* (3·D, D): rows [q (all heads) | k | v] */
    const float *qkv_b;          /* (3·D) */
    sp_matrix proj;              /* (D, D) */
    const float *proj_b;         /* (D) */
    sp_matrix fc1;               /* (I, D) */
    const float *fc1_b;          /* (I) */
    sp_matrix fc2;               /* (D, I) */
    const float *fc2_b;          /* (D) */
} vision_block;

typedef struct vision_weights {
    sp_matrix patch_embed;       /* (D, patch_dim): Conv3d kernel [D, C, T, P, P] read as rows */
    const float *patch_b;        /* (D) */
    float *pos_embed;            /* (num_position_embeddings, D) the learned grid, row-major by (y, x) */
    vision_block *blocks;        /* (depth) */
    const float *merger_norm_w, *merger_norm_b; /* (D) */
    sp_matrix merger_fc1;        /* (M, M), M = merge² · D */
    const float *merger_fc1_b;   /* (M) */
    sp_matrix merger_fc2;        /* (out_hidden_size, M) */
    const float *merger_fc2_b;   /* (out_hidden_size) */
    float *inv_h, *inv_w;        /* (head_dim / 2) each: the 2-D rotary frequencies, see rope_2d() */
    sp_weights held;             /* the vector block behind every f32 vector above, bytes held */
} vision_weights;

struct sp_qwen35_vision {
    vision_config cfg;
    vision_weights w;
    sp_backend be;               /* CPU, over the model's pool */
    splash_status op_status;
    const sp_checkpoint *ck;     /* the target's (sp_qwen35_vision_load): the matrices are views of its maps */
};

/* ---- scratch (per encode call, N = t·h·w patches) -------------------------------------------------------------- */

typedef struct vision_scratch {
    int32_t *pos_h, *pos_w;      /* (N) each patch's row and column in its frame */
    float *x;                    /* (N, D) residual stream */
    float *xb;                   /* (N, D) normed input of the current block; the merger's (N/4, 4·D) view */
    float *qkv;                  /* (N, 3·D) */
    float *q, *k, *v, *att;      /* (N, heads, hd) */
    float *h;                    /* (N, max(I, D)) MLP hidden; the merger's (N/4, 4·D) */
    float *out;                  /* (N, D) block output before the residual add */
} vision_scratch;

/* Lays the scratch out at `base` (NULL: only measures); returns its size in bytes. */
static uint64_t scratch_layout(const vision_config *c, int64_t N, uint8_t *base, vision_scratch *s) {
    sp_scratch at = {base, 0};
#define TAKE(field, type, count) SP_TAKE(&at, s->field, type, count)
    int64_t D = c->hidden_size, I = c->intermediate_size > D ? c->intermediate_size : D;
    TAKE(pos_h, int32_t, N);
    TAKE(pos_w, int32_t, N);
    TAKE(x, float, N * D);
    TAKE(xb, float, N * D);
    TAKE(qkv, float, N * 3 * D);
    TAKE(q, float, N * D);
    TAKE(k, float, N * D);
    TAKE(v, float, N * D);
    TAKE(att, float, N * D);
    TAKE(h, float, N * I);
    TAKE(out, float, N * D);
#undef TAKE
    return at.off;
}

/* ---- config parsing ----------------------------------------------------------------------------------------- */

static splash_status parse_config(const sp_checkpoint *ck, const sp_json *vc, vision_config *c) {
    const char *dir = sp_checkpoint_dir(ck);
    const sp_json *root = sp_checkpoint_config(ck);
    splash_status st;
#define INT(field, dflt) if ((st = sp_config_int(vc, dir, "vision_config", #field, 0, dflt, &c->field))) return st
    INT(depth, -1);
    INT(hidden_size, -1);
    INT(num_heads, -1);
    INT(intermediate_size, -1);
    INT(in_channels, 3);
    INT(patch_size, 16);
    INT(temporal_patch_size, 2);
    INT(spatial_merge_size, 2);
    INT(num_position_embeddings, -1);
    INT(out_hidden_size, -1);
#undef INT
#define TOP(field, dflt) if ((st = sp_config_int(root, dir, "config", #field, 0, dflt, &c->field))) return st
    TOP(image_token_id, 248056);
    TOP(video_token_id, 248057);
    TOP(vision_start_token_id, 248053);
    TOP(vision_end_token_id, 248054);
#undef TOP
    double theta = 10000.0;
    sp_json_double(sp_json_get(sp_json_get(vc, "rope_parameters"), "rope_theta"), &theta);
    c->rope_theta = (float)theta;
    /* what this tower does not compute is refused, never run without it */
    const char *act = sp_json_string(sp_json_get(vc, "hidden_act"));
    if (act && strcmp(act, "gelu_pytorch_tanh"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: vision_config.hidden_act \"%s\" is not supported "
                       "(gelu_pytorch_tanh)", dir, act);
    const sp_json *deep = sp_json_get(vc, "deepstack_visual_indexes");
    if (deep && deep->type == SP_JSON_ARRAY && deep->len > 0)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: vision_config.deepstack_visual_indexes is not empty "
                       "(Qwen3-VL deepstack is not a Qwen3.5 feature)", dir);
    const char *rope = sp_json_string(sp_json_get(sp_json_get(vc, "rope_parameters"), "rope_type"));
    if (rope && strcmp(rope, "axial"))
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: vision_config rope_type \"%s\" (axial)", dir, rope);
    c->num_grid_per_side = (int32_t)lround(sqrt((double)c->num_position_embeddings));
    const char *bad = NULL;
    if (c->depth < 1 || c->depth > MAX_DEPTH) bad = "depth";
    else if (c->num_heads < 1 || c->hidden_size % c->num_heads || (c->hidden_size / c->num_heads) % 4)
        bad = "hidden_size must split into num_heads heads of a multiple of 4 dims";
    else if (c->hidden_size / c->num_heads > 1024) bad = "head_dim (≤ 1024)";
    else if (c->intermediate_size < 1 || c->out_hidden_size < 1 || c->in_channels < 1 || c->patch_size < 1 ||
             c->temporal_patch_size < 1 || c->spatial_merge_size < 1)
        bad = "sizes must be ≥ 1";
    else if (c->num_grid_per_side < 1 || c->num_grid_per_side * c->num_grid_per_side != c->num_position_embeddings)
        bad = "num_position_embeddings must be a square";
    if (bad) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s/config.json: unsupported vision_config: %s", dir, bad);
    c->head_dim = c->hidden_size / c->num_heads;
    c->patch_dim = c->in_channels * c->temporal_patch_size * c->patch_size * c->patch_size;
    return SPLASH_OK;
}

/* ---- loading ------------------------------------------------------------------------------------------------ */

/* The tower's tensor printed from fmt and i, after "model.visual.". */
static const char *tname(sp_loader *L, const char *fmt, int32_t i) {
    char mid[160];
    snprintf(mid, sizeof mid, fmt, i);
    return sp_load_name(L, "model.visual.%s", mid);
}

static int64_t vector_floats(const vision_config *c) {
    int64_t D = c->hidden_size, I = c->intermediate_size, M = (int64_t)c->spatial_merge_size * c->spatial_merge_size * D;
    return D + (int64_t)c->num_position_embeddings * D + (int64_t)c->depth * (4 * D + 3 * D + D + I + D) + 2 * D + M +
           c->out_hidden_size + c->head_dim;
}

/* Checkpoint quirks, each from the spec: the Conv3d kernel [D, C, T, P, P] is one row of C·T·P·P weights per output
 * channel, in the same (channel, temporal, y, x) order as a processor row, so the patch embedding is a matmul. */
static splash_status load_weights(sp_qwen35_vision *v) {
    const vision_config *c = &v->cfg;
    int64_t D = c->hidden_size, I = c->intermediate_size, P = c->patch_size;
    int64_t M = (int64_t)c->spatial_merge_size * c->spatial_merge_size * D; /* one merge window's rows side by side */
    splash_status st = sp_weights_alloc(&v->w.held, v->ck, vector_floats(c));
    if (st) return st;
    v->w.blocks = calloc((size_t)c->depth, sizeof(vision_block));
    if (!v->w.blocks) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the vision tower");
    sp_loader loader = {.ck = v->ck, .w = &v->w.held}, *L = &loader; /* f32 compute: every matrix as stored */
    if ((st = sp_load_matrix_nd(L, tname(L, "patch_embed.proj.weight", 0), 5,
                                (int64_t[]){D, c->in_channels, c->temporal_patch_size, P, P}, SPLASH_KIND_VISION, &v->w.patch_embed)))
        return st;
    v->w.patch_embed.rows = D;
    v->w.patch_embed.cols = c->patch_dim;
    v->w.patch_embed.row_bytes = sp_mtype_row_bytes(v->w.patch_embed.type, c->patch_dim);
#define VEC(field, fmt, i, n) if ((st = sp_load_vector(L, tname(L, fmt, i), SPLASH_KIND_VISION, n, 1, (int64_t[]){n}, 0.0f, &field))) return st
#define MAT(field, fmt, i, r, cols) if ((st = sp_load_matrix(L, tname(L, fmt, i), r, cols, SPLASH_KIND_VISION, &field))) return st
    VEC(v->w.patch_b, "patch_embed.proj.bias", 0, D);
    const float *pos;
    if ((st = sp_load_vector(L, tname(L, "pos_embed.weight", 0), SPLASH_KIND_VISION, c->num_position_embeddings * D, 2,
                             (int64_t[]){c->num_position_embeddings, D}, 0.0f, &pos)))
        return st;
    v->w.pos_embed = (float *)pos;
    for (int32_t b = 0; b < c->depth; b++) {
        vision_block *y = &v->w.blocks[b];
        VEC(y->norm1_w, "blocks.%d.norm1.weight", b, D);
        VEC(y->norm1_b, "blocks.%d.norm1.bias", b, D);
        VEC(y->norm2_w, "blocks.%d.norm2.weight", b, D);
        VEC(y->norm2_b, "blocks.%d.norm2.bias", b, D);
        MAT(y->qkv, "blocks.%d.attn.qkv.weight", b, 3 * D, D);
        VEC(y->qkv_b, "blocks.%d.attn.qkv.bias", b, 3 * D);
        MAT(y->proj, "blocks.%d.attn.proj.weight", b, D, D);
        VEC(y->proj_b, "blocks.%d.attn.proj.bias", b, D);
        MAT(y->fc1, "blocks.%d.mlp.linear_fc1.weight", b, I, D);
        VEC(y->fc1_b, "blocks.%d.mlp.linear_fc1.bias", b, I);
        MAT(y->fc2, "blocks.%d.mlp.linear_fc2.weight", b, D, I);
        VEC(y->fc2_b, "blocks.%d.mlp.linear_fc2.bias", b, D);
    }
    VEC(v->w.merger_norm_w, "merger.norm.weight", 0, D);
    VEC(v->w.merger_norm_b, "merger.norm.bias", 0, D);
    MAT(v->w.merger_fc1, "merger.linear_fc1.weight", 0, M, M);
    VEC(v->w.merger_fc1_b, "merger.linear_fc1.bias", 0, M);
    MAT(v->w.merger_fc2, "merger.linear_fc2.weight", 0, c->out_hidden_size, M);
    VEC(v->w.merger_fc2_b, "merger.linear_fc2.bias", 0, c->out_hidden_size);
#undef VEC
#undef MAT
    /* 2-D rotary (HF Qwen3_5VisionRotaryEmbedding, axial): q = head_dim/4 frequencies 1/θ^(2i/(head_dim/2)); the
     * rotated half is [q frequencies × row | q frequencies × column], NeoX pairs (i, i + head_dim/2) over the whole
     * head. As two 1-D rotations: the rows' angles with the column frequencies zeroed, then the columns' with the
     * row frequencies zeroed (a zero angle is an exact identity). */
    int32_t half = c->head_dim / 2, q = c->head_dim / 4;
    if ((st = sp_load_floats(L, 2 * half, &v->w.inv_h))) return st;
    v->w.inv_w = v->w.inv_h + half;
    for (int32_t i = 0; i < half; i++) v->w.inv_h[i] = v->w.inv_w[i] = 0.0f;
    for (int32_t i = 0; i < q; i++)
        v->w.inv_h[i] = v->w.inv_w[q + i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)half);
    return SPLASH_OK;
}

splash_status sp_qwen35_vision_load(const sp_checkpoint *ck, sp_threadpool *pool, int n_threads, sp_qwen35_vision **out) {
    *out = NULL;
    sp_qwen35_vision *v = calloc(1, sizeof *v);
    if (!v) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    v->ck = ck;
    splash_status st = SPLASH_OK;
    const sp_json *vc = sp_json_get(sp_checkpoint_config(v->ck), "vision_config");
    /* no tower: a text-only checkpoint, or one whose converter dropped model.visual.* (mlx-lm) */
    if (!st && (!vc || !sp_checkpoint_find(v->ck, "model.visual.patch_embed.proj.weight"))) {
        sp_qwen35_vision_free(v);
        return SPLASH_OK;
    }
    if (!st) st = parse_config(v->ck, vc, &v->cfg);
    if (!st) st = load_weights(v);
    if (st) {
        sp_qwen35_vision_free(v);
        return st;
    }
    sp_cpu_backend_init(&v->be, pool, n_threads, &v->op_status);
    *out = v;
    return SPLASH_OK;
}

void sp_qwen35_vision_free(sp_qwen35_vision *v) {
    if (!v) return;
    sp_weights_free(&v->w.held);
    free(v->w.blocks);
    free(v);
}

void sp_qwen35_vision_info(const sp_qwen35_vision *v, splash_vision_info *out) {
    const vision_config *c = &v->cfg;
    *out = (splash_vision_info){
        .struct_size = sizeof *out,
        .depth = c->depth,
        .hidden_size = c->hidden_size,
        .out_hidden_size = c->out_hidden_size,
        .in_channels = c->in_channels,
        .patch_size = c->patch_size,
        .temporal_patch_size = c->temporal_patch_size,
        .spatial_merge_size = c->spatial_merge_size,
        .image_token_id = c->image_token_id,
        .video_token_id = c->video_token_id,
        .vision_start_token_id = c->vision_start_token_id,
        .vision_end_token_id = c->vision_end_token_id,
        .weight_bytes = v->w.held.bytes,
    };
}

/* ---- forward ------------------------------------------------------------------------------------------------ */

/* Each patch's (row, column) in its frame, in merge-window order (HF get_vision_position_ids): patch i of a frame is
 * window i / m², and inside the window row (i / m) % m, column i % m; windows run row-major over (h/m, w/m). */
static void patch_coords(const vision_config *c, int32_t t, int32_t h, int32_t w, int32_t *pos_h, int32_t *pos_w) {
    int32_t m = c->spatial_merge_size, blocks_w = w / m;
    for (int64_t f = 0, i = 0; f < t; f++)
        for (int64_t j = 0; j < (int64_t)h * w; j++, i++) {
            int64_t win = j / (m * m);
            pos_h[i] = (int32_t)((win / blocks_w) * m + (j / m) % m);
            pos_w[i] = (int32_t)((win % blocks_w) * m + j % m);
        }
}

/* One axis of the learned grid's bilinear resampling (F.interpolate, align_corners=True), in fp32 as HF computes it:
 * src = i·(side − 1) / max(size − 1, 1); taps floor(src) and floor(src) + 1 (clamped), weights 1 − |src − tap|. */
static void axis_taps(int32_t i, int32_t size, int32_t side, int32_t tap[2], float wt[2]) {
    float src = (float)i * (float)(side - 1) / (float)(size - 1 > 1 ? size - 1 : 1);
    float fl = floorf(src);
    for (int32_t o = 0; o < 2; o++) {
        int32_t raw = (int32_t)fl + o;
        tap[o] = raw < 0 ? 0 : raw > side - 1 ? side - 1 : raw;
        float d = fabsf(src - fl - (float)o);
        wt[o] = 1.0f - d > 0.0f ? 1.0f - d : 0.0f;
    }
}

/* x[i] += Σ over 4 taps of weight · pos_embed[tap] (HF: (pos_embed(indices) · weights).sum(1), then added). */
static void add_position_embeddings(const sp_qwen35_vision *v, float *x, const int32_t *pos_h, const int32_t *pos_w,
                                    int64_t N, int32_t h, int32_t w) {
    const vision_config *c = &v->cfg;
    int64_t D = c->hidden_size;
    int32_t side = c->num_grid_per_side;
    for (int64_t i = 0; i < N; i++) {
        int32_t th[2], tw[2];
        float wh[2], ww[2];
        axis_taps(pos_h[i], h, side, th, wh);
        axis_taps(pos_w[i], w, side, tw, ww);
        const float *e[4];
        float wt[4];
        for (int32_t a = 0; a < 2; a++)
            for (int32_t b = 0; b < 2; b++) {
                e[a * 2 + b] = v->w.pos_embed + ((int64_t)th[a] * side + tw[b]) * D;
                wt[a * 2 + b] = wh[a] * ww[b];
            }
        for (int64_t d = 0; d < D; d++)
            x[i * D + d] += ((e[0][d] * wt[0] + e[1][d] * wt[1]) + e[2][d] * wt[2]) + e[3][d] * wt[3];
    }
}

/* Linear layer with bias: y[n][W.rows] = x · Wᵀ + b */
static void linear(const sp_backend *be, float *y, const sp_matrix *W, const float *b, const float *x, int64_t n) {
    be->matmul(be, y, W, x, n);
    be->add_rows(be, y, b, n, W->rows);
}

/* x = x + proj(attention(rope2d(qkv(LN1(x))))), bidirectional within each frame of hw patches. */
static void attention_block(const sp_qwen35_vision *v, const vision_block *y, vision_scratch *s, int64_t N, int64_t hw) {
    const sp_backend *be = &v->be;
    const vision_config *c = &v->cfg;
    int64_t D = c->hidden_size, hd = c->head_dim;
    int32_t H = c->num_heads;
    be->layernorm(be, s->xb, s->x, y->norm1_w, y->norm1_b, N, D, 1e-6f);
    linear(be, s->qkv, &y->qkv, y->qkv_b, s->xb, N);
    be->copy_rows(be, s->q, D, s->qkv, 3 * D, N, D); /* row = [q | k | v], each (heads, hd) */
    be->copy_rows(be, s->k, D, s->qkv + D, 3 * D, N, D);
    be->copy_rows(be, s->v, D, s->qkv + 2 * D, 3 * D, N, D);
    float *qk[2] = {s->q, s->k};
    for (int32_t j = 0; j < 2; j++) { /* rope2d = the rows' rotation, then the columns' */
        be->rope(be, qk[j], N, H, (int32_t)hd, (int32_t)hd, s->pos_h, NULL, v->w.inv_h);
        be->rope(be, qk[j], N, H, (int32_t)hd, (int32_t)hd, s->pos_w, NULL, v->w.inv_w);
    }
    float scale = (float)pow((double)hd, -0.5);
    for (int64_t r0 = 0; r0 < N; r0 += hw) {
        sp_attn_ext x = {.n_rows = (int32_t)hw, .k_blk = s->k + r0 * D, .v_blk = s->v + r0 * D, .blk_causal = 0};
        be->attention_ext(be, s->att + r0 * D, s->q + r0 * D, H, H, (int32_t)hd, scale, &x);
    }
    linear(be, s->out, &y->proj, y->proj_b, s->att, N);
    be->add(be, s->x, s->out, N * D);
}

/* x = x + fc2(gelu_tanh(fc1(LN2(x)))) */
static void mlp_block(const sp_qwen35_vision *v, const vision_block *y, vision_scratch *s, int64_t N) {
    const sp_backend *be = &v->be;
    int64_t D = v->cfg.hidden_size;
    be->layernorm(be, s->xb, s->x, y->norm2_w, y->norm2_b, N, D, 1e-6f);
    linear(be, s->h, &y->fc1, y->fc1_b, s->xb, N);
    be->gelu(be, s->h, s->h, N * y->fc1.rows, 1);
    linear(be, s->out, &y->fc2, y->fc2_b, s->h, N);
    be->add(be, s->x, s->out, N * D);
}

splash_status sp_qwen35_vision_encode(sp_qwen35_vision *v, const float *pixels, int32_t grid_t, int32_t grid_h,
                                      int32_t grid_w, float *blocks, float *out) {
    const vision_config *c = &v->cfg;
    const sp_backend *be = &v->be;
    int64_t N = (int64_t)grid_t * grid_h * grid_w, D = c->hidden_size, hw = (int64_t)grid_h * grid_w;
    int64_t units = (int64_t)c->spatial_merge_size * c->spatial_merge_size;
    vision_scratch s;
    uint64_t bytes = scratch_layout(c, N, NULL, &s);
    void *mem = be->alloc(be, bytes);
    if (!mem) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %llu bytes of vision activations (%lld patches)",
                             (unsigned long long)bytes, (long long)N);
    scratch_layout(c, N, mem, &s);
    v->op_status = SPLASH_OK;
    patch_coords(c, grid_t, grid_h, grid_w, s.pos_h, s.pos_w);
    linear(be, s.x, &v->w.patch_embed, v->w.patch_b, pixels, N);          /* Conv3d, kernel = stride = patch */
    add_position_embeddings(v, s.x, s.pos_h, s.pos_w, N, grid_h, grid_w);
    for (int32_t b = 0; b < c->depth; b++) {
        attention_block(v, &v->w.blocks[b], &s, N, hw);
        mlp_block(v, &v->w.blocks[b], &s, N);
    }
    if (blocks) memcpy(blocks, s.x, sizeof(float) * (size_t)(N * D));
    /* merger: LN per patch, then each merge window's rows side by side: (N / m², m²·D) */
    be->layernorm(be, s.xb, s.x, v->w.merger_norm_w, v->w.merger_norm_b, N, D, 1e-6f);
    linear(be, s.h, &v->w.merger_fc1, v->w.merger_fc1_b, s.xb, N / units);
    be->gelu(be, s.h, s.h, (N / units) * v->w.merger_fc1.rows, 0);
    linear(be, out, &v->w.merger_fc2, v->w.merger_fc2_b, s.h, N / units);
    be->free(be, mem);
    return v->op_status;
}
