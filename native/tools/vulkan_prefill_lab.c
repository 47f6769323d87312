/* vulkan_prefill_lab.c — the lab harness of the Vulkan prefill kernels (STYLE.md §2): the GEMM of a prefill chunk on
 * every launch the device can take, attention of a chunk at the start and at the end of a long context, and the
 * Gated DeltaNet over a chunk, on the real shapes of a model, each checked, then timed.
 *
 *   build/tools/vulkan_prefill_lab [--model qwen3.8-27b|qwen3.6-35b-a3b|tiny] [--types q4,bf16] [--n 1024]
 *                                  [--context 32768] [--reps 10] [--parts gemm,attention,gdn,moe] [--out FILE]
 *
 * GEMM (y = x · Wᵀ, n rows of x): each cooperative-matrix tile (kernels/matmul_coopmat.comp, f16 operands, where the
 * device has them) and the tiled f32 kernel's square tile (matmul_tiled.comp), against the exact product on 64 rows;
 * TFLOP/s = 2 · rows · cols · n / time. Prints the fastest coop tile per matrix as the "gemmCoopmat" entries of
 * models/<id>/vulkan.json where it beats the default tile (tuning.c) by more than the run-to-run spread, and with --out
 * writes them as a tuning file the backend reads when SPLASH_VULKAN_TUNING names it (the runs after it in the same
 * call use them; committing them into models/<id>/vulkan.json makes them the model's). Attention: a chunk of n rows at position 0 and ending at --context over an f32, f16 and int8
 * cache, against the CPU op on the last rows; TFLOP/s over the causal product (4 · head_dim multiply-adds per query head and visible key).
 * MoE (models with experts): the routed experts of a chunk of n tokens (routing from random router logits), on the
 * GEMV tiles (matmul.comp MODE 1/2) and on the matrix units (matmul_coopmat.comp MOE), the second checked against the
 * first; TFLOP/s = 2 · 3 · hidden · expert width · routed pairs / time, GB/s = every expert's weight bytes / time.
 * GDN: n tokens through the state, token by token (kernels/gdn.comp) and in chunks of 64 (gdn_chunked.comp), the
 * second checked against the first, both timed at 16, 64, 256, … n tokens. Every time is the mean of --reps runs in one submission after
 * half a second of warm-up (a twentieth for the GEMM launches after a matrix's first: the GPU is busy then); the weights and inputs are random (the weights valid: finite values, small scales). */
#include "backends/cpu/ops.h"
#include "backends/gpu/gpu.h"
#include "backends/vulkan/vulkan.h"
#include "core/error.h"
#include "core/quant.h"
#include "core/threadpool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct mshape {
    const char *name;
    int64_t rows, cols;
} mshape;

typedef struct model {
    const char *id;
    const mshape *mats;
    int n_mats;
    int32_t heads, kv_heads, head_dim, k_heads, v_heads, k_dim, v_dim;
    int32_t hidden, experts, top_k, moe_inter; /* experts 0: a dense model */
} model;

/* The matrices a prefill chunk multiplies in every layer (the lm_head runs for the last row only; experts go
 * through the MoE kernels). */
static const mshape M27[] = {{"q_proj", 12288, 5120}, {"k_proj", 1024, 5120}, {"o_proj", 5120, 6144},
                             {"in_proj_qkv", 10240, 5120}, {"in_proj_z", 6144, 5120}, {"in_proj_a", 48, 5120},
                             {"out_proj", 5120, 6144}, {"gate_proj", 17408, 5120}, {"down_proj", 5120, 17408}};
static const mshape M35[] = {{"q_proj", 8192, 2048}, {"k_proj", 512, 2048}, {"o_proj", 2048, 4096}, {"in_proj_qkv", 8192, 2048},
                             {"in_proj_z", 4096, 2048}, {"in_proj_a", 32, 2048}, {"out_proj", 2048, 4096},
                             {"shared_gate", 512, 2048}, {"shared_down", 2048, 512}};
static const mshape MTINY[] = {{"proj", 384, 256}, {"down", 256, 512}};
static const model MODELS[] = {
    {"qwen3.8-27b", M27, sizeof M27 / sizeof M27[0], 24, 4, 256, 16, 48, 128, 128, 5120, 0, 0, 0},
    {"qwen3.6-35b-a3b", M35, sizeof M35 / sizeof M35[0], 16, 2, 256, 16, 32, 128, 128, 2048, 256, 8, 512},
    {"tiny", MTINY, sizeof MTINY / sizeof MTINY[0], 4, 2, 64, 2, 4, 32, 32, 256, 8, 2, 128},
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float uniform(float lo, float hi) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) * 0x1.0p-24);
}
static float *randoms(int64_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) x[i] = uniform(lo, hi);
    return x;
}

typedef struct gen_job {
    uint8_t *data;
    sp_mtype type;
    int64_t row_bytes, cols;
} gen_job;

/* Row r: weights uniform in ±0.05 from a per-row generator, stored in the type. */
static void gen_rows(void *ctx, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const gen_job *j = ctx;
    float *row = malloc(sizeof(float) * (size_t)j->cols);
    for (int64_t r = r0; r < r1; r++) {
        uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1);
        for (int64_t c = 0; c < j->cols; c++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            row[c] = 0.1f * ((float)((x >> 40) * 0x1.0p-24) - 0.5f);
        }
        uint8_t *dst = j->data + r * j->row_bytes;
        if (j->type == SP_MAT_Q4) sp_quantize_row_q4(row, j->cols, dst);
        else if (j->type == SP_MAT_Q8) sp_quantize_row_q8(row, j->cols, dst);
        else for (int64_t c = 0; c < j->cols; c++) ((uint16_t *)dst)[c] = j->type == SP_MAT_BF16 ? sp_f32_to_bf16(row[c]) : sp_f32_to_f16(row[c]);
    }
    free(row);
}

/* Runs `run` for at least half a second (a warm-up: the host's work before a case leaves the GPU idle, and its clocks
 * take a few hundred ms to come back up; the last result is checked by the caller), then `reps` times in one
 * submission: seconds per run. */
typedef void (*run_fn)(void *ctx);
static double timed(const sp_backend *be, run_fn run, void *ctx, int reps, double warm) {
    double t0 = now();
    do {
        run(ctx);
        sp_gpu_finish(be);
    } while (now() - t0 < warm);
    t0 = now();
    for (int r = 0; r < reps; r++) run(ctx);
    sp_gpu_finish(be);
    return (now() - t0) / reps;
}

typedef struct mm_job {
    const sp_backend *be;
    float *y;
    const sp_matrix *W;
    const float *x;
    int64_t n;
    sp_gpu_mm_launch launch;
} mm_job;
static void run_mm(void *ctx) {
    mm_job *j = ctx;
    sp_gpu_matmul_launch(j->be, j->y, j->W, j->x, j->n, &j->launch);
}

/* A coop tile as the tuning schema writes it (kernels/generate.ts CoopTile). */
static int coop_json(char *out, size_t size, const sp_gpu_coop_tile *c) {
    return snprintf(out, size, "{\"bm\": %d, \"bn\": %d, \"bk\": %d, \"wm\": %d, \"wn\": %d}", c->bm, c->bn, c->bk, c->wm, c->wn);
}

/* Time differences below this fraction are the run-to-run spread: the default tile stays. */
#define SPREAD 0.03

static void gemm(sp_backend *be, sp_threadpool *pool, const model *md, const char *types, int64_t n, int reps, const char *out) {
    sp_gpu *g = sp_gpu_of(be);
    printf("\nGEMM, %s, n = %lld (%s)\n", md->id, (long long)n, g->no_coopmat ? g->no_coopmat : "cooperative matrices");
    printf("  %-12s %-5s %-24s %10s %9s %10s\n", "matrix", "type", "launch", "us", "TFLOP/s", "nmse");
    char json[8192], list[256];
    int jl = 0;
    snprintf(list, sizeof list, ",%s,", types);
    double flops_all = 0, best_all = 0;
    for (sp_mtype t = SP_MAT_BF16; t <= SP_MAT_Q4; t++) {
        char want[32];
        snprintf(want, sizeof want, ",%s,", sp_mtype_name(t));
        if (!strstr(list, want)) continue;
        double flops_type = 0, best_type = 0, default_type = 0;
        for (int s = 0; s < md->n_mats; s++) {
            const mshape *m = &md->mats[s];
            int64_t rb = sp_mtype_row_bytes(t, m->cols);
            uint8_t *host = malloc((size_t)(m->rows * rb));
            gen_job gj = {host, t, rb, m->cols};
            sp_parallel_for(pool, m->rows, gen_rows, &gj);
            sp_matrix W = {t, m->rows, m->cols, NULL, rb}, hw = {t, m->rows, m->cols, host, rb};
            W.data = be->upload(be, host, m->rows, rb);
            float *x = randoms(n * m->cols, -1, 1), *y = malloc(sizeof(float) * (size_t)(n * m->rows));
            float *dx = be->alloc(be, 4 * (uint64_t)(n * m->cols)), *dy = be->alloc(be, 4 * (uint64_t)(n * m->rows));
            be->write(be, dx, x, 4 * (uint64_t)(n * m->cols));
            int64_t check = m->rows < 64 ? m->rows : 64;
            double *ref = calloc((size_t)(n * check), sizeof(double));
            float *row = malloc(sizeof(float) * (size_t)m->cols);
            for (int64_t r = 0; r < check; r++) {
                sp_matrix_row_f32(&hw, r, row);
                for (int64_t j = 0; j < n; j++)
                    for (int64_t c = 0; c < m->cols; c++) ref[j * check + r] += (double)row[c] * x[j * m->cols + c];
            }
            sp_gpu_mm_launch launches[SP_GPU_COOP_TILE_COUNT + 1];
            int nl = 0;
            if (!g->no_coopmat)
                for (int k = 0; k < SP_GPU_COOP_TILE_COUNT; k++) launches[nl++] = (sp_gpu_mm_launch){.tile = k, .coopmat = true};
            launches[nl++] = (sp_gpu_mm_launch){.tile = sp_gpu_gemm_tile(g, &W, n)};
            double flops = 2.0 * (double)m->rows * (double)m->cols * (double)n, best = 1e30, dflt = 0;
            int best_l = -1, dflt_tile = g->no_coopmat ? -1 : sp_gpu_gemm_coop_tile(g, &W, n);
            for (int l = 0; l < nl; l++) {
                mm_job j = {be, dy, &W, dx, n, launches[l]};
                be->clear(be, dy, 4 * (uint64_t)(n * m->rows));
                double sec = timed(be, run_mm, &j, reps, l ? 0.05 : 0.5);
                be->read(be, y, dy, 4 * (uint64_t)(n * m->rows));
                double e = 0, sr = 0;
                for (int64_t jj = 0; jj < n; jj++)
                    for (int64_t r = 0; r < check; r++) {
                        double d = y[jj * m->rows + r] - ref[jj * check + r];
                        e += d * d, sr += ref[jj * check + r] * ref[jj * check + r];
                    }
                double err = sr > 0 ? e / sr : e, tol = launches[l].coopmat ? 1e-5 : 1e-8;
                char name[48];
                if (launches[l].coopmat) {
                    const sp_gpu_coop_tile *c = &sp_gpu_coop_tiles[launches[l].tile];
                    snprintf(name, sizeof name, "coopmat %dx%dx%d/%dx%d%s", c->bm, c->bn, c->bk, c->wm, c->wn,
                             launches[l].tile == dflt_tile ? " *" : "");
                } else {
                    const sp_gpu_tile *c = &sp_gpu_tiles[launches[l].tile];
                    snprintf(name, sizeof name, "tiled %dx%dx%d", c->bm, c->bn, c->bk);
                }
                printf("  %-12s %-5s %-24s %10.1f %9.1f %10.1e%s\n", m->name, sp_mtype_name(t), name, sec * 1e6, flops / sec / 1e12,
                       err, err > tol || *be->status ? "  NOT OK" : "");
                bool bad = err > tol || *be->status;
                *be->status = SPLASH_OK;
                if (launches[l].coopmat && launches[l].tile == dflt_tile) dflt = sec;
                if (launches[l].coopmat && !bad && sec < best) best = sec, best_l = l;
            }
            if (best_l >= 0 && dflt > 0) {
                const sp_gpu_coop_tile *c = &sp_gpu_coop_tiles[launches[best_l].tile];
                printf("  -> %-9s %-5s fastest coopmat %dx%dx%d/%dx%d %.1f TFLOP/s, default %.1f (%.2fx)\n", m->name, sp_mtype_name(t),
                       c->bm, c->bn, c->bk, c->wm, c->wn, flops / best / 1e12, flops / dflt / 1e12, dflt / best);
                /* an entry only where another tile beats the default by more than the spread */
                if (launches[best_l].tile != dflt_tile && best < dflt * (1 - SPREAD)) {
                    char tile[128];
                    coop_json(tile, sizeof tile, &sp_gpu_coop_tiles[launches[best_l].tile]);
                    jl += snprintf(json + jl, sizeof json - (size_t)jl, "%s    {\"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"tile\": %s}",
                                   jl ? ",\n" : "", sp_mtype_name(t), (long long)m->rows, (long long)m->cols, tile);
                } else best = dflt;
                flops_all += flops, best_all += best;
                flops_type += flops, best_type += best, default_type += dflt;
            }
            be->free(be, dx), be->free(be, dy);
            sp_gpu_sync(g);
            free(host), free(x), free(y), free(ref), free(row);
        }
        if (best_type > 0)
            printf("  %s, all matrices: default tiles (*) %.1f TFLOP/s, fastest tile each %.1f TFLOP/s\n", sp_mtype_name(t),
                   flops_type / default_type / 1e12, flops_type / best_type / 1e12);
    }
    if (best_all > 0) {
        printf("  all matrices, fastest coop tile each: %.1f TFLOP/s\n", flops_all / best_all / 1e12);
        printf("\"gemmCoopmat\" of models/%s/vulkan.json (where a tile beats the default by > %.0f%%):\n[\n%s\n]\n", md->id,
               SPREAD * 100, json);
    }
    if (out && best_all > 0) {
        FILE *f = fopen(out, "w");
        time_t tt = time(NULL);
        char date[32];
        strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tt));
        if (!f) {
            fprintf(stderr, "vulkan_prefill_lab: cannot write %s\n", out);
            return;
        }
        fprintf(f, "{\n  \"measured\": {\"device\": \"%s\", \"date\": \"%s\", \"command\": \"build/tools/vulkan_prefill_lab --model %s --types %s --n %lld --parts gemm\"},\n"
                   "  \"gemmCoopmat\": [\n%s\n  ]\n}\n", be->device, date, md->id, types, (long long)n, json);
        fclose(f);
    }
}

/* ---- MoE experts ---- */

/* ‖got − want‖² / ‖want‖² (the absolute error where want is 0) */
static double rel_err(const float *got, const float *want, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) e += ((double)got[i] - want[i]) * ((double)got[i] - want[i]), s += (double)want[i] * want[i];
    return s > 0 ? e / s : e;
}

typedef struct moe_job {
    const sp_backend *be;
    float *y, *x, *w, *scratch;
    int32_t *ids;
    int64_t n;
    sp_moe_experts ex;
    bool coop;
} moe_job;
static void run_moe(void *ctx) {
    moe_job *j = ctx;
    sp_gpu_moe_experts_launch(j->be, j->y, j->x, j->ids, j->w, j->n, &j->ex, j->scratch, NULL, NULL, &j->coop);
}

static void moe(sp_backend *be, sp_threadpool *pool, const model *md, const char *types, int64_t n, int reps) {
    sp_gpu *g = sp_gpu_of(be);
    int32_t E = md->experts, k = md->top_k;
    int64_t H = md->hidden, I = md->moe_inter, pairs = n * k;
    printf("\nMoE experts, %s: %d experts top %d, hidden %lld, expert width %lld, n = %lld (%lld pairs; %s)\n", md->id, E, k,
           (long long)H, (long long)I, (long long)n, (long long)pairs, g->no_coopmat ? g->no_coopmat : "cooperative matrices");
    printf("  %-5s %-14s %10s %9s %8s %10s\n", "type", "path", "us", "TFLOP/s", "GB/s", "nmse");
    float *logits = randoms(n * E, -3, 3), *x = randoms(n * H, -1, 1);
    float *dlog = be->alloc(be, 4 * (uint64_t)(n * E)), *dx = be->alloc(be, 4 * (uint64_t)(n * H)), *dw = be->alloc(be, 4 * (uint64_t)pairs);
    int32_t *dids = be->alloc(be, 4 * (uint64_t)pairs);
    float *dscratch = be->alloc(be, 4 * (uint64_t)sp_moe_scratch_floats(n, k, H, I));
    float *dy[2] = {be->alloc(be, 4 * (uint64_t)(n * H)), be->alloc(be, 4 * (uint64_t)(n * H))};
    float *y[2] = {malloc(4 * (size_t)(n * H)), malloc(4 * (size_t)(n * H))};
    be->write(be, dlog, logits, 4 * (uint64_t)(n * E));
    be->write(be, dx, x, 4 * (uint64_t)(n * H));
    be->moe_route(be, dids, dw, dlog, n, E, k);
    char list[256];
    snprintf(list, sizeof list, ",%s,", types);
    for (sp_mtype t = SP_MAT_BF16; t <= SP_MAT_Q4; t++) {
        char want[32];
        snprintf(want, sizeof want, ",%s,", sp_mtype_name(t));
        if (!strstr(list, want)) continue;
        /* one fused gate_up [E·2I][H] and down [E·H][I], as the fused checkpoints store them */
        int64_t rg = sp_mtype_row_bytes(t, H), rd = sp_mtype_row_bytes(t, I);
        uint8_t *hg = malloc((size_t)(E * 2 * I * rg)), *hd = malloc((size_t)(E * H * rd));
        gen_job jg = {hg, t, rg, H}, jd = {hd, t, rd, I};
        sp_parallel_for(pool, E * 2 * I, gen_rows, &jg);
        sp_parallel_for(pool, E * H, gen_rows, &jd);
        sp_matrix gu = {t, E * 2 * I, H, be->upload(be, hg, E * 2 * I, rg), rg}, dn = {t, E * H, I, be->upload(be, hd, E * H, rd), rd};
        sp_matrix *v = malloc(sizeof(sp_matrix) * 3 * (size_t)E);
        for (int32_t e = 0; e < E; e++)
            v[e] = sp_matrix_rows(&gu, e * 2 * I, I), v[E + e] = sp_matrix_rows(&gu, e * 2 * I + I, I), v[2 * E + e] = sp_matrix_rows(&dn, e * H, H);
        double flops = 6.0 * (double)H * (double)I * (double)pairs, bytes = (double)E * (double)(2 * I * rg + H * rd);
        for (int c = 0; c < (g->no_coopmat ? 1 : 2); c++) {
            moe_job j = {be, dy[c], dx, dw, dscratch, dids, n, {v, v + E, v + 2 * E, E, k, H, I}, c == 1};
            double sec = timed(be, run_moe, &j, reps, 0.5);
            be->read(be, y[c], dy[c], 4 * (uint64_t)(n * H));
            double err = c ? rel_err(y[1], y[0], n * H) : 0;
            printf("  %-5s %-14s %10.1f %9.1f %8.0f %10.1e%s\n", sp_mtype_name(t), c ? "matrix units" : "GEMV tiles", sec * 1e6,
                   flops / sec / 1e12, bytes / sec / 1e9, err, err > 1e-5 || *be->status ? "  NOT OK" : "");
            *be->status = SPLASH_OK;
        }
        sp_gpu_sync(g);
        free(v), free(hg), free(hd);
    }
    be->free(be, dlog), be->free(be, dx), be->free(be, dw), be->free(be, dids), be->free(be, dscratch), be->free(be, dy[0]),
        be->free(be, dy[1]);
    free(logits), free(x), free(y[0]), free(y[1]);
}

/* ---- attention ---- */

typedef struct attn_job {
    const sp_backend *be;
    float *out, *q;
    sp_kv_view kv;
    int32_t past, heads, kv_heads, hd;
    int64_t n;
} attn_job;
static void run_attn(void *ctx) {
    attn_job *j = ctx;
    j->be->attention(j->be, j->out, j->q, NULL, &(sp_attn_seq){j->kv, 0, j->past, (int32_t)j->n}, 1, j->heads, j->kv_heads, j->hd, 1.0f / sqrtf((float)j->hd));
}

/* A chunk of n rows at position `past` over a cache of kv_type rows (SPLASH_KV_*), pages of 64 in order; the CPU op
 * on the same cache checks the last 8 rows. */
static void attention(sp_backend *be, sp_backend *cpu, const model *md, int32_t kv_type, int64_t n, int32_t past, int reps) {
    enum { P = 64 };
    int32_t total = past + (int32_t)n, n_pages = (total + P - 1) / P, hd = md->head_dim, Hkv = md->kv_heads, Hq = md->heads;
    int64_t page_rows = 2 * (int64_t)Hkv * P, rb = sp_kv_row_bytes(kv_type, hd), page_bytes = page_rows * rb;
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = i;
    float *vals = randoms(hd, -1, 1), *q = randoms(n * Hq * hd, -1, 1);
    uint8_t *kv = malloc((size_t)(page_bytes * n_pages));
    for (int64_t r = 0; r < page_rows * n_pages; r++) {
        for (int32_t d = 0; d < hd; d++) vals[d] = uniform(-1, 1);
        sp_kv_from_f32(cpu, kv_type, vals, hd, kv + r * rb);
    }
    uint8_t *dkv = be->alloc(be, (uint64_t)(page_bytes * n_pages));
    float *dq = be->alloc(be, 4 * (uint64_t)(n * Hq * hd)), *dout = be->alloc(be, 4 * (uint64_t)(n * Hq * hd));
    be->write(be, dkv, kv, (uint64_t)(page_bytes * n_pages));
    be->write(be, dq, q, 4 * (uint64_t)(n * Hq * hd));
    attn_job j = {be, dout, dq, {dkv, dkv + page_bytes / 2, page_bytes, pages, P, kv_type}, past, Hq, Hkv, hd, n};
    double sec = timed(be, run_attn, &j, reps, 0.5);
    int64_t tail = n < 8 ? n : 8;
    float *got = malloc(4 * (size_t)(n * Hq * hd)), *want = malloc(4 * (size_t)(tail * Hq * hd));
    be->read(be, got, dout, 4 * (uint64_t)(n * Hq * hd));
    sp_kv_view hv = {kv, kv + page_bytes / 2, page_bytes, pages, P, kv_type};
    cpu->attention(cpu, want, q + (n - tail) * Hq * hd, NULL, &(sp_attn_seq){hv, 0, past + (int32_t)(n - tail), (int32_t)tail}, 1, Hq, Hkv, hd, 1.0f / sqrtf((float)hd));
    double err = rel_err(got + (n - tail) * Hq * hd, want, tail * Hq * hd);
    /* visible keys summed over the chunk's rows: past + 1 … past + n */
    double keys = (double)n * past + (double)n * (n + 1) / 2, flops = 4.0 * hd * Hq * keys;
    bool flash = sp_gpu_flash_attention(sp_gpu_of(be), kv_type, hd, n);
    static const char *kv_names[] = {"f32", "f16", "int8"};
    printf("  attention %d/%d x %d, %-4s KV, %lld rows at %6d, %s: %9.1f us %8.1f TFLOP/s  nmse %.1e%s\n", Hq, Hkv, hd,
           kv_names[kv_type], (long long)n, past, flash ? "matrix units" : "scalar", sec * 1e6, flops / sec / 1e12, err,
           err > (flash ? 1e-4 : 1e-8) || *be->status ? "  NOT OK" : "");
    *be->status = SPLASH_OK;
    be->free(be, dkv), be->free(be, dq), be->free(be, dout);
    free(pages), free(vals), free(kv), free(q), free(got), free(want);
}

/* ---- Gated DeltaNet ---- */

typedef struct gdn_job {
    const sp_backend *be;
    float *out, *qkv, *a, *b, *S;
    sp_gdn_shape shape;
    int64_t n;
    bool chunked;
} gdn_job;
static void run_gdn(void *ctx) {
    gdn_job *j = ctx;
    sp_gpu_gdn(j->be, j->out, j->qkv, j->a, j->b, &j->shape, j->S, j->n, j->chunked);
}

/* The token loop (gdn.comp) and the chunked form (gdn_chunked.comp) over n tokens from one state, the second checked
 * against the first; then both timed at lengths up to n (where the op switches from one to the other). */
static void gdn(sp_backend *be, const model *md, int64_t n, int reps) {
    int32_t Hk = md->k_heads, Hv = md->v_heads, dk = md->k_dim, dv = md->v_dim;
    int64_t W = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, state = (int64_t)Hv * dk * dv, outs = n * Hv * dv;
    float *qkv = randoms(n * W, -1, 1), *a = randoms(n * Hv, -6, 3), *b = randoms(n * Hv, -4, 4);
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *S = randoms(state, -0.1f, 0.1f);
    float *d[9] = {be->alloc(be, 4 * (uint64_t)(n * W)), be->alloc(be, 4 * (uint64_t)(n * Hv)), be->alloc(be, 4 * (uint64_t)(n * Hv)),
                   be->alloc(be, 4 * (uint64_t)Hv), be->alloc(be, 4 * (uint64_t)Hv), be->alloc(be, 4 * (uint64_t)state),
                   be->alloc(be, 4 * (uint64_t)outs), be->alloc(be, 4 * (uint64_t)state), be->alloc(be, 4 * (uint64_t)outs)};
    be->write(be, d[0], qkv, 4 * (uint64_t)(n * W));
    be->write(be, d[1], a, 4 * (uint64_t)(n * Hv));
    be->write(be, d[2], b, 4 * (uint64_t)(n * Hv));
    be->write(be, d[3], A, 4 * (uint64_t)Hv);
    be->write(be, d[4], dt, 4 * (uint64_t)Hv);
    be->write(be, d[5], S, 4 * (uint64_t)state);
    be->write(be, d[7], S, 4 * (uint64_t)state);
    sp_gdn_shape shape = {Hk, Hv, dk, dv, d[3], d[4]};
    bool can = sp_gpu_gdn_chunked_ok(&shape);
    double e_out = 0, e_state = 0;
    if (can) {
        sp_gpu_gdn(be, d[6], d[0], d[1], d[2], &shape, d[5], n, false);
        sp_gpu_gdn(be, d[8], d[0], d[1], d[2], &shape, d[7], n, true);
        float *o1 = malloc(4 * (size_t)outs), *o2 = malloc(4 * (size_t)outs), *S1 = malloc(4 * (size_t)state), *S2 = malloc(4 * (size_t)state);
        be->read(be, o1, d[6], 4 * (uint64_t)outs), be->read(be, o2, d[8], 4 * (uint64_t)outs);
        be->read(be, S1, d[5], 4 * (uint64_t)state), be->read(be, S2, d[7], 4 * (uint64_t)state);
        e_out = rel_err(o2, o1, outs), e_state = rel_err(S2, S1, state);
        free(o1), free(o2), free(S1), free(S2);
    }
    printf("  gdn %d/%d heads, dk %d dv %d, from a random state (nmse of chunked against token by token over %lld tokens: "
           "outputs %.1e, state %.1e%s)\n", Hk, Hv, dk, dv, (long long)n, e_out, e_state,
           !can ? ", no chunked form for this key head dim" : e_out > 1e-10 || e_state > 1e-10 || *be->status ? "  NOT OK" : "");
    *be->status = SPLASH_OK;
    printf("  %8s %18s %18s %8s\n", "tokens", "token by token us", "chunked us", "speedup");
    for (int64_t len = n < 16 ? n : 16;; len = len * 4 < n ? len * 4 : n) {
        gdn_job j = {be, d[6], d[0], d[1], d[2], d[5], shape, len, false};
        double t_tok = timed(be, run_gdn, &j, reps, 0.5), t_chunk = 0;
        if (can) j.chunked = true, t_chunk = timed(be, run_gdn, &j, reps, 0.5);
        printf("  %8lld %18.1f %18.1f %7.1fx%s\n", (long long)len, t_tok * 1e6, t_chunk * 1e6, can ? t_tok / t_chunk : 0,
               *be->status ? "  NOT OK" : "");
        *be->status = SPLASH_OK;
        if (len >= n) break;
    }
    for (int i = 0; i < 9; i++) be->free(be, d[i]);
    free(qkv), free(a), free(b), free(A), free(dt), free(S);
}

int main(int argc, char **argv) {
    const char *model_id = "qwen3.8-27b", *types = "q4,bf16";
    int64_t n = 1024;
    const char *parts = "gemm,attention,gdn,moe", *out = NULL;
    int context = 32768, reps = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model_id = argv[i + 1];
        else if (!strcmp(argv[i], "--types")) types = argv[i + 1];
        else if (!strcmp(argv[i], "--n")) n = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--context")) context = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--parts")) parts = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else {
            fprintf(stderr, "usage: vulkan_prefill_lab [--model qwen3.8-27b|qwen3.6-35b-a3b|tiny] [--types q4,bf16] [--n 1024] "
                            "[--context 32768] [--reps 10] [--parts gemm,attention,gdn,moe] [--out FILE]\n");
            return 2;
        }
    }
    const model *md = NULL;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (!strcmp(MODELS[i].id, model_id)) md = &MODELS[i];
    if (!md || n < 5 || context < n) {
        fprintf(stderr, "vulkan_prefill_lab: unknown model %s, or n < 5, or a context shorter than n\n", model_id);
        return 2;
    }
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    sp_backend be, cpu;
    splash_status st = SPLASH_OK, cst = SPLASH_OK;
    sp_cpu_backend_init(&cpu, pool, sp_threadpool_size(pool), &cst);
    if (sp_vulkan_backend_create(&be, pool, sp_threadpool_size(pool), &st, true)) {
        fprintf(stderr, "vulkan_prefill_lab: %s\n", splash_last_error());
        return 1;
    }
    printf("vulkan_prefill_lab: %s\n", be.device);
    char want[64];
    snprintf(want, sizeof want, ",%s,", parts);
    if (strstr(want, ",gemm,")) gemm(&be, pool, md, types, n, reps, out);
    if (strstr(want, ",attention,") || strstr(want, ",gdn,")) printf("\nattention and GDN, %s, chunks of %lld\n", md->id, (long long)n);
    if (strstr(want, ",attention,"))
        for (int32_t t = SPLASH_KV_F32; t <= SPLASH_KV_INT8; t++) {
            attention(&be, &cpu, md, t, n, 0, reps);
            attention(&be, &cpu, md, t, n, context - (int32_t)n, reps);
        }
    if (strstr(want, ",gdn,")) gdn(&be, md, n, reps);
    if (strstr(want, ",moe,") && md->experts) moe(&be, pool, md, types, n, reps);
    sp_vulkan_backend_destroy(&be);
    sp_threadpool_free(pool);
    return 0;
}
