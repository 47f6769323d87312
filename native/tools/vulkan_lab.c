/* vulkan_lab.c — the lab harness of the Vulkan matmul kernels (STYLE.md §2): every launch choice of the GEMV
 * (workgroup 32/64/128 × row groups 1/2/4/8/16 of at least SP_GPU_GEMV_MIN_LANES invocations × rows per group up to the
 * batch bucket's most) and, for more than 4 x rows, of the GEMM (each compiled tile) on the real matrix shapes of a model, each checked against the exact product, then timed;
 * prints GB/s and the ratio to the device's measured read bandwidth, and the fastest GEMV choices as the "gemv"
 * entries of models/<id>/vulkan.json.
 * Each product is timed as a decode step runs it: one after another, each waiting on the one before, over copies of the
 * matrix (≥ 256 MB together, at most 16) so that its weights come from memory, not from a cache holding the whole
 * matrix, at least --reps of them and ≥ 2 ms of them (a submission's own latency is then a small share); and with the
 * kernel the op picks in a decode step — for one x row whose x no norm quantized (o_proj, out_proj, down: x written by
 * another kernel) the float GEMV, or the integer-dot one after quantizing x where the matrix is large enough
 * (gpu->int_dot_min_bytes), so that the tuning written is measured on the kernel it tunes.
 *
 *   build/tools/vulkan_lab [--model qwen3.8-27b,qwen3.6-35b-a3b|tiny] [--types q4,bf16] [--n 1,4,16] [--reps 20]
 *                          [--out FILE]
 *
 * --n: the x row counts to measure (each ≤ 16 is a GEMV batch bucket: 1, 4, 16). --out writes the fastest GEMV
 * launches as a tuning file (the schema of models/<id>/vulkan.json) that the backend reads when SPLASH_VULKAN_TUNING
 * names it: the benchmarks of the same run use them.
 *
 * Versions: matmul.comp (GEMV; NMAX 1, 4, 16 by batch bucket; Q4 and Q8 on integer dot products where the device
 * has them, SPLASH_VULKAN_INT_DOT=0 for the float GEMV) and matmul_tiled.comp (GEMM) — see
 * kernels/generate.ts. The weights are random but valid (small finite scales), uploaded once per shape. */
#include "backends/cpu/matmul_kernels.h"
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

/* x [n][cols] in place as the integer-dot GEMV sees it: int8 per group of 32 (the CPU's quantizer), dequantized. */
static void int8_rows(float *x, int64_t cols, int n) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    int8_t *q = malloc((size_t)(nb * SP_QK));
    float *d = malloc(sizeof(float) * (size_t)nb), *s = malloc(sizeof(float) * (size_t)nb);
    int32_t *sum = malloc(sizeof(int32_t) * (size_t)nb);
    for (int j = 0; j < n; j++) {
        sp_quantize_act_ref(x + j * cols, cols, q, d, s, sum);
        for (int64_t c = 0; c < cols; c++) x[j * cols + c] = (float)q[c] * d[c / SP_QK];
    }
    free(q), free(d), free(s), free(sum);
}

typedef struct mshape {
    const char *name;
    int64_t rows, cols;
    bool normed; /* its x comes from a norm, which also writes it quantized for the integer-dot GEMV */
} mshape;

/* The matrices a decode step multiplies (experts run through the MoE kernels and are not here). */
static const mshape M27[] = {{"q_proj", 12288, 5120, true}, {"k_proj", 1024, 5120, true}, {"o_proj", 5120, 6144, false},
                             {"in_proj_qkv", 10240, 5120, true}, {"in_proj_z", 6144, 5120, true}, {"in_proj_a", 48, 5120, true},
                             {"out_proj", 5120, 6144, false}, {"gate_proj", 17408, 5120, true}, {"down_proj", 5120, 17408, false},
                             {"lm_head", 248320, 5120, true}};
static const mshape M35[] = {{"q_proj", 8192, 2048, true}, {"k_proj", 512, 2048, true}, {"o_proj", 2048, 4096, false},
                             {"in_proj_qkv", 8192, 2048, true}, {"in_proj_z", 4096, 2048, true}, {"in_proj_a", 32, 2048, true},
                             {"out_proj", 2048, 4096, false}, {"shared_gate", 512, 2048, true}, {"shared_down", 2048, 512, false},
                             {"lm_head", 248320, 2048, true}};
static const mshape MTINY[] = {{"proj", 384, 256, true}, {"down", 256, 512, false}, {"head", 4096, 256, true}};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static const char *TYPES[] = {"f32", "bf16", "f16", "q8", "q4"};

/* Microseconds per product y = x · Wᵀ with launch l (NULL: the op's choice), the products chained as in a decode step
 * over the copies W[0 .. copies − 1], at least `reps` of them and at least 2 ms of them. stale_x: each product finds x
 * written by a kernel since the last (not quantized: a norm did not make it). */
static double time_products(sp_backend *be, float *dy, const sp_matrix *W, int copies, float *dx, int n, const sp_gpu_mm_launch *l,
                            int reps, bool stale_x) {
    sp_gpu *g = sp_gpu_of(be);
    sp_gpu_range x = sp_gpu_span(g, dx, 4 * (uint64_t)(n * W->cols));
    for (;;) {
        double t0 = now();
        for (int r = 0; r < reps; r++) {
            if (stale_x) sp_gpu_wrote(g, x);
            sp_gpu_matmul_launch(be, dy, &W[r % copies], dx, n, l);
        }
        sp_gpu_finish(be);
        double s = now() - t0;
        if (s >= 2e-3 || reps >= 1 << 20) return s / reps * 1e6;
        reps = (int)(reps * (2.5e-3 / (s > 1e-6 ? s : 1e-6))) + 1;
    }
}

typedef struct gen_job {
    uint8_t *data;
    sp_mtype type;
    int64_t row_bytes, cols;
} gen_job;

/* Random valid rows: finite bf16/f16/f32 values of a few units of 1e-2, quants with small finite scales. */
static void gen_rows(void *ctx, int64_t r0, int64_t r1, int thread) {
    const gen_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *row = j->data + r * j->row_bytes;
        uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(r + 1);
        for (int64_t b = 0; b < j->row_bytes; b += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(row + b, &x, (size_t)(j->row_bytes - b < 8 ? j->row_bytes - b : 8));
        }
        int64_t nb = (j->cols + SP_QK - 1) / SP_QK;
        uint16_t *h = (uint16_t *)row;
        switch (j->type) {
        case SP_MAT_F32:
            for (int64_t c = 0; c < j->cols; c++) ((uint32_t *)row)[c] = (((uint32_t *)row)[c] & 0x807fffffu) | 0x3c000000u;
            break;
        case SP_MAT_BF16: for (int64_t c = 0; c < j->cols; c++) h[c] = (uint16_t)((h[c] & 0x807f) | 0x3c00); break;
        case SP_MAT_F16: for (int64_t c = 0; c < j->cols; c++) h[c] = (uint16_t)((h[c] & 0x83ff) | 0x2000); break;
        case SP_MAT_Q8: {
            for (int64_t c = 0; c < nb * SP_QK; c++) row[c] = (uint8_t)(int8_t)((int)(row[c] % 255) - 127);
            uint16_t *d = (uint16_t *)(row + nb * SP_QK);
            for (int64_t g = 0; g < nb; g++) d[g] = sp_f32_to_f16(1e-3f * (float)(1 + g % 7));
            break;
        }
        default: {
            uint16_t *d = (uint16_t *)(row + (nb + 1) / 2 * SP_QK);
            for (int64_t g = 0; g < nb; g++) d[g] = sp_f32_to_f16(2e-3f * (float)(1 + g % 5)), d[nb + g] = sp_f32_to_f16(-0.01f);
        }
        }
    }
}

int main(int argc, char **argv) {
    const char *models = "qwen3.8-27b", *types = "q4,bf16", *out = NULL, *ns = "1";
    int reps = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) models = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out = argv[i + 1];
        else if (!strcmp(argv[i], "--types")) types = argv[i + 1];
        else if (!strcmp(argv[i], "--n")) ns = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    }
    char list[256];
    snprintf(list, sizeof list, ",%s,", types);
    sp_threadpool *pool;
    if (sp_threadpool_create(0, &pool)) return 1;
    sp_backend be;
    splash_status st = SPLASH_OK;
    if (sp_vulkan_backend_create(&be, pool, sp_threadpool_size(pool), &st, true)) {
        fprintf(stderr, "vulkan_lab: %s\n", splash_last_error());
        return 1;
    }
    sp_gpu *g = sp_gpu_of(&be);
    uint64_t int_dot_min_bytes = g->int_dot_min_bytes; /* a batch-1 GEMV of x no norm quantized: the backend's rule */
    double bw = 0;
    bool small = !strcmp(models, "tiny");
    sp_gpu_read_bandwidth(&be, small ? 16 << 20 : 2ull << 30, small ? 2 : 8, 3, &bw);
    static char json[1 << 16];
    int jl = 0;
    char mlist[256];
    snprintf(mlist, sizeof mlist, "%s", models);
    int n_list[8], n_count = 0;
    for (const char *q = ns; *q && n_count < 8; q = strchr(q, ',') ? strchr(q, ',') + 1 : "") n_list[n_count++] = atoi(q);
    char *model_save = NULL;
    for (char *model = strtok_r(mlist, ",", &model_save); model; model = strtok_r(NULL, ",", &model_save)) {
        const mshape *shapes = !strcmp(model, "qwen3.6-35b-a3b") ? M35 : !strcmp(model, "tiny") ? MTINY : M27;
        size_t n_shapes = shapes == M35 ? sizeof M35 / sizeof M35[0] : shapes == MTINY ? sizeof MTINY / sizeof MTINY[0] : sizeof M27 / sizeof M27[0];
        printf("vulkan_lab: %s, %s, n = %s; read bandwidth %.1f GB/s\n", sp_vulkan_device_name(&be), model, ns, bw);
        printf("  %-12s %-5s %-3s %-18s %10s %9s %7s %10s\n", "matrix", "type", "n", "launch", "us", "GB/s", "of bw", "nmse");
        for (sp_mtype t = 0; t <= SP_MAT_Q4; t++) { /* the types the kernels decode */
            char want[64];
            snprintf(want, sizeof want, ",%s,", TYPES[t]);
            if (!strstr(list, want)) continue;
            for (size_t s = 0; s < n_shapes; s++) {
                const mshape *m = &shapes[s];
                int64_t rb = sp_mtype_row_bytes(t, m->cols);
                uint8_t *host = malloc((size_t)(m->rows * rb));
                gen_job gj = {host, t, rb, m->cols};
                sp_parallel_for(pool, m->rows, gen_rows, &gj);
                sp_matrix W[16] = {{t, m->rows, m->cols, NULL, rb}};
                int copies = (int)(((256ll << 20) + m->rows * rb - 1) / (m->rows * rb));
                copies = copies > 16 ? 16 : copies;
                for (int k = 0; k < copies; k++) W[k] = W[0], W[k].data = be.upload(&be, host, m->rows, rb);
                uint64_t wa;
                uint32_t stride;
                sp_gpu_weights(g, &W[0], &wa, &stride);
                for (int ni = 0; ni < n_count; ni++) {
                int n = n_list[ni];
                if (n < 1 || n > 64) continue;
                float *x = malloc(sizeof(float) * (size_t)(n * m->cols)), *y = malloc(sizeof(float) * (size_t)(n * m->rows));
                for (int64_t i = 0; i < n * m->cols; i++) x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
                float *dx = be.alloc(&be, 4 * (uint64_t)(n * m->cols)), *dy = be.alloc(&be, 4 * (uint64_t)(n * m->rows));
                be.write(&be, dx, x, 4 * (uint64_t)(n * m->cols));
                /* reference rows: the first 64, exact (double) over the dequantized weights and x as the kernel
                 * takes it: f32 (ref), int8 per group of 32 (ref8: the integer-dot GEMV, where it runs: ops_matmul.c's
                 * int_dot for x that a norm quantized, or not) */
                int64_t check_rows = m->rows < 64 ? m->rows : 64;
                bool stale_x = n == 1 && !m->normed;
                g->int_dot_min_bytes = stale_x ? int_dot_min_bytes : 0;
                bool dot = n <= 16 && !g->no_int_dot && (t == SP_MAT_Q4 || t == SP_MAT_Q8) &&
                           (!stale_x || (uint64_t)m->rows * stride >= int_dot_min_bytes);
                double *ref = calloc((size_t)(n * check_rows), sizeof(double)), *ref8 = calloc((size_t)(n * check_rows), sizeof(double));
                float *row = malloc(sizeof(float) * (size_t)m->cols), *x8 = malloc(sizeof(float) * (size_t)(n * m->cols));
                memcpy(x8, x, sizeof(float) * (size_t)(n * m->cols));
                if (dot) int8_rows(x8, m->cols, n);
                for (int64_t r = 0; r < check_rows; r++) {
                    sp_matrix hw = W[0];
                    hw.data = host;
                    sp_matrix_row_f32(&hw, r, row);
                    for (int j = 0; j < n; j++)
                        for (int64_t c = 0; c < m->cols; c++) {
                            ref[j * check_rows + r] += (double)row[c] * x[j * m->cols + c];
                            ref8[j * check_rows + r] += (double)row[c] * x8[j * m->cols + c];
                        }
                }
                sp_gpu_mm_launch launches[64];
                int nl = 0, n_gemv = 0, bucket = sp_gpu_gemv_bucket(n);
                if (n <= 16) { /* workgroup × row groups (≥ 32 invocations each) × rows per group */
                    uint32_t wgs[3] = {32, 64, 128}, gs[5] = {1, 2, 4, 8, 16}, rows[4] = {1, 2, 4, 8};
                    for (int a = 0; a < 3; a++)
                        for (int k = 0; k < 5 && wgs[a] / gs[k] >= SP_GPU_GEMV_MIN_LANES; k++)
                            for (int b = 0; b < 4 && rows[b] <= (uint32_t)sp_gpu_gemv_max_rows(bucket, 1); b++)
                                launches[nl++] = (sp_gpu_mm_launch){.workgroup = wgs[a], .groups = gs[k], .rows = rows[b]};
                    n_gemv = nl;
                }
                if (n > 4)
                    for (int k = 0; k < SP_GPU_TILE_COUNT && nl < 64; k++) launches[nl++] = (sp_gpu_mm_launch){.tile = k};
                double best = 1e30;
                int best_l = 0;
                /* warm-up: the host's work since the last case left the GPU idle, and its clocks take a few hundred
                 * ms to come back (the first shapes of a run read up to 3x slower without it) */
                for (double t0 = now(); nl && now() - t0 < 0.3;) time_products(&be, dy, W, copies, dx, n, &launches[0], copies, stale_x);
                for (int l = 0; l < nl; l++) {
                    if (stale_x) sp_gpu_wrote(g, sp_gpu_span(g, dx, 4 * (uint64_t)(n * m->cols)));
                    sp_gpu_matmul_launch(&be, dy, &W[0], dx, n, &launches[l]);
                    be.read(&be, y, dy, 4 * (uint64_t)(n * m->rows));
                    double e = 0, sref = 0;
                    const double *want = launches[l].workgroup && dot ? ref8 : ref;
                    for (int j = 0; j < n; j++)
                        for (int64_t r = 0; r < check_rows; r++) {
                            double d = y[j * m->rows + r] - want[j * check_rows + r];
                            e += d * d, sref += want[j * check_rows + r] * want[j * check_rows + r];
                        }
                    double us = time_products(&be, dy, W, copies, dx, n, &launches[l], reps, stale_x);
                    double gbs = (double)(m->rows * rb) / (us * 1e3);
                    char name[32];
                    if (launches[l].workgroup)
                        snprintf(name, sizeof name, "wg%u/g%u/r%u", launches[l].workgroup, launches[l].groups, launches[l].rows);
                    else snprintf(name, sizeof name, "tile%dx%d", sp_gpu_tiles[launches[l].tile].bm, sp_gpu_tiles[launches[l].tile].bn);
                    printf("  %-12s %-5s %-3d %-18s %10.1f %9.1f %6.0f%% %10.1e%s\n", m->name, TYPES[t], n, name, us, gbs, 100 * gbs / bw,
                           sref > 0 ? e / sref : e, e / (sref > 0 ? sref : 1) > 1e-8 ? "  NOT OK" : "");
                    if (l < n_gemv && us < best) best = us, best_l = l;
                }
                { /* what the op chooses by itself (GEMV, or the matrix units' GEMM split over the columns) */
                    if (stale_x) sp_gpu_wrote(g, sp_gpu_span(g, dx, 4 * (uint64_t)(n * m->cols)));
                    sp_gpu_matmul_launch(&be, dy, &W[0], dx, n, NULL);
                    be.read(&be, y, dy, 4 * (uint64_t)(n * m->rows));
                    double e = 0, sref = 0;
                    for (int j = 0; j < n; j++)
                        for (int64_t r = 0; r < check_rows; r++) {
                            double d = y[j * m->rows + r] - ref[j * check_rows + r];
                            e += d * d, sref += ref[j * check_rows + r] * ref[j * check_rows + r];
                        }
                    double us = time_products(&be, dy, W, copies, dx, n, NULL, reps, stale_x);
                    double gbs = (double)(m->rows * rb) / (us * 1e3);
                    printf("  %-12s %-5s %-3d %-18s %10.1f %9.1f %6.0f%% %10.1e%s\n", m->name, TYPES[t], n, "(the op's choice)", us, gbs,
                           100 * gbs / bw, sref > 0 ? e / sref : e, e / (sref > 0 ? sref : 1) > 1e-4 ? "  NOT OK" : ""); /* int8 or f16 x */
                }
                if (n_gemv)
                    jl += snprintf(json + jl, sizeof json - (size_t)jl, "%s    {\"type\": \"%s\", \"rows\": %lld, \"cols\": %lld, \"batch\": %d, "
                                   "\"workgroup\": %u, \"groups\": %u, \"rowsPerGroup\": %u}", jl ? ",\n" : "", TYPES[t], (long long)m->rows,
                                   (long long)m->cols, sp_gpu_gemv_batch[bucket], launches[best_l].workgroup, launches[best_l].groups,
                                   launches[best_l].rows);
                be.free(&be, dx), be.free(&be, dy);
                free(x), free(y), free(ref), free(ref8), free(row), free(x8);
                /* every launch is a pipeline of its own: drop this case's, or a long run fills the backend's cache */
                if (sp_gpu_sync(g) || *g->status) {
                    fprintf(stderr, "vulkan_lab: %s\n", splash_last_error());
                    return 1;
                }
                sp_gpu_pipelines_free(g);
                }
                free(host);
            }
        }
    }
    printf("\"gemv\" of models/<id>/vulkan.json (fastest per shape on %s):\n[\n%s\n]\n", sp_vulkan_device_name(&be), json);
    if (out) {
        FILE *f = fopen(out, "w");
        time_t tt = time(NULL);
        char date[32];
        strftime(date, sizeof date, "%Y-%m-%d", gmtime(&tt));
        if (f) {
            fprintf(f, "{\n  \"measured\": {\"device\": \"%s\", \"date\": \"%s\", \"command\": \"build/tools/vulkan_lab --model %s --types %s --n %s\"},\n"
                    "  \"gemv\": [\n%s\n  ]\n}\n", sp_vulkan_device_name(&be), date, models, types, ns, json);
            fclose(f);
        }
    }
    sp_vulkan_backend_destroy(&be);
    sp_threadpool_free(pool);
    return 0;
}
