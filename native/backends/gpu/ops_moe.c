/* ops_moe.c — a mixture-of-experts layer on a GPU: routing, then every routed (token, expert) pair in four dispatches
 * (plan, gate·up, down, combine — the last adding the gated shared expert) with the expert ids staying on the device:
 * the gate·up and down products as GEMVs over tiles of a few pairs of one expert (one token: a tile per pair, no
 * plan), or, for a chunk of more tokens than a GEMV takes where the device has cooperative matrices, as GEMMs on them
 * over tiles of SP_GPU_MOE_COOP_PAIRS pairs (x and h in f16).
 * Kernels: moe.comp, matmul.comp, matmul_coopmat.comp. */
#include "gpu.h"

#include "core/error.h"

#include <stdlib.h>

enum { MOE_TILE = 4 };

/* Expert GEMV kernels by weight type: tiles of one pair, and of up to MOE_TILE pairs. */
static const sp_gpu_kernel_id GATE_UP[2][SP_MAT_TYPE_COUNT] = {SP_GPU_BY_TYPE(SP_GPU_MOE_GATE_UP), SP_GPU_BY_TYPE(SP_GPU_MOE_GATE_UP4)};
static const sp_gpu_kernel_id DOWN[2][SP_MAT_TYPE_COUNT] = {SP_GPU_BY_TYPE(SP_GPU_MOE_DOWN), SP_GPU_BY_TYPE(SP_GPU_MOE_DOWN4)};

typedef struct {
    uint64_t ids, w, src, dst, plan, shared_y, shared_gate;
    uint32_t n, n_experts, top_k, d, down_blocks, max_tiles, tile;
} moe_push;

static void gpu_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                          int32_t top_k) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (n_experts > 1024 || top_k > 64) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE routing above 1024 experts or 64 per token");
        return;
    }
    sp_gpu_range r = sp_gpu_span(gpu, logits, (uint64_t)n * (uint64_t)n_experts * 4);
    sp_gpu_range wr[2] = {sp_gpu_span(gpu, ids, (uint64_t)n * (uint64_t)top_k * 4), sp_gpu_span(gpu, w, (uint64_t)n * (uint64_t)top_k * 4)};
    moe_push p = {wr[0].lo, wr[1].lo, r.lo, 0, 0, 0, 0, (uint32_t)n, (uint32_t)n_experts, (uint32_t)top_k, 0, 0, 0, 0};
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_route", SP_GPU_MOE_ROUTE, (uint32_t[4]){n_experts >= 256 ? 256 : 64, 0, 0, 0}, &p, sizeof p, groups,
                    &r, 1, wr, 2, NULL);
}

/* The device table of an expert set's row-0 addresses, [E][gate, up, down], made on first use and kept; keyed by the
 * views and what they view: a freed set's views may come back at the same address. */
static const uint64_t *expert_table(sp_gpu *gpu, const sp_backend *be, const sp_moe_experts *ex, uint32_t *gate_stride,
                                    uint32_t *down_stride) {
    int32_t i = 0;
    while (i < gpu->n_expert_tables && (gpu->expert_tables[i].key != ex->gate || gpu->expert_tables[i].first != ex->gate[0].data ||
                                        gpu->expert_tables[i].n_experts != ex->n_experts))
        i++;
    if (i == gpu->n_expert_tables) {
        if (i == SP_GPU_MAX_EXPERT_TABLES) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "too many MoE layers"), NULL;
        uint64_t *host = malloc(sizeof(uint64_t) * 3 * (size_t)ex->n_experts);
        uint64_t *dev = sp_gpu_alloc(be, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        if (!host || !dev) {
            free(host);
            return sp_gpu_fail_msg(gpu, SPLASH_ERR_OUT_OF_MEMORY, "MoE expert table"), NULL;
        }
        uint32_t strides[3] = {0, 0, 0};
        for (int32_t e = 0; e < ex->n_experts; e++) {
            const sp_matrix *m[3] = {&ex->gate[e], &ex->up[e], &ex->down[e]};
            for (int j = 0; j < 3; j++) {
                uint64_t a;
                uint32_t s;
                if (!sp_gpu_weights(gpu, m[j], &a, &s) || m[j]->type != ex->gate[0].type) {
                    free(host);
                    return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE experts of mixed weight types"), NULL;
                }
                host[3 * e + j] = a;
                strides[j] = s;
            }
        }
        sp_gpu_write(be, dev, host, sizeof(uint64_t) * 3 * (uint64_t)ex->n_experts);
        free(host);
        gpu->expert_tables[i] = (sp_gpu_expert_table){ex->gate, ex->gate[0].data, ex->n_experts, dev, strides[0], strides[2]};
        gpu->n_expert_tables++;
    }
    *gate_stride = gpu->expert_tables[i].gate_stride;
    *down_stride = gpu->expert_tables[i].down_stride;
    return gpu->expert_tables[i].table;
}

/* The matrix units take the experts where the device has them, the weights are not f32 (f32 asks for f32 arithmetic)
 * and x and h rows are whole 16-byte loads of halves. */
static bool coop_possible(const sp_gpu *g, const sp_moe_experts *ex) {
    return !g->no_coopmat && sp_gpu_moe_coop_kernels[ex->gate[0].type][0] >= 0 && ex->hidden % 8 == 0 && ex->inter % 8 == 0;
}

/* More tokens than a GEMV takes: the GEMMs on the matrix units (the dense matmul's choice too). */
bool sp_gpu_moe_coop(const sp_gpu *g, const sp_moe_experts *ex, int64_t n) { return n > SP_GPU_GEMV_MAX_N && coop_possible(g, ex); }

/* A chunk's whole device range (weight rows padded). */
static sp_gpu_range chunk_range(const sp_gpu_chunk *c) {
    uint64_t lo = c->buf.addr + c->offset;
    return (sp_gpu_range){lo, lo + (c->host_row ? c->size / (uint64_t)c->host_row * (uint64_t)c->dev_row : c->size)};
}

void sp_gpu_moe_experts_launch(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                               const sp_moe_experts *ex, float *scratch, const float *shared, const float *shared_gate,
                               const bool *force_coop) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint32_t gate_stride, down_stride;
    const uint64_t *table = expert_table(gpu, be, ex, &gate_stride, &down_stride);
    if (!table) return;
    if (ex->n_experts > 1024 || ex->hidden % 4 || ex->inter % 4) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE shapes (≤ 1024 experts, dims multiples of 4)");
        return;
    }
    uint64_t H = (uint64_t)ex->hidden, I = (uint64_t)ex->inter, K = (uint64_t)ex->top_k, pairs = (uint64_t)n * K;
    bool coop = force_coop ? *force_coop : sp_gpu_moe_coop(gpu, ex, n), single = n == 1; /* one token: tiles of one pair */
    if (coop && !coop_possible(gpu, ex)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "no cooperative-matrix MoE GEMM for these experts on this device");
        return;
    }
    uint32_t tile = coop ? SP_GPU_MOE_COOP_PAIRS : single ? 1 : MOE_TILE;
    uint64_t max_tiles = sp_gpu_div_up(pairs, tile) + (pairs < (uint64_t)ex->n_experts ? pairs : (uint64_t)ex->n_experts);
    /* scratch (sp_moe_scratch_floats): h [pairs][I] (on the matrix units in f16, in its first half), yo [pairs][H], then
     * the plan (ints) */
    float *h = scratch, *yo = h + pairs * I;
    int32_t *plan = (int32_t *)(yo + pairs * H);
    if (8 + 3 * max_tiles + pairs > pairs * (H + I + 1)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "MoE scratch too small for the expert plan");
        return;
    }
    sp_gpu_range rx = sp_gpu_span(gpu, x, (uint64_t)n * H * 4), rids = sp_gpu_span(gpu, ids, pairs * 4),
                rw = sp_gpu_span(gpu, w, pairs * 4), rh = sp_gpu_span(gpu, h, pairs * I * 4), ryo = sp_gpu_span(gpu, yo, pairs * H * 4),
                rplan = sp_gpu_span(gpu, plan, (8 + 3 * max_tiles + pairs) * 4), rtab = sp_gpu_span(gpu, table, 24 * (uint64_t)ex->n_experts),
                ry = sp_gpu_span(gpu, y, (uint64_t)n * H * 4);
    /* every expert's weights could be read: the chunks of gate, up and down as a whole */
    const sp_gpu_chunk *cg = sp_gpu_chunk_of(gpu, ex->gate[0].data), *cd = sp_gpu_chunk_of(gpu, ex->down[0].data);
    sp_gpu_range rwg = cg ? chunk_range(cg) : rtab, rwd = cd ? chunk_range(cd) : rtab;
    moe_push mp = {rids.lo, rw.lo, ryo.lo, ry.lo, rplan.lo, 0, 0, (uint32_t)n, (uint32_t)ex->n_experts, (uint32_t)K, 0, 0,
                   (uint32_t)max_tiles, tile};

    /* the plan's row blocks: workgroups of SP_GPU_MOE_COOP_ROWS weight rows on the matrix units (gate/up: half each), the
     * GEMV launches' row groups otherwise */
    sp_gpu_mm_launch lg = {0}, ld = {0};
    if (coop)
        mp.d = sp_gpu_div_up(I, SP_GPU_MOE_COOP_ROWS / 2), mp.down_blocks = sp_gpu_div_up(H, SP_GPU_MOE_COOP_ROWS);
    else {
        int bucket = single ? 0 : 1;
        lg = sp_gpu_gemv_params(gpu, &ex->gate[0], bucket), ld = sp_gpu_gemv_params(gpu, &ex->down[0], bucket);
        uint32_t max_gu = (uint32_t)sp_gpu_gemv_max_rows(bucket, 2);
        lg.rows = lg.rows > max_gu ? max_gu : lg.rows; /* gate and up rows together (matmul.comp MODE 1) */
        if (!sp_gpu_gemv_launch_ok(&lg, (int)max_gu) || !sp_gpu_gemv_launch_ok(&ld, sp_gpu_gemv_max_rows(bucket, 1))) {
            sp_gpu_fail_msg(gpu, SPLASH_ERR_INVALID_ARGUMENT, "an expert GEMV launch the kernel cannot take");
            return;
        }
        mp.d = sp_gpu_div_up(I, (uint64_t)lg.rows * lg.groups), mp.down_blocks = sp_gpu_div_up(H, (uint64_t)ld.rows * ld.groups);
    }
    if (!single || coop)
        sp_gpu_dispatch(gpu, "moe_plan", SP_GPU_MOE_PLAN, (uint32_t[4]){256, 0, 0, 0}, &mp, sizeof mp, (uint32_t[3]){1, 1, 1}, &rids,
                        1, &rplan, 1, NULL);
    if (coop) {
        sp_gpu_range r16 = rx;
        uint32_t stride16;
        if (!sp_gpu_x16(be, &r16, ex->hidden, n, (uint64_t)n, &stride16)) return;
        const int *k = sp_gpu_moe_coop_kernels[ex->gate[0].type];
        uint32_t spec[4] = {SP_GPU_MOE_COOP_THREADS, 0, 0, 0};
        sp_gpu_gemm_push gp = {rtab.lo, r16.lo, rh.lo, gate_stride, (uint32_t)I, (uint32_t)H, (uint32_t)(3 * max_tiles), stride16,
                               (uint32_t)I, (uint32_t)K, rplan.lo + 32};
        sp_gpu_range gr[4] = {rtab, r16, rplan, rwg};
        sp_gpu_dispatch(gpu, "moe_gate_up", (sp_gpu_kernel_id)k[0], spec, &gp, sizeof gp, NULL, gr, 4, &rh, 1, plan);
        sp_gpu_gemm_push dp = {rtab.lo, rh.lo, ryo.lo, down_stride, (uint32_t)H, (uint32_t)I, (uint32_t)(3 * max_tiles), (uint32_t)I,
                               (uint32_t)H, (uint32_t)K, rplan.lo + 32};
        sp_gpu_range dr[4] = {rtab, rh, rplan, rwd};
        sp_gpu_dispatch(gpu, "moe_down", (sp_gpu_kernel_id)k[1], spec, &dp, sizeof dp, NULL, dr, 4, &ryo, 1, plan + 3);
    } else {
        sp_gpu_kernel_id gate_up = GATE_UP[!single][ex->gate[0].type], down = DOWN[!single][ex->down[0].type];
        uint32_t check_gu = ex->hidden % sp_gpu_chunk_cols[ex->gate[0].type] != 0, check_d = ex->inter % sp_gpu_chunk_cols[ex->down[0].type] != 0;
        /* one token: a tile per pair, the pairs' expert ids in place of the plan (order_at 0), sizes known here */
        sp_gpu_range tiles = single ? rids : rplan;
        uint64_t tiles_at = single ? rids.lo : rplan.lo + 32;
        uint32_t order_at = single ? 0 : (uint32_t)(3 * max_tiles), gg[3] = {(uint32_t)K, mp.d, 1}, dg[3] = {(uint32_t)K, mp.down_blocks, 1};
        sp_gpu_mm_push gp = {rtab.lo, rx.lo, rh.lo, tiles_at, gate_stride, (uint32_t)I, (uint32_t)H, 0, 0, 0, (uint32_t)K, order_at};
        sp_gpu_range gr[4] = {rtab, rx, tiles, rwg};
        sp_gpu_dispatch(gpu, "moe_gate_up", gate_up, (uint32_t[4]){lg.workgroup, lg.rows, check_gu, lg.groups}, &gp, sizeof gp, gg, gr,
                        4, &rh, 1, single ? NULL : plan);
        sp_gpu_mm_push dp = {rtab.lo, rh.lo, ryo.lo, tiles_at, down_stride, (uint32_t)H, (uint32_t)I, 0, 0, 0, (uint32_t)K, order_at};
        sp_gpu_range dr[4] = {rtab, rh, tiles, rwd};
        sp_gpu_dispatch(gpu, "moe_down", down, (uint32_t[4]){ld.workgroup, ld.rows, check_d, ld.groups}, &dp, sizeof dp, dg, dr, 4,
                        &ryo, 1, single ? NULL : plan + 3);
    }
    mp.d = (uint32_t)H;
    sp_gpu_range cr[5] = {rids, rw, ryo};
    if (shared) {
        cr[3] = sp_gpu_span(gpu, shared, (uint64_t)n * H * 4), cr[4] = sp_gpu_span(gpu, shared_gate, (uint64_t)n * 4);
        mp.shared_y = cr[3].lo, mp.shared_gate = cr[4].lo;
    }
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)n, groups);
    sp_gpu_dispatch(gpu, "moe_combine", SP_GPU_MOE_COMBINE, (uint32_t[4]){H >= 1024 ? 256 : 64, 0, 0, 0}, &mp, sizeof mp, groups,
                    cr, shared ? 5 : 3, &ry, 1, NULL);
}

static void gpu_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                            const sp_moe_experts *ex, float *scratch, const float *shared, const float *shared_gate) {
    sp_gpu_moe_experts_launch(be, y, x, ids, w, n, ex, scratch, shared, shared_gate, NULL);
}

void sp_gpu_install_moe(sp_backend *be) {
    be->moe_route = gpu_moe_route;
    be->moe_experts = gpu_moe_experts;
}
