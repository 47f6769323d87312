/* ops_moe.c — a mixture-of-experts layer on a GPU after its router, the expert ids staying on the device, one of two ways.
 *  - Few tokens (decode, ≤ SP_GPU_GEMV_MAX_N), by pair, in two dispatches: the routing and gate·up of every routed
 *    (token, expert) pair and of each token's shared expert (matmul.comp MODE 4: each workgroup routes its token from
 *    the logits), then per token down, the weighted sum in ascending expert order and the shared expert under its
 *    sigmoid gate (MODE 5). Q4/Q8 experts take the integer-dot GEMV where the device has it (x quantized once, as the
 *    dense projections share it; h quantized inside the down kernel), so the results are the CPU's up to the order of
 *    f32 sums.
 *  - More tokens (prefill): routing (moe.comp ROUTE), then over tiles of pairs grouped by expert so each expert's rows
 *    are read once per tile, four dispatches (plan, gate·up, down, combine; moe.comp, matmul.comp MODE 1, 2), Q4/Q8 on
 *    the integer-dot GEMV there too (x and h quantized by quantize.comp).
 * A shared expert of another type or width than the routed ones runs through the backend's own ops afterwards. */
#include "gpu.h"

#include "core/error.h"

#include <stdlib.h>

enum {
    MOE_TILE = 4,        /* pairs per tile of the planned path (matmul.comp NMAX of its variants) */
    MOE_HQ_WORDS = 4096, /* matmul.comp HQ_WORDS: the quantized h rows MODE 5 holds at once, at least one */
};

/* The planned path's expert GEMV kernels (tiles of up to MOE_TILE pairs) by weight type; the integer-dot ones by
 * [weights are Q4]. */
static const sp_gpu_kernel_id GATE_UP[SP_MAT_TYPE_COUNT] = SP_GPU_BY_TYPE(SP_GPU_MOE_GATE_UP4);
static const sp_gpu_kernel_id DOWN[SP_MAT_TYPE_COUNT] = SP_GPU_BY_TYPE(SP_GPU_MOE_DOWN4);
static const sp_gpu_kernel_id GATE_UP_DOT[2] = {SP_GPU_MOE_GATE_UP_DOT4_Q8, SP_GPU_MOE_GATE_UP_DOT4_Q4};
static const sp_gpu_kernel_id DOWN_DOT[2] = {SP_GPU_MOE_DOWN_DOT4_Q8, SP_GPU_MOE_DOWN_DOT4_Q4};
/* The by-pair kernels by weight type; the integer-dot ones by [weights are Q4]. */
static const sp_gpu_kernel_id PAIR_GATE_UP[SP_MAT_TYPE_COUNT] = SP_GPU_BY_TYPE(SP_GPU_MOE_PAIR_GATE_UP);
static const sp_gpu_kernel_id PAIR_DOWN[SP_MAT_TYPE_COUNT] = SP_GPU_BY_TYPE(SP_GPU_MOE_PAIR_DOWN);
static const sp_gpu_kernel_id PAIR_GATE_UP_DOT[2] = {SP_GPU_MOE_PAIR_GATE_UP_DOT_Q8, SP_GPU_MOE_PAIR_GATE_UP_DOT_Q4};
static const sp_gpu_kernel_id PAIR_DOWN_DOT[2] = {SP_GPU_MOE_PAIR_DOWN_DOT_Q8, SP_GPU_MOE_PAIR_DOWN_DOT_Q4};

typedef struct {
    uint64_t ids, w, src, dst, plan;
    uint32_t n, n_experts, top_k, d, down_blocks, max_tiles, tile;
} moe_push;

/* matmul.comp MODE 4 and 5's push constants: the GEMV's, then the routing (ids, weights) and the shared expert's gate
 * logits. */
typedef struct {
    sp_gpu_mm_push mm;
    uint64_t ids, weights, score;
} moe_pair_push;

static void route(sp_gpu *gpu, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts, int32_t top_k) {
    sp_gpu_range r = sp_gpu_span(gpu, logits, (uint64_t)n * (uint64_t)n_experts * 4);
    sp_gpu_range wr[2] = {sp_gpu_span(gpu, ids, (uint64_t)n * (uint64_t)top_k * 4), sp_gpu_span(gpu, w, (uint64_t)n * (uint64_t)top_k * 4)};
    moe_push p = {wr[0].lo, wr[1].lo, r.lo, 0, 0, (uint32_t)n, (uint32_t)n_experts, (uint32_t)top_k, 0, 0, 0, 0};
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_route", SP_GPU_MOE_ROUTE, (uint32_t[4]){n_experts >= 256 ? 256 : 64, 0, 0, 0}, &p, sizeof p, groups,
                    &r, 1, wr, 2, NULL);
}

/* The device table of an expert set's row-0 addresses, [E + 1][gate, up, down], made on first use and kept; keyed by
 * the views and what they view (a freed set's views may come back at the same address), and by the shared expert. */
static const sp_gpu_expert_table *expert_table(sp_gpu *gpu, const sp_backend *be, const sp_moe_experts *ex) {
    const void *shared = ex->shared_gate ? ex->shared_gate->data : NULL;
    int32_t i = 0;
    while (i < gpu->n_expert_tables &&
           (gpu->expert_tables[i].key != ex->gate || gpu->expert_tables[i].first != ex->gate[0].data ||
            gpu->expert_tables[i].n_experts != ex->n_experts || gpu->expert_tables[i].shared != shared))
        i++;
    if (i < gpu->n_expert_tables) return &gpu->expert_tables[i];
    if (i == SP_GPU_MAX_EXPERT_TABLES) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "too many MoE layers"), NULL;
    uint64_t bytes = sizeof(uint64_t) * 3 * ((uint64_t)ex->n_experts + 1);
    uint64_t *host = calloc(3 * ((size_t)ex->n_experts + 1), sizeof(uint64_t));
    uint64_t *dev = sp_gpu_alloc(be, bytes);
    if (!host || !dev) {
        free(host);
        return sp_gpu_fail_msg(gpu, SPLASH_ERR_OUT_OF_MEMORY, "MoE expert table"), NULL;
    }
    uint32_t strides[3] = {0, 0, 0};
    for (int32_t e = 0; e < ex->n_experts; e++) {
        const sp_matrix *m[3] = {&ex->gate[e], &ex->up[e], &ex->down[e]};
        for (int j = 0; j < 3; j++) {
            if (!sp_gpu_weights(gpu, m[j], &host[3 * e + j], &strides[j]) || m[j]->type != ex->gate[0].type) {
                free(host);
                return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE experts of mixed weight types"), NULL;
            }
        }
    }
    /* the shared expert joins the table where the routed experts' kernels and launches fit it */
    bool has_shared = ex->shared_gate && ex->shared_gate->rows == ex->inter;
    if (has_shared) {
        const sp_matrix *m[3] = {ex->shared_gate, ex->shared_up, ex->shared_down};
        for (int j = 0; j < 3 && has_shared; j++) {
            uint32_t s;
            has_shared = m[j]->type == ex->gate[0].type && m[j]->rows == (j == 2 ? ex->hidden : ex->inter) &&
                         m[j]->cols == (j == 2 ? ex->inter : ex->hidden) &&
                         sp_gpu_weights(gpu, m[j], &host[3 * (size_t)ex->n_experts + j], &s) && s == strides[j];
        }
        if (!has_shared) host[3 * (size_t)ex->n_experts] = host[3 * (size_t)ex->n_experts + 1] = host[3 * (size_t)ex->n_experts + 2] = 0;
    }
    sp_gpu_write(be, dev, host, bytes);
    free(host);
    gpu->expert_tables[i] = (sp_gpu_expert_table){ex->gate, ex->gate[0].data, shared, ex->n_experts, dev, strides[0], strides[2], has_shared};
    gpu->n_expert_tables++;
    return &gpu->expert_tables[i];
}

/* A chunk's whole device range (weight rows padded). */
static sp_gpu_range chunk_range(const sp_gpu_chunk *c) {
    uint64_t lo = c->buf.addr + c->offset;
    return (sp_gpu_range){lo, lo + (c->host_row ? c->size / (uint64_t)c->host_row * (uint64_t)c->dev_row : c->size)};
}

/* What the expert kernels may read of the weights: the chunks holding gate (and up) or down of every expert, and the
 * shared expert's matrices where the table holds them. */
static int32_t weight_ranges(sp_gpu *gpu, const sp_moe_experts *ex, const sp_gpu_expert_table *t, bool down, sp_gpu_range *out) {
    int32_t n = 0;
    const sp_gpu_chunk *c = sp_gpu_chunk_of(gpu, down ? ex->down[0].data : ex->gate[0].data);
    if (c) out[n++] = chunk_range(c);
    if (!down && (c = sp_gpu_chunk_of(gpu, ex->up[0].data))) out[n++] = chunk_range(c);
    if (t->has_shared)
        for (int j = down ? 2 : 0; j < (down ? 3 : 2); j++) {
            const sp_matrix *m = j == 0 ? ex->shared_gate : j == 1 ? ex->shared_up : ex->shared_down;
            if ((c = sp_gpu_chunk_of(gpu, m->data))) out[n++] = chunk_range(c);
        }
    return n;
}

/* The expert GEMV launches: the tuned ones of an expert's gate and down (bucket b), gate's rows capped for two
 * matrices (gate and up together). */
static bool expert_launches(sp_gpu *gpu, const sp_moe_experts *ex, int b, sp_gpu_mm_launch *lg, sp_gpu_mm_launch *ld) {
    *lg = sp_gpu_gemv_params(gpu, &ex->gate[0], b), *ld = sp_gpu_gemv_params(gpu, &ex->down[0], b);
    uint32_t max_gu = (uint32_t)sp_gpu_gemv_max_rows(b, 2);
    lg->rows = lg->rows > max_gu ? max_gu : lg->rows;
    if (sp_gpu_gemv_launch_ok(lg, (int)max_gu) && sp_gpu_gemv_launch_ok(ld, sp_gpu_gemv_max_rows(b, 1))) return true;
    return sp_gpu_fail_msg(gpu, SPLASH_ERR_INVALID_ARGUMENT, "an expert GEMV launch the kernel cannot take");
}

/* Few tokens: every pair's routing and gate·up (MODE 4), then each token's down and sum (MODE 5). */
static void experts_by_pair(const sp_backend *be, float *y, int32_t *ids, float *w, const float *logits, const float *x, int64_t n,
                            const sp_moe_experts *ex, const sp_gpu_expert_table *t, float *scratch) {
    sp_gpu *gpu = sp_gpu_of(be);
    sp_mtype type = ex->gate[0].type;
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, routed = (uint64_t)n * K;
    uint64_t pairs = routed + (t->has_shared ? (uint64_t)n : 0), nbp = (I + 31) / 32 + 1;
    nbp -= nbp % 2;
    /* scratch: h [pairs][I], then the shared expert's gate logits [n] */
    float *h = scratch, *score = h + pairs * I;
    sp_gpu_mm_launch lg, ld;
    if (!expert_launches(gpu, ex, 0, &lg, &ld)) return;
    bool dot = !gpu->no_int_dot && (type == SP_MAT_Q4 || type == SP_MAT_Q8) && nbp * 10 <= MOE_HQ_WORDS;
    if (t->has_shared) be->matmul(be, score, ex->shared_score, x, n);
    sp_gpu_range rtab = sp_gpu_span(gpu, t->table, 24 * ((uint64_t)ex->n_experts + 1)), rx = sp_gpu_span(gpu, x, (uint64_t)n * H * 4),
                 rids = sp_gpu_span(gpu, ids, routed * 4), rw = sp_gpu_span(gpu, w, routed * 4), rh = sp_gpu_span(gpu, h, pairs * I * 4),
                 rs = sp_gpu_span(gpu, score, (uint64_t)n * 4), ry = sp_gpu_span(gpu, y, (uint64_t)n * H * 4),
                 rlog = sp_gpu_span(gpu, logits, (uint64_t)n * (uint64_t)ex->n_experts * 4);
    if (rx.lo % 16 || rh.lo % 16) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE experts need 16-byte aligned x and scratch");
        return;
    }
    moe_pair_push gp = {{rtab.lo, rx.lo, rh.lo, rlog.lo, t->gate_stride, (uint32_t)I, (uint32_t)H, (uint32_t)n, (uint32_t)H,
                          (uint32_t)I, (uint32_t)K, (uint32_t)ex->n_experts},
                         rids.lo, rw.lo, 0};
    uint32_t check = H % (uint64_t)sp_gpu_chunk_cols[type] != 0;
    sp_gpu_kernel_id k = PAIR_GATE_UP[type];
    if (dot) {
        if (!sp_gpu_quantized_x(be, rx.lo, (int64_t)H, n, &rx, &gp.mm.x_stride)) return;
        gp.mm.x = rx.lo, check = 0, k = PAIR_GATE_UP_DOT[type == SP_MAT_Q4];
    }
    sp_gpu_range reads[8] = {rtab, rx, rlog}, writes[3] = {rh, rids, rw};
    int32_t nr = 3 + weight_ranges(gpu, ex, t, false, reads + 3);
    uint32_t groups[3] = {(uint32_t)pairs, sp_gpu_div_up(I, (uint64_t)lg.rows * lg.groups), 1};
    sp_gpu_dispatch(gpu, "moe_pair_gate_up", k, (uint32_t[4]){lg.workgroup, lg.rows, check, lg.groups}, &gp, sizeof gp, groups, reads,
                    nr, writes, 3, NULL);

    moe_pair_push dp = {{rtab.lo, rh.lo, ry.lo, 0, t->down_stride, (uint32_t)H, (uint32_t)I, (uint32_t)n, (uint32_t)I, (uint32_t)H,
                          (uint32_t)K, (uint32_t)ex->n_experts},
                         rids.lo, rw.lo, t->has_shared ? rs.lo : 0};
    check = !dot && I % (uint64_t)sp_gpu_chunk_cols[type] != 0;
    sp_gpu_range dreads[8] = {rtab, rh, rids, rw, rs};
    nr = 5 + weight_ranges(gpu, ex, t, true, dreads + 5);
    groups[0] = (uint32_t)n, groups[1] = sp_gpu_div_up(H, (uint64_t)ld.rows * ld.groups);
    sp_gpu_dispatch(gpu, "moe_pair_down", dot ? PAIR_DOWN_DOT[type == SP_MAT_Q4] : PAIR_DOWN[type],
                    (uint32_t[4]){ld.workgroup, ld.rows, check, ld.groups}, &dp, sizeof dp, groups, dreads, nr, &ry, 1, NULL);
}

/* More tokens: the plan, then gate·up and down over its tiles (indirect dispatches), then the weighted sums. */
static void experts_planned(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                            const sp_moe_experts *ex, const sp_gpu_expert_table *t, float *scratch) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, pairs = (uint64_t)n * K;
    uint64_t max_tiles = sp_gpu_div_up(pairs, MOE_TILE) + (pairs < (uint64_t)ex->n_experts ? pairs : (uint64_t)ex->n_experts);
    /* scratch: h [pairs][I], yo [pairs][H], then the plan (ints) */
    float *h = scratch, *yo = h + pairs * I;
    int32_t *plan = (int32_t *)(yo + pairs * H);
    if (8 + 3 * max_tiles + pairs > pairs * (H + I + 1)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE scratch too small for the expert plan");
        return;
    }
    sp_gpu_mm_launch lg, ld;
    if (!expert_launches(gpu, ex, 1, &lg, &ld)) return;
    uint32_t up_blocks = sp_gpu_div_up(I, (uint64_t)lg.rows * lg.groups), down_blocks = sp_gpu_div_up(H, (uint64_t)ld.rows * ld.groups);
    sp_mtype type = ex->gate[0].type;
    bool dot = !gpu->no_int_dot && (type == SP_MAT_Q4 || type == SP_MAT_Q8);
    sp_gpu_kernel_id gate_up = dot ? GATE_UP_DOT[type == SP_MAT_Q4] : GATE_UP[type], down = dot ? DOWN_DOT[type == SP_MAT_Q4] : DOWN[type];
    uint32_t check_gu = !dot && ex->hidden % sp_gpu_chunk_cols[type] != 0, check_d = !dot && ex->inter % sp_gpu_chunk_cols[type] != 0;
    sp_gpu_range rx = sp_gpu_span(gpu, x, (uint64_t)n * H * 4), rids = sp_gpu_span(gpu, ids, pairs * 4),
                 rw = sp_gpu_span(gpu, w, pairs * 4), rh = sp_gpu_span(gpu, h, pairs * I * 4), ryo = sp_gpu_span(gpu, yo, pairs * H * 4),
                 rplan = sp_gpu_span(gpu, plan, (8 + 3 * max_tiles + pairs) * 4),
                 rtab = sp_gpu_span(gpu, t->table, 24 * ((uint64_t)ex->n_experts + 1)), ry = sp_gpu_span(gpu, y, (uint64_t)n * H * 4);

    moe_push mp = {rids.lo, rw.lo, ryo.lo, ry.lo, rplan.lo, (uint32_t)n, (uint32_t)ex->n_experts, (uint32_t)K, up_blocks,
                   down_blocks, (uint32_t)max_tiles, MOE_TILE};
    sp_gpu_dispatch(gpu, "moe_plan", SP_GPU_MOE_PLAN, (uint32_t[4]){256, 0, 0, 0}, &mp, sizeof mp, (uint32_t[3]){1, 1, 1}, &rids,
                    1, &rplan, 1, NULL);
    sp_gpu_mm_push gp = {rtab.lo, rx.lo, rh.lo, rplan.lo + 32, t->gate_stride, (uint32_t)I, (uint32_t)H, 0, (uint32_t)H, 0, (uint32_t)K,
                         (uint32_t)(3 * max_tiles)};
    /* integer dot products: x quantized for gate·up, then h for down (quantize.comp), the CPU's numerics */
    if (dot && !sp_gpu_quantized_x(be, rx.lo, (int64_t)H, n, &rx, &gp.x_stride)) return;
    gp.x = rx.lo;
    sp_gpu_range gr[8] = {rtab, rx, rplan};
    int32_t nr = 3 + weight_ranges(gpu, ex, t, false, gr + 3);
    sp_gpu_dispatch(gpu, "moe_gate_up", gate_up, (uint32_t[4]){lg.workgroup, lg.rows, check_gu, lg.groups}, &gp, sizeof gp, NULL, gr,
                    nr, &rh, 1, plan);
    sp_gpu_mm_push dp = {rtab.lo, rh.lo, ryo.lo, rplan.lo + 32, t->down_stride, (uint32_t)H, (uint32_t)I, 0, (uint32_t)I, 0, (uint32_t)K,
                         (uint32_t)(3 * max_tiles)};
    if (dot && !sp_gpu_quantized_x(be, rh.lo, (int64_t)I, (int64_t)pairs, &rh, &dp.x_stride)) return;
    dp.x = rh.lo;
    sp_gpu_range dr[8] = {rtab, rh, rplan};
    nr = 3 + weight_ranges(gpu, ex, t, true, dr + 3);
    sp_gpu_dispatch(gpu, "moe_down", down, (uint32_t[4]){ld.workgroup, ld.rows, check_d, ld.groups}, &dp, sizeof dp, NULL, dr, nr,
                    &ryo, 1, plan + 3);
    mp.d = (uint32_t)H;
    sp_gpu_range cr[3] = {rids, rw, ryo};
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_combine", SP_GPU_MOE_COMBINE, (uint32_t[4]){H >= 1024 ? 256 : 64, 0, 0, 0}, &mp, sizeof mp, groups,
                    cr, 3, &ry, 1, NULL);
}

static void gpu_moe(const sp_backend *be, float *y, int32_t *ids, float *w, const float *logits, const float *x, int64_t n,
                    const sp_moe_experts *ex, float *scratch) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (ex->n_experts > 1024 || ex->top_k > 64 || ex->hidden % 4 || ex->inter % 4) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE shapes (≤ 1024 experts, ≤ 64 per token, dims multiples of 4)");
        return;
    }
    const sp_gpu_expert_table *t = expert_table(gpu, be, ex);
    if (!t) return;
    bool by_pair = n <= SP_GPU_GEMV_MAX_N;
    if (by_pair) {
        experts_by_pair(be, y, ids, w, logits, x, n, ex, t, scratch);
    } else {
        route(gpu, ids, w, logits, n, ex->n_experts, ex->top_k);
        experts_planned(be, y, x, ids, w, n, ex, t, scratch);
    }
    if (ex->shared_gate && !(by_pair && t->has_shared)) sp_moe_add_shared(be, y, x, n, ex, scratch);
}

void sp_gpu_install_moe(sp_backend *be) {
    be->moe = gpu_moe;
}
