/* vulkan_attention_cases.h — vulkan_ops_test's attention cases: kv_write and attention against the CPU backend, and
 * the matrix of decode and verify-block shapes attention.comp's split kernel serves (vulkan_ops_test --attention runs
 * the whole matrix; the default run a diagonal of it). Included by vulkan_ops_test.c only, after backend_test.h. */
#ifndef SP_VULKAN_ATTENTION_CASES_H
#define SP_VULKAN_ATTENTION_CASES_H

#include "backend_test.h"
#include "backends/gpu/gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* n new rows after n_past cached ones for one sequence whose pages are scattered (every other page, reversed), in a
 * cache of rows of kv_type (SPLASH_KV_*), with the output gate as the gated attention takes it or without. Both
 * backends read the same stored values, so the tolerance is the f32 one; the rows kv_write stores must be the CPU's
 * bit for bit. */
static void test_attention_gated(int32_t kv_type, int32_t Hq, int32_t Hkv, int32_t hd, int32_t n_past, int64_t n, int32_t P,
                                 bool gated) {
    int32_t total = n_past + (int32_t)n, n_pages = (total + P - 1) / P, cache_pages = 2 * n_pages + 1;
    int64_t row_bytes = sp_kv_row_bytes(kv_type, hd), page_rows = 2 * (int64_t)Hkv * P; /* one layer: K then V */
    uint64_t cache_bytes = (uint64_t)(page_rows * row_bytes * cache_pages);
    int32_t *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = cache_pages - 1 - 2 * i;
    float *old = randoms(page_rows * cache_pages * hd, -1, 1); /* old positions: random keys and values */
    uint8_t *kv = malloc(cache_bytes);
    for (int64_t r = 0; r < page_rows * cache_pages; r++) sp_kv_from_f32(&cpu, kv_type, old + r * hd, hd, kv + r * row_bytes);
    float *q = randoms(n * Hq * hd, -1, 1), *k = randoms(n * Hkv * hd, -1, 1), *v = randoms(n * Hkv * hd, -1, 1);
    float *gate = gated ? randoms(n * Hq * hd, -6, 6) : NULL, *dgate = gated ? to_gpu(gate, 4 * (uint64_t)(n * Hq * hd)) : NULL;
    uint8_t *dkv = to_gpu(kv, cache_bytes);
    float *dq = to_gpu(q, 4 * (uint64_t)(n * Hq * hd)), *dk = to_gpu(k, 4 * (uint64_t)(n * Hkv * hd));
    float *dv = to_gpu(v, 4 * (uint64_t)(n * Hkv * hd)), *dout = to_gpu(NULL, 4 * (uint64_t)(n * Hq * hd));
    int64_t half = page_rows / 2 * row_bytes, stride = page_rows * row_bytes;
    sp_kv_view hv = {kv, kv + half, stride, pages, P, kv_type}, dvw = {dkv, dkv + half, stride, pages, P, kv_type};
    float *want = malloc(4 * (size_t)(n * Hq * hd));
    double t0 = now();
    gpu.kv_write(&gpu, &dvw, dk, dv, n_past, n, Hkv, hd);
    gpu.attention(&gpu, dout, dq, dgate, &(sp_attn_seq){dvw, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, 1.0f / sqrtf((float)hd));
    float *got = from_gpu(dout, n * Hq * hd);
    double ms = (now() - t0) * 1e3;
    cpu.kv_write(&cpu, &hv, k, v, n_past, n, Hkv, hd);
    cpu.attention(&cpu, want, q, gate, &(sp_attn_seq){hv, 0, n_past, (int32_t)n}, 1, Hq, Hkv, hd, 1.0f / sqrtf((float)hd));
    char what[192];
    const char *type = kv_type == SPLASH_KV_F16 ? ", f16 KV" : kv_type == SPLASH_KV_INT8 ? ", int8 KV" : "";
    bool flash = sp_gpu_flash_attention(sp_gpu_of(&gpu), kv_type, hd, n);
    snprintf(what, sizeof what, "attention %d/%d heads x %d, %d past + %lld new, pages of %d%s%s%s (%.0f ms)", Hq, Hkv, hd, n_past,
             (long long)n, P, type, gated ? "" : ", no gate", flash ? " (f16 matrix units)" : "", ms);
    expect(what, nmse(got, want, n * Hq * hd), flash ? 1e-4 : 1e-10);
    uint8_t *kv_got = (uint8_t *)from_gpu(dkv, (int64_t)(cache_bytes / 4));
    snprintf(what, sizeof what, "kv_write %d heads x %d, positions %d..%lld%s", Hkv, hd, n_past, (long long)(n_past + n - 1), type);
    expect(what, memcmp(kv_got, kv, cache_bytes) ? 1 : 0, 0);
    gpu.free(&gpu, dkv), gpu.free(&gpu, dq), gpu.free(&gpu, dk), gpu.free(&gpu, dv), gpu.free(&gpu, dout);
    if (dgate) gpu.free(&gpu, dgate);
    free(pages), free(old), free(kv), free(q), free(k), free(v), free(want), free(got), free(kv_got), free(gate);
}

static void test_attention(int32_t kv_type, int32_t Hq, int32_t Hkv, int32_t hd, int32_t n_past, int64_t n, int32_t P) {
    test_attention_gated(kv_type, Hq, Hkv, hd, n_past, n, P, true);
}

/* A step's sequences in one call, as a decode step of several streams makes it: decode rows and verify blocks at
 * different lengths over one cache, each sequence with its own scattered pages and its rows after the one before's,
 * against the CPU's attention of each alone. A call records at most two barriers (every sequence's ATTEND at once,
 * then every REDUCE): the sequences must not wait for each other. */
static void test_attention_step(int32_t kv_type) {
    enum { S = 4, Hq = 12, Hkv = 2, HD = 128, P = 16 };
    static const int32_t PAST[S] = {1000, 33, 5000, 200}, ROWS[S] = {1, 8, 1, 2};
    int32_t first[S + 1] = {0}, n_pages = 0;
    int64_t row0[S + 1] = {0};
    for (int s = 0; s < S; s++) {
        first[s + 1] = first[s] + (PAST[s] + ROWS[s] + P - 1) / P;
        row0[s + 1] = row0[s] + ROWS[s];
    }
    n_pages = first[S];
    int32_t cache_pages = 2 * n_pages + 1, *pages = malloc(sizeof(int32_t) * (size_t)n_pages);
    for (int32_t i = 0; i < n_pages; i++) pages[i] = cache_pages - 1 - 2 * i; /* every other page, backwards */
    int64_t row_bytes = sp_kv_row_bytes(kv_type, HD), page_rows = 2 * (int64_t)Hkv * P, R = row0[S];
    uint64_t cache_bytes = (uint64_t)(page_rows * row_bytes * cache_pages);
    float *old = randoms(page_rows * cache_pages * HD, -1, 1);
    uint8_t *kv = malloc(cache_bytes);
    for (int64_t r = 0; r < page_rows * cache_pages; r++) sp_kv_from_f32(&cpu, kv_type, old + r * HD, HD, kv + r * row_bytes);
    float *q = randoms(R * Hq * HD, -1, 1), *k = randoms(R * Hkv * HD, -1, 1), *v = randoms(R * Hkv * HD, -1, 1);
    float *gate = randoms(R * Hq * HD, -6, 6), *want = malloc(4 * (size_t)(R * Hq * HD));
    uint8_t *dkv = to_gpu(kv, cache_bytes);
    float *dq = to_gpu(q, 4 * (uint64_t)(R * Hq * HD)), *dk = to_gpu(k, 4 * (uint64_t)(R * Hkv * HD)), *dv = to_gpu(v, 4 * (uint64_t)(R * Hkv * HD));
    float *dgate = to_gpu(gate, 4 * (uint64_t)(R * Hq * HD)), *dout = to_gpu(NULL, 4 * (uint64_t)(R * Hq * HD));
    int64_t half = page_rows / 2 * row_bytes, stride = page_rows * row_bytes;
    sp_attn_seq dseqs[S];
    for (int s = 0; s < S; s++) {
        sp_kv_view hv = {kv, kv + half, stride, pages + first[s], P, kv_type}, dvw = {dkv, dkv + half, stride, pages + first[s], P, kv_type};
        gpu.kv_write(&gpu, &dvw, dk + row0[s] * Hkv * HD, dv + row0[s] * Hkv * HD, PAST[s], ROWS[s], Hkv, HD);
        cpu.kv_write(&cpu, &hv, k + row0[s] * Hkv * HD, v + row0[s] * Hkv * HD, PAST[s], ROWS[s], Hkv, HD);
        dseqs[s] = (sp_attn_seq){dvw, row0[s], PAST[s], ROWS[s]};
        int64_t at = row0[s] * Hq * HD;
        cpu.attention(&cpu, want + at, q + at, gate + at, &(sp_attn_seq){hv, 0, PAST[s], ROWS[s]}, 1, Hq, Hkv, HD, 1.0f / sqrtf((float)HD));
    }
    const sp_gpu *g = sp_gpu_of(&gpu);
    /* the second call counted: the first may grow the partials buffer, whose sync stages the page tables again */
    gpu.attention(&gpu, dout, dq, dgate, dseqs, S, Hq, Hkv, HD, 1.0f / sqrtf((float)HD));
    uint64_t b0 = g->n_barriers;
    gpu.attention(&gpu, dout, dq, dgate, dseqs, S, Hq, Hkv, HD, 1.0f / sqrtf((float)HD));
    uint64_t barriers = g->n_barriers - b0;
    float *got = from_gpu(dout, R * Hq * HD);
    char what[192];
    const char *type = kv_type == SPLASH_KV_F16 ? ", f16 KV" : kv_type == SPLASH_KV_INT8 ? ", int8 KV" : "";
    snprintf(what, sizeof what, "attention of %d sequences in one call (1000+1, 33+8, 5000+1, 200+2)%s", S, type);
    expect(what, nmse(got, want, R * Hq * HD), 1e-10);
    snprintf(what, sizeof what, "attention of %d sequences in one call: %llu barriers (at most 2)", S, (unsigned long long)barriers);
    expect(what, barriers <= 2 ? 0 : 1, 0);
    gpu.free(&gpu, dkv), gpu.free(&gpu, dq), gpu.free(&gpu, dk), gpu.free(&gpu, dv), gpu.free(&gpu, dgate), gpu.free(&gpu, dout);
    free(pages), free(old), free(kv), free(q), free(k), free(v), free(gate), free(want), free(got);
}

/* Decode and verify blocks: 1, 2, 8, 16 rows after n_past 0, 1, 31, 32, 33 (a page, a tile, a chunk's edges), 1000 and
 * 5000 (split over workgroups, several chunks per split), every KV type at head dims 64, 128, 256, with groups of 6
 * and 8 query heads per kv head (the 27B's, the 35B-A3B's), gated and not, pages of 16 and 64 tokens. `all`: every
 * combination of type, head dim, rows and n_past (the last three alternate with them); else the diagonal, each
 * n_past, row count, head dim and type at least once. */
static void test_attention_decode(bool all) {
    static const int32_t PAST[] = {0, 1, 31, 32, 33, 1000, 5000}, ROWS[] = {1, 2, 8, 16}, HD[] = {64, 128, 256};
    static const int32_t TYPES[] = {SPLASH_KV_F32, SPLASH_KV_F16, SPLASH_KV_INT8};
    int i = 0;
    for (int t = 0; t < 3; t++)
        for (int h = 0; h < 3; h++)
            for (int r = 0; r < 4; r++)
                for (int p = 0; p < 7; p++, i++) {
                    if (!all && (p + r + h + t) % 7 != 0) continue;
                    int32_t G = i % 2 ? 8 : 6, Hkv = i % 3 ? 1 : 2, P = i % 4 < 2 ? 16 : 64;
                    test_attention_gated(TYPES[t], G * Hkv, Hkv, HD[h], PAST[p], ROWS[r], P, i % 5 != 0);
                }
}

#endif
