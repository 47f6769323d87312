/* vulkan_gdn_cases.h — vulkan_ops_test's Gated DeltaNet cases: the conv, the delta rule token by token and in chunks
 * (and which of the two gdn_recurrent takes), and the fused core, each against the CPU backend. Included by
 * vulkan_ops_test.c only, after backend_test.h (the backends, the helpers). */
#ifndef SP_VULKAN_GDN_CASES_H
#define SP_VULKAN_GDN_CASES_H

#include "backend_test.h"
#include "backends/gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

static void test_conv(int64_t C, int32_t K, int64_t n1, int64_t n2) {
    float *x = randoms((n1 + n2) * C, -2, 2), *w = randoms(C * K, -1, 1), *tail = randoms((K - 1) * C, -2, 2);
    float *dx = to_gpu(x, 4 * (uint64_t)((n1 + n2) * C)), *dw = to_gpu(w, 4 * (uint64_t)(C * K));
    float *dtail = to_gpu(tail, 4 * (uint64_t)((K - 1) * C)), *dy = to_gpu(NULL, 4 * (uint64_t)((n1 + n2) * C));
    float *want = malloc(4 * (size_t)((n1 + n2) * C));
    /* two calls: the tail carries over */
    gpu.conv_silu(&gpu, dy, dx, n1, C, dw, K, dtail);
    gpu.conv_silu(&gpu, dy + n1 * C, dx + n1 * C, n2, C, dw, K, dtail);
    cpu.conv_silu(&cpu, want, x, n1, C, w, K, tail);
    cpu.conv_silu(&cpu, want + n1 * C, x + n1 * C, n2, C, w, K, tail);
    float *got = from_gpu(dy, (n1 + n2) * C), *got_tail = from_gpu(dtail, (K - 1) * C);
    char what[128];
    snprintf(what, sizeof what, "conv_silu %lld channels, K=%d, %lld + %lld rows", (long long)C, K, (long long)n1, (long long)n2);
    expect(what, nmse(got, want, (n1 + n2) * C), 1e-12);
    expect("conv_silu tail after both calls", nmse(got_tail, tail, (K - 1) * C), 0);
    gpu.free(&gpu, dx), gpu.free(&gpu, dw), gpu.free(&gpu, dtail), gpu.free(&gpu, dy);
    free(x), free(w), free(tail), free(want), free(got), free(got_tail);
}

/* The GPU's token loop (gdn.comp) and chunked form (gdn_chunked.comp: chunks of 64, the last one partial) against the
 * CPU's token loop, from a non-zero state. */
static void test_gdn(int32_t Hk, int32_t Hv, int32_t dk, int32_t dv, int64_t n, bool chunked) {
    int64_t W = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, state = (int64_t)Hv * dk * dv;
    float *qkv = randoms(n * W, -1, 1), *a = randoms(n * Hv, -6, 3), *b = randoms(n * Hv, -4, 4);
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *S = randoms(state, -0.1f, 0.1f);
    float *want = malloc(4 * (size_t)(n * Hv * dv));
    float *dqkv = to_gpu(qkv, 4 * (uint64_t)(n * W)), *da = to_gpu(a, 4 * (uint64_t)(n * Hv)), *db = to_gpu(b, 4 * (uint64_t)(n * Hv));
    float *dA = to_gpu(A, 4 * (uint64_t)Hv), *ddt = to_gpu(dt, 4 * (uint64_t)Hv), *dS = to_gpu(S, 4 * (uint64_t)state);
    float *dout = to_gpu(NULL, 4 * (uint64_t)(n * Hv * dv));
    sp_gdn_shape hs = {Hk, Hv, dk, dv, A, dt}, ds = {Hk, Hv, dk, dv, dA, ddt};
    double t0 = now();
    sp_gpu_gdn(&gpu, dout, dqkv, da, db, &ds, dS, n, chunked);
    float *got = from_gpu(dout, n * Hv * dv);
    double ms = (now() - t0) * 1e3;
    cpu.gdn_recurrent(&cpu, want, qkv, a, b, &hs, S, n);
    float *got_S = from_gpu(dS, state);
    char what[160];
    const char *form = chunked ? "chunked" : "by token";
    snprintf(what, sizeof what, "gdn %s %d/%d heads, dk %d dv %d, %lld tokens (%.0f ms)", form, Hk, Hv, dk, dv, (long long)n, ms);
    expect(what, nmse(got, want, n * Hv * dv), 1e-10);
    snprintf(what, sizeof what, "gdn %s state after %lld tokens", form, (long long)n);
    expect(what, nmse(got_S, S, state), 1e-10);
    gpu.free(&gpu, dqkv), gpu.free(&gpu, da), gpu.free(&gpu, db), gpu.free(&gpu, dA), gpu.free(&gpu, ddt), gpu.free(&gpu, dS);
    gpu.free(&gpu, dout);
    free(qkv), free(a), free(b), free(A), free(dt), free(S), free(want), free(got), free(got_S);
}

/* gdn_recurrent runs the token loop below 256 tokens (decode, verify blocks, short prompts) and the chunked form from
 * 256: each gives what that form gives, bit for bit. */
static void test_gdn_choice(void) {
    int32_t Hk = 1, Hv = 2, dk = 16, dv = 8;
    int64_t W = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, state = (int64_t)Hv * dk * dv;
    for (int c = 0; c < 2; c++) {
        int64_t n = c ? 256 : 255;
        float *qkv = randoms(n * W, -1, 1), *a = randoms(n * Hv, -6, 3), *b = randoms(n * Hv, -4, 4);
        float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *S = randoms(state, -0.1f, 0.1f);
        float *dqkv = to_gpu(qkv, 4 * (uint64_t)(n * W)), *da = to_gpu(a, 4 * (uint64_t)(n * Hv)), *db = to_gpu(b, 4 * (uint64_t)(n * Hv));
        float *dA = to_gpu(A, 4 * (uint64_t)Hv), *ddt = to_gpu(dt, 4 * (uint64_t)Hv);
        float *dS[2] = {to_gpu(S, 4 * (uint64_t)state), to_gpu(S, 4 * (uint64_t)state)};
        float *dout[2] = {to_gpu(NULL, 4 * (uint64_t)(n * Hv * dv)), to_gpu(NULL, 4 * (uint64_t)(n * Hv * dv))};
        sp_gdn_shape ds = {Hk, Hv, dk, dv, dA, ddt};
        gpu.gdn_recurrent(&gpu, dout[0], dqkv, da, db, &ds, dS[0], n);
        sp_gpu_gdn(&gpu, dout[1], dqkv, da, db, &ds, dS[1], n, c == 1);
        float *o[2] = {from_gpu(dout[0], n * Hv * dv), from_gpu(dout[1], n * Hv * dv)};
        float *s[2] = {from_gpu(dS[0], state), from_gpu(dS[1], state)};
        char what[96];
        snprintf(what, sizeof what, "gdn_recurrent of %lld tokens is the %s form", (long long)n, c ? "chunked" : "token");
        bool same = !memcmp(o[0], o[1], 4 * (size_t)(n * Hv * dv)) && !memcmp(s[0], s[1], 4 * (size_t)state);
        expect(what, same ? 0 : nmse(o[0], o[1], n * Hv * dv) + 1e-30, 0);
        for (int i = 0; i < 2; i++) gpu.free(&gpu, dS[i]), gpu.free(&gpu, dout[i]), free(o[i]), free(s[i]);
        gpu.free(&gpu, dqkv), gpu.free(&gpu, da), gpu.free(&gpu, db), gpu.free(&gpu, dA), gpu.free(&gpu, ddt);
        free(qkv), free(a), free(b), free(A), free(dt), free(S);
    }
}

/* The mixer core (conv, delta rule, gated norm; z = NULL: no norm) of two sequences, both in each of two calls, of n1
 * and then n2 rows (conv tails and states carry over; a call takes both sequences, as a step of several streams does,
 * their rows in one array each), against the CPU's and against the separate GPU ops; `dispatches`: what one sequence
 * must record (1 or 2: the fused kernel, and the q/k tails where several v heads share a k head; 3: the separate
 * kernels). */
static void test_gdn_core(int32_t Hk, int32_t Hv, int32_t dk, int32_t dv, int32_t K, int64_t n1, int64_t n2, bool normed,
                          uint64_t dispatches) {
    int64_t W = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, n = n1 + n2, O = (int64_t)Hv * dv, state = (int64_t)Hv * dk * dv;
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *cw = randoms(W * K, -0.8f, 0.8f), *nw = randoms(dv, 0.5f, 1.5f);
    float *dA = to_gpu(A, 4 * (uint64_t)Hv), *ddt = to_gpu(dt, 4 * (uint64_t)Hv), *dcw = to_gpu(cw, 4 * (uint64_t)(W * K));
    float *dnw = to_gpu(nw, 4 * (uint64_t)dv);
    sp_gdn_core hc = {{Hk, Hv, dk, dv, A, dt}, cw, K, nw, 1e-6f}, dc = {{Hk, Hv, dk, dv, dA, ddt}, dcw, K, dnw, 1e-6f};
    const sp_gpu *g = sp_gpu_of(&gpu);
    uint64_t most = 0;
    char what[200];
    float *qkv[2], *z[2], *a[2], *b[2], *S[2], *tail[2], *dqkv[2], *dz[2], *da[2], *db[2], *dS[2], *dtail[2], *dout[2], *dconv[2];
    float *sS[2], *stail[2], *sout[2]; /* the separate GPU ops' state, tail and output */
    /* the rows of both sequences in one array each (sequence q's n rows from row q · n), as a step lays them out */
    float *all_qkv = to_gpu(NULL, 8 * (uint64_t)(n * W)), *all_z = to_gpu(NULL, 8 * (uint64_t)(n * O));
    float *all_a = to_gpu(NULL, 8 * (uint64_t)(n * Hv)), *all_b = to_gpu(NULL, 8 * (uint64_t)(n * Hv));
    float *all_out = to_gpu(NULL, 8 * (uint64_t)(n * O)), *all_conv = to_gpu(NULL, 8 * (uint64_t)(n * W));
    for (int q = 0; q < 2; q++) {
        qkv[q] = randoms(n * W, -2, 2), z[q] = randoms(n * O, -4, 4), a[q] = randoms(n * Hv, -6, 3), b[q] = randoms(n * Hv, -4, 4);
        S[q] = randoms(state, -0.1f, 0.1f), tail[q] = randoms((K - 1) * W, -2, 2);
        dqkv[q] = all_qkv + q * n * W, dz[q] = all_z + q * n * O, da[q] = all_a + q * n * Hv, db[q] = all_b + q * n * Hv;
        dout[q] = all_out + q * n * O, dconv[q] = all_conv + q * n * W;
        gpu.write(&gpu, dqkv[q], qkv[q], 4 * (uint64_t)(n * W)), gpu.write(&gpu, dz[q], z[q], 4 * (uint64_t)(n * O));
        gpu.write(&gpu, da[q], a[q], 4 * (uint64_t)(n * Hv)), gpu.write(&gpu, db[q], b[q], 4 * (uint64_t)(n * Hv));
        dS[q] = to_gpu(S[q], 4 * (uint64_t)state), dtail[q] = to_gpu(tail[q], 4 * (uint64_t)((K - 1) * W));
        sS[q] = to_gpu(S[q], 4 * (uint64_t)state), stail[q] = to_gpu(tail[q], 4 * (uint64_t)((K - 1) * W));
        sout[q] = to_gpu(NULL, 4 * (uint64_t)(n * O));
    }
    for (int call = 0; call < 2; call++) {
        int64_t r0 = call ? n1 : 0, rn = call ? n2 : n1;
        sp_gdn_seq seqs[2] = {{r0, rn, dS[0], dtail[0]}, {n + r0, rn, dS[1], dtail[1]}};
        uint64_t c0 = g->n_commands;
        gpu.gdn_core(&gpu, all_out, all_conv, all_qkv, normed ? all_z : NULL, all_a, all_b, &dc, seqs, 2);
        if ((g->n_commands - c0) / 2 > most) most = (g->n_commands - c0) / 2;
        for (int q = 0; q < 2; q++) {
            gpu.conv_silu(&gpu, dconv[q] + r0 * W, dqkv[q] + r0 * W, rn, W, dcw, K, stail[q]);
            gpu.gdn_recurrent(&gpu, sout[q] + r0 * O, dconv[q] + r0 * W, da[q] + r0 * Hv, db[q] + r0 * Hv, &dc.shape, sS[q], rn);
            if (normed) gpu.rmsnorm_gated(&gpu, sout[q] + r0 * O, sout[q] + r0 * O, dz[q] + r0 * O, dnw, rn * Hv, dv, 1e-6f);
        }
    }
    float *want = malloc(4 * (size_t)(n * O)), *conv = malloc(4 * (size_t)(n * W));
    for (int q = 0; q < 2; q++) {
        for (int call = 0; call < 2; call++) {
            int64_t r0 = call ? n1 : 0, rn = call ? n2 : n1;
            sp_gdn_seq seq = {r0, rn, S[q], tail[q]};
            cpu.gdn_core(&cpu, want, conv, qkv[q], normed ? z[q] : NULL, a[q], b[q], &hc, &seq, 1);
        }
        float *got = from_gpu(dout[q], n * O), *got_S = from_gpu(dS[q], state), *got_tail = from_gpu(dtail[q], (K - 1) * W);
        float *sep = from_gpu(sout[q], n * O), *sep_S = from_gpu(sS[q], state);
        snprintf(what, sizeof what, "gdn_core %d/%d heads, dk %d dv %d, K %d, %lld + %lld tokens%s, sequence %d", Hk, Hv, dk, dv, K,
                 (long long)n1, (long long)n2, normed ? "" : " (no norm)", q);
        expect(what, nmse(got, want, n * O), 1e-10);
        expect("gdn_core state", nmse(got_S, S[q], state), 1e-9);
        expect("gdn_core conv tail (raw rows, exact)", nmse(got_tail, tail[q], (K - 1) * W), 0);
        expect("gdn_core output against the separate GPU ops", nmse(got, sep, n * O), 1e-12);
        expect("gdn_core state against the separate GPU ops", nmse(got_S, sep_S, state), 1e-12);
        free(got), free(got_S), free(got_tail), free(sep), free(sep_S);
    }
    snprintf(what, sizeof what, "gdn_core %d/%d heads dv %d, %lld + %lld tokens: %llu dispatches a sequence (want %llu)", Hk, Hv, dv,
             (long long)n1, (long long)n2, (unsigned long long)most, (unsigned long long)dispatches);
    expect(what, most == dispatches ? 0 : 1, 0);
    for (int q = 0; q < 2; q++) {
        gpu.free(&gpu, dS[q]), gpu.free(&gpu, dtail[q]), gpu.free(&gpu, sS[q]), gpu.free(&gpu, stail[q]), gpu.free(&gpu, sout[q]);
        free(qkv[q]), free(z[q]), free(a[q]), free(b[q]), free(S[q]), free(tail[q]);
    }
    gpu.free(&gpu, all_qkv), gpu.free(&gpu, all_z), gpu.free(&gpu, all_a), gpu.free(&gpu, all_b), gpu.free(&gpu, all_out);
    gpu.free(&gpu, all_conv);
    gpu.free(&gpu, dA), gpu.free(&gpu, ddt), gpu.free(&gpu, dcw), gpu.free(&gpu, dnw);
    free(A), free(dt), free(cw), free(nw), free(want), free(conv);
}

/* A step's GDN cores of several rows leave their output quantized for the GEMV after them (gdn_core_q8): the q4 GEMV
 * on that output records no quantize dispatch, and gives the bits of the same GEMV after a quantize dispatch (the
 * int8 copy is quantize.comp's); sequences of `rows` rows each, laid out one after another as a step lays them. */
static void test_gdn_core_int8(int32_t Hk, int32_t Hv, int32_t dk, int32_t dv, int32_t K, int n_seqs, const int64_t *rows) {
    int64_t W = 2 * (int64_t)Hk * dk + (int64_t)Hv * dv, O = (int64_t)Hv * dv, state = (int64_t)Hv * dk * dv, n = 0, R = 96;
    for (int q = 0; q < n_seqs; q++) n += rows[q];
    float *A = randoms(Hv, -8, -0.01f), *dt = randoms(Hv, -1, 1), *cw = randoms(W * K, -0.8f, 0.8f), *nw = randoms(dv, 0.5f, 1.5f);
    float *qkv = randoms(n * W, -2, 2), *z = randoms(n * O, -4, 4), *a = randoms(n * Hv, -6, 3), *b = randoms(n * Hv, -4, 4);
    float *S = randoms(state, -0.1f, 0.1f), *tail = randoms((K - 1) * W, -2, 2);
    float *dA = to_gpu(A, 4 * (uint64_t)Hv), *ddt = to_gpu(dt, 4 * (uint64_t)Hv), *dcw = to_gpu(cw, 4 * (uint64_t)(W * K));
    float *dnw = to_gpu(nw, 4 * (uint64_t)dv), *dqkv = to_gpu(qkv, 4 * (uint64_t)(n * W)), *dz = to_gpu(z, 4 * (uint64_t)(n * O));
    float *da = to_gpu(a, 4 * (uint64_t)(n * Hv)), *db = to_gpu(b, 4 * (uint64_t)(n * Hv)), *dout = to_gpu(NULL, 4 * (uint64_t)(n * O));
    float *dconv = to_gpu(NULL, 4 * (uint64_t)(n * W)), *dy[2] = {to_gpu(NULL, 4 * (uint64_t)(n * R)), to_gpu(NULL, 4 * (uint64_t)(n * R))};
    float *dS[8], *dtail[8];
    sp_gdn_seq seqs[8];
    sp_gdn_core dc = {{Hk, Hv, dk, dv, dA, ddt}, dcw, K, dnw, 1e-6f};
    for (int q = 0, r0 = 0; q < n_seqs; r0 += (int)rows[q], q++) {
        dS[q] = to_gpu(S, 4 * (uint64_t)state), dtail[q] = to_gpu(tail, 4 * (uint64_t)((K - 1) * W));
        seqs[q] = (sp_gdn_seq){r0, rows[q], dS[q], dtail[q]};
    }
    weights w = make_weights(SP_MAT_Q4, R, O);
    sp_gpu *g = sp_gpu_of(&gpu);
    gpu.gdn_core(&gpu, dout, dconv, dqkv, dz, da, db, &dc, seqs, n_seqs);
    uint64_t c0 = g->n_commands;
    gpu.matmul(&gpu, dy[0], &w.dev, dout, n); /* on the cores' int8 copy */
    uint64_t recorded = g->n_commands - c0;
    sp_gpu_wrote(g, sp_gpu_span(g, dout, 4 * (uint64_t)(n * O))); /* as if written again: the GEMV quantizes it itself */
    gpu.matmul(&gpu, dy[1], &w.dev, dout, n);
    float *y0 = from_gpu(dy[0], n * R), *y1 = from_gpu(dy[1], n * R);
    char what[200];
    snprintf(what, sizeof what, "gdn_core %d/%d heads dv %d, %d sequences, %lld rows: its int8 copy feeds the q4 GEMV (%llu dispatch), "
             "the bits of a quantize pass", Hk, Hv, dv, n_seqs, (long long)n, (unsigned long long)recorded);
    expect(what, recorded == 1 && !memcmp(y0, y1, sizeof(float) * (size_t)(n * R)) ? 0 : 1, 0);
    for (int q = 0; q < n_seqs; q++) gpu.free(&gpu, dS[q]), gpu.free(&gpu, dtail[q]);
    gpu.free(&gpu, dA), gpu.free(&gpu, ddt), gpu.free(&gpu, dcw), gpu.free(&gpu, dnw), gpu.free(&gpu, dqkv), gpu.free(&gpu, dz);
    gpu.free(&gpu, da), gpu.free(&gpu, db), gpu.free(&gpu, dout), gpu.free(&gpu, dconv), gpu.free(&gpu, dy[0]), gpu.free(&gpu, dy[1]);
    free(A), free(dt), free(cw), free(nw), free(qkv), free(z), free(a), free(b), free(S), free(tail), free(y0), free(y1), free(w.bytes);
}

#endif
