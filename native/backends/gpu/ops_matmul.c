/* ops_matmul.c — the dense products on a GPU: matmul (the GEMV for a few x rows, reading each weight once — for Q4 and
 * Q8 on integer dot products against x quantized once, where the device has them; for more, the GEMM on the matrix
 * units the device has — cooperative matrices on Vulkan, simdgroup matrices on Metal — else the tiled one) and the
 * fused gate·up·silu of an FFN. Kernels: matmul.comp, quantize.comp, matmul_tiled.comp, matmul_coopmat.comp,
 * matmul_simdgroup.metal. */
#include "gpu.h"

#include "core/error.h"

#include <stddef.h>

/* GEMV kernels by batch bucket (1, ≤ 4, ≤ 16 x rows) and weight type. */
static const sp_gpu_kernel_id MATMUL[SP_GPU_GEMV_BATCHES][SP_MAT_TYPE_COUNT] = {
    SP_GPU_BY_TYPE(SP_GPU_MATMUL), SP_GPU_BY_TYPE(SP_GPU_MATMUL4), SP_GPU_BY_TYPE(SP_GPU_MATMUL16)};
static const sp_gpu_kernel_id DENSE_GATE_UP[SP_GPU_GEMV_BATCHES][SP_MAT_TYPE_COUNT] = {
    SP_GPU_BY_TYPE(SP_GPU_GATE_UP), SP_GPU_BY_TYPE(SP_GPU_GATE_UP4), SP_GPU_BY_TYPE(SP_GPU_GATE_UP16)};
/* The integer-dot GEMV kernels (Q8, Q4) by batch bucket: [bucket][weights are Q4]. */
static const sp_gpu_kernel_id MATMUL_DOT[SP_GPU_GEMV_BATCHES][2] = {
    {SP_GPU_MATMUL_DOT_Q8, SP_GPU_MATMUL_DOT_Q4}, {SP_GPU_MATMUL_DOT4_Q8, SP_GPU_MATMUL_DOT4_Q4}, {SP_GPU_MATMUL_DOT16_Q8, SP_GPU_MATMUL_DOT16_Q4}};
static const sp_gpu_kernel_id GATE_UP_DOT[SP_GPU_GEMV_BATCHES][2] = {
    {SP_GPU_GATE_UP_DOT_Q8, SP_GPU_GATE_UP_DOT_Q4}, {SP_GPU_GATE_UP_DOT4_Q8, SP_GPU_GATE_UP_DOT4_Q4}, {SP_GPU_GATE_UP_DOT16_Q8, SP_GPU_GATE_UP_DOT16_Q4}};

const int64_t sp_gpu_chunk_cols[SP_MAT_TYPE_COUNT] = {4, 8, 8, 16, 64, 32, 16};

bool sp_gpu_weights(sp_gpu *gpu, const sp_matrix *W, uint64_t *addr, uint32_t *stride) {
    *addr = 0, *stride = 0;
    if ((unsigned)W->type >= SP_MAT_TYPE_COUNT) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "no kernels for these weights");
    const sp_gpu_chunk *c = sp_gpu_chunk_of(gpu, W->data);
    if (!c) return sp_gpu_fail_msg(gpu, SPLASH_ERR_INTERNAL, "a weight matrix that was not uploaded");
    *addr = sp_gpu_addr(gpu, W->data);
    *stride = (uint32_t)(c->host_row ? c->dev_row : W->row_bytes);
    return true;
}

bool sp_gpu_x8_space(const sp_backend *be, int64_t cols, int64_t n, sp_gpu_range *q, uint32_t *row_bytes) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t nbp = ((uint64_t)(cols + 31) / 32 + 1) / 2 * 2, row = nbp * 40, bytes = (uint64_t)n * row;
    *row_bytes = (uint32_t)row;
    if (!sp_gpu_scratch(be, &gpu->x8, &gpu->x8_bytes, bytes, bytes < 32768 ? 65536 : bytes * 2, "int8 copy of a GEMV's x"))
        return false;
    *q = sp_gpu_span(gpu, gpu->x8, bytes);
    return true;
}

bool sp_gpu_quantize_rows(const sp_gpu *g, int64_t n, int64_t d) {
    return !g->no_int_dot && n <= SP_GPU_GEMV_MAX_N && d >= 1024 && d <= 8192 && d % 32 == 0; /* norm.comp's QUANT_MAX_D */
}

/* Whether x [n][cols] at device address xa is in gpu->x8 already (quantized by a norm or an earlier GEMV). */
static bool x8_holds(const sp_gpu *gpu, uint64_t xa, int64_t cols, int64_t n) {
    return gpu->x8_of.lo == xa && gpu->x8_of.hi == xa + (uint64_t)n * (uint64_t)cols * 4 && gpu->x8_cols == (uint32_t)cols;
}

/* Whether a GEMV of n rows of x (at xa) by W (rows `stride` bytes apart) runs on integer dot products (matmul.comp
 * DOT): for Q4 and Q8 weights where the device has them, when x is quantized already (a norm did it, or the GEMV of
 * another matrix), for several rows, or for a matrix large enough (gpu->int_dot_min_bytes) that the faster GEMV pays
 * for a dispatch quantizing x; else the float GEMV. */
static bool int_dot(const sp_gpu *gpu, const sp_matrix *W, uint32_t stride, uint64_t xa, int64_t n) {
    if (gpu->no_int_dot || (W->type != SP_MAT_Q4 && W->type != SP_MAT_Q8)) return false;
    return n > 1 || x8_holds(gpu, xa, W->cols, n) || (uint64_t)W->rows * stride >= gpu->int_dot_min_bytes;
}

/* x [n][cols] (at device address xa) quantized to int8 groups into gpu->x8 (quantize.comp), unless x8 holds them
 * already. Returns false on failure; else the quantized rows' range and their stride in 4-byte words. */
static bool quantized_x(const sp_backend *be, uint64_t xa, int64_t cols, int64_t n, sp_gpu_range *q, uint32_t *stride) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint32_t row;
    if (!sp_gpu_x8_space(be, cols, n, q, &row)) return false;
    *stride = row / 4;
    if (x8_holds(gpu, xa, cols, n)) return true;
    uint64_t nbp = row / 40;
    sp_gpu_range src = {xa, xa + (uint64_t)n * (uint64_t)cols * 4};
    struct {
        uint64_t x, q;
        uint32_t cols, n, x_stride, q_stride;
    } p = {xa, q->lo, (uint32_t)cols, (uint32_t)n, (uint32_t)cols, row};
    uint32_t groups[3];
    sp_gpu_grid(sp_gpu_div_up((uint64_t)n * nbp, 64), groups);
    sp_gpu_dispatch(gpu, "quantize_x", SP_GPU_QUANTIZE_X, (uint32_t[4]){64, 0, 0, 0}, &p, sizeof p, groups, &src, 1, q, 1, NULL);
    gpu->x8_of = src, gpu->x8_cols = (uint32_t)cols;
    return true;
}

bool sp_gpu_x16(const sp_backend *be, sp_gpu_range *x, int64_t cols, int64_t n, uint64_t rows, uint32_t *stride) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t stride16 = ((uint64_t)cols + 7) / 8 * 8, bytes16 = rows * stride16 * 2;
    if (!sp_gpu_scratch(be, &gpu->x16, &gpu->x16_bytes, bytes16, bytes16 * 2, "f16 copy of a GEMM's x")) return false;
    sp_gpu_range r16 = sp_gpu_span(gpu, gpu->x16, bytes16);
    sp_gpu_gemm_push p = {0, x->lo, r16.lo, 0, (uint32_t)rows, (uint32_t)cols, (uint32_t)n, 0, (uint32_t)stride16, 0, 0};
    uint32_t hg[3];
    sp_gpu_grid(sp_gpu_div_up(bytes16 / 16, 256), hg);
    sp_gpu_dispatch(gpu, "gemm_halves", SP_GPU_GEMM_HALVES, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, hg, x, 1, &r16, 1, NULL);
    *x = r16, *stride = (uint32_t)stride16;
    return true;
}

/* Column splits of a cooperative-matrix GEMM of `tiles` workgroups: enough that about 512 workgroups run (what keeps
 * an H200's 132 multiprocessors busy; a GEMM of few weight rows, a prefill chunk's k_proj say, has far fewer tiles),
 * each over at least 256 columns, the splits' copies of y within 32 MiB. Returns the columns per split (a multiple of 128), 0 for one. */
static uint32_t gemm_split(int64_t tiles, int64_t cols, int64_t n, int64_t rows) {
    int64_t splits = (512 + tiles - 1) / tiles;
    if (splits > cols / 256) splits = cols / 256;
    while (splits > 1 && splits * n * rows * 4 > ((int64_t)32 << 20)) splits--;
    if (splits <= 1) return 0;
    int64_t k = ((cols + splits - 1) / splits + 127) / 128 * 128;
    return k < cols ? (uint32_t)k : 0;
}

/* A GEMV of W's rows (launch l, push p) as matmul.comp's `plain` kernel, or its integer-dot `dot` kernel with x
 * quantized (the range *x of reads, then replaced by the quantized rows) where int_dot says so. */
static void gemv_dispatch(const sp_backend *be, const char *op, sp_gpu_kernel_id plain, sp_gpu_kernel_id dot, const sp_matrix *W,
                          uint32_t stride, int64_t n, const sp_gpu_mm_launch *l, sp_gpu_mm_push *p, const sp_gpu_range *reads,
                          int32_t n_reads, sp_gpu_range *x, sp_gpu_range write) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint32_t groups[3], check = W->cols % sp_gpu_chunk_cols[W->type] != 0;
    sp_gpu_kernel_id k = plain;
    if (int_dot(gpu, W, stride, x->lo, n)) {
        if (!quantized_x(be, x->lo, W->cols, n, x, &p->x_stride)) return;
        p->x = x->lo, check = 0, k = dot;
    }
    sp_gpu_grid(sp_gpu_div_up((uint64_t)W->rows, (uint64_t)l->rows * l->groups), groups);
    sp_gpu_dispatch(gpu, op, k, (uint32_t[4]){l->workgroup, l->rows, check, l->groups}, p, sizeof *p, groups, reads, n_reads,
                    &write, 1, NULL);
}

bool sp_gpu_gemv_launch_ok(const sp_gpu_mm_launch *l, int max_rows) {
    return l->workgroup >= 32 && l->workgroup <= 128 && l->groups >= 1 && l->workgroup % l->groups == 0 &&
           l->workgroup / l->groups >= SP_GPU_GEMV_MIN_LANES && l->rows >= 1 && l->rows <= (uint32_t)max_rows;
}

void sp_gpu_matmul_launch(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n,
                          const sp_gpu_mm_launch *force) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t w;
    uint32_t stride;
    if (!sp_gpu_weights(gpu, W, &w, &stride)) return;
    uint64_t xa = sp_gpu_addr(gpu, x), ya = sp_gpu_addr(gpu, y);
    if (W->cols % 4 || xa % 16) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "matmul needs cols % 4 == 0 and 16-byte aligned inputs");
        return;
    }
    sp_gpu_range reads[2] = {{w, w + (uint64_t)W->rows * stride}, {xa, xa + (uint64_t)n * (uint64_t)W->cols * 4}};
    sp_gpu_range write = {ya, ya + (uint64_t)n * (uint64_t)W->rows * 4};
    if (force ? force->workgroup != 0 : n <= SP_GPU_GEMV_MAX_N) {
        int bucket = sp_gpu_gemv_bucket(n);
        sp_gpu_mm_launch l = force ? *force : sp_gpu_gemv_params(gpu, W, bucket);
        if (n > SP_GPU_GEMV_MAX_N || !sp_gpu_gemv_launch_ok(&l, sp_gpu_gemv_max_rows(bucket, 1))) {
            sp_gpu_fail_msg(gpu, SPLASH_ERR_INVALID_ARGUMENT, "a GEMV launch the kernel cannot take");
            return;
        }
        sp_gpu_mm_push p = {w, xa, ya, 0, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols,
                     (uint32_t)W->rows, 0, 0};
        gemv_dispatch(be, "matmul", MATMUL[bucket][W->type], MATMUL_DOT[bucket][W->type == SP_MAT_Q4], W, stride, n, &l, &p,
                      reads, 2, &reads[1], write);
        return;
    }
    sp_gpu_gemm_push p = {w, xa, ya, stride, (uint32_t)W->rows, (uint32_t)W->cols, (uint32_t)n, (uint32_t)W->cols, (uint32_t)W->rows, 0, 0};
    /* the matrix units where the device has them (f16 operands), unless the weights are f32 */
    bool coop = force ? force->coopmat : !gpu->no_coopmat && sp_gpu_gemm_coop_first[W->type] >= 0;
    if (coop && (gpu->no_coopmat || sp_gpu_gemm_coop_first[W->type] < 0)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "no cooperative-matrix GEMM for these weights on this device");
        return;
    }
    uint32_t groups[3] = {0, 0, 1}, wg;
    sp_gpu_kernel_id k;
    if (!force && gpu->simdgroup_gemm && W->type != SP_MAT_F32) { /* Metal's matrix units: x rounded to f16 per tile */
        groups[0] = sp_gpu_div_up((uint64_t)n, SP_GPU_SIMDGROUP_BN), groups[1] = sp_gpu_div_up((uint64_t)W->rows, SP_GPU_SIMDGROUP_BM);
        sp_gpu_dispatch(gpu, "gemm", SP_GPU_GEMM_SIMDGROUP, (uint32_t[4]){SP_GPU_SIMDGROUP_THREADS, (uint32_t)W->type, 0, 0}, &p,
                        offsetof(sp_gpu_gemm_push, k_split), groups, reads, 2, &write, 1, NULL);
        return;
    }
    if (coop) {
        int tile = force ? force->tile : sp_gpu_gemm_coop_tile(gpu, W, n);
        const sp_gpu_coop_tile *t = &sp_gpu_coop_tiles[tile];
        /* x in f16 first (rows padded to 8 halves, and with zero rows to whole x tiles, so that only the weight rows
         * bound a tile), into scratch kept between products */
        uint64_t n16 = sp_gpu_div_up((uint64_t)n, (uint64_t)t->bn) * (uint64_t)t->bn;
        if (!sp_gpu_x16(be, &reads[1], W->cols, n, n16, &p.x_stride)) return;
        p.x = reads[1].lo;
        groups[0] = sp_gpu_div_up((uint64_t)W->rows, (uint64_t)t->bm), groups[1] = (uint32_t)(n16 / (uint64_t)t->bn);
        wg = (uint32_t)((t->bm / t->wm) * (t->bn / t->wn) * 32);
        k = (sp_gpu_kernel_id)(sp_gpu_gemm_coop_first[W->type] + tile);
        p.k_split = gemm_split((int64_t)groups[0] * groups[1], W->cols, n, W->rows);
        if (p.k_split) { /* each split's products into its own copy of y, then their sum into y */
            uint32_t splits = (uint32_t)sp_gpu_div_up((uint64_t)W->cols, p.k_split);
            uint64_t part_bytes = (uint64_t)splits * (uint64_t)n * (uint64_t)W->rows * 4;
            if (!sp_gpu_scratch(be, &gpu->gemm_parts, &gpu->gemm_parts_bytes, part_bytes, part_bytes * 2, "a split GEMM's partial products"))
                return;
            sp_gpu_range rp = sp_gpu_span(gpu, gpu->gemm_parts, part_bytes);
            p.y = rp.lo;
            groups[2] = splits;
            sp_gpu_dispatch(gpu, "gemm", k, (uint32_t[4]){wg, 0, 0, 0}, &p, sizeof p, groups, reads, 2, &rp, 1, NULL);
            p.y = ya, p.parts = rp.lo, p.k_split = splits;
            uint32_t sg[3];
            sp_gpu_grid(sp_gpu_div_up((uint64_t)n * (uint64_t)W->rows, 256), sg);
            sp_gpu_dispatch(gpu, "gemm_sum", SP_GPU_GEMM_SUM, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p, sg, &rp, 1, &write, 1, NULL);
            return;
        }
    } else {
        int tile = force ? force->tile : sp_gpu_gemm_tile(gpu, W, n);
        const sp_gpu_tile *t = &sp_gpu_tiles[tile];
        groups[0] = sp_gpu_div_up((uint64_t)W->rows, (uint64_t)t->bm), groups[1] = sp_gpu_div_up((uint64_t)n, (uint64_t)t->bn);
        wg = (uint32_t)((t->bm / t->tm) * (t->bn / t->tn));
        k = (sp_gpu_kernel_id)(sp_gpu_gemm_first[W->type] + tile);
    }
    /* the tiled kernel's push block ends before the cooperative-matrix one's k_split */
    sp_gpu_dispatch(gpu, "gemm", k, (uint32_t[4]){wg, 0, 0, 0}, &p, coop ? sizeof p : offsetof(sp_gpu_gemm_push, k_split), groups, reads, 2,
                    &write, 1, NULL);
}

static void gpu_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n) {
    sp_gpu_matmul_launch(be, y, W, x, n, NULL);
}

/* Few rows: one GEMV over the gate and up rows of each index (matmul.comp MODE 3), with the launch measured for the
 * gate matrix, half its rows per group for two matrices: the same lanes sum each row as in separate matmuls, so the
 * products are theirs bit for bit. More rows: the two GEMMs and the gate. */
static void gpu_matmul_gate_up(const sp_backend *be, float *h, float *u, const sp_matrix *gate, const sp_matrix *up,
                               const float *x, int64_t n) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t wg, wu;
    uint32_t stride, stride_up;
    if (!sp_gpu_weights(gpu, gate, &wg, &stride) || !sp_gpu_weights(gpu, up, &wu, &stride_up)) return;
    uint64_t xa = sp_gpu_addr(gpu, x);
    if (n > SP_GPU_GEMV_MAX_N || gate->type != up->type || gate->rows != up->rows || gate->cols != up->cols || stride != stride_up ||
        gate->cols % 4 || xa % 16) {
        gpu_matmul(be, h, gate, x, n);
        gpu_matmul(be, u, up, x, n);
        be->silu_mul(be, h, h, u, n * gate->rows);
        return;
    }
    int bucket = sp_gpu_gemv_bucket(n);
    sp_gpu_mm_launch l = sp_gpu_gemv_params(gpu, gate, bucket);
    uint32_t max_rows = (uint32_t)sp_gpu_gemv_max_rows(bucket, 2);
    l.rows = l.rows > 1 ? l.rows / 2 : 1; /* two matrices: the accumulators per invocation the measured launch had */
    if (l.rows > max_rows) l.rows = max_rows;
    if (!sp_gpu_gemv_launch_ok(&l, (int)max_rows)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_INVALID_ARGUMENT, "a GEMV launch the kernel cannot take");
        return;
    }
    sp_gpu_range reads[3] = {{wg, wg + (uint64_t)gate->rows * stride}, {wu, wu + (uint64_t)up->rows * stride},
                             {xa, xa + (uint64_t)n * (uint64_t)gate->cols * 4}};
    sp_gpu_range write = sp_gpu_span(gpu, h, (uint64_t)n * (uint64_t)gate->rows * 4);
    sp_gpu_mm_push p = {wg, xa, write.lo, wu, stride, (uint32_t)gate->rows, (uint32_t)gate->cols, (uint32_t)n, (uint32_t)gate->cols,
                 (uint32_t)gate->rows, 0, 0};
    gemv_dispatch(be, "matmul_gate_up", DENSE_GATE_UP[bucket][gate->type], GATE_UP_DOT[bucket][gate->type == SP_MAT_Q4], gate,
                  stride, n, &l, &p, reads, 3, &reads[2], write);
}

void sp_gpu_install_matmul(sp_backend *be) {
    be->matmul = gpu_matmul;
    be->matmul_gate_up = gpu_matmul_gate_up;
}
