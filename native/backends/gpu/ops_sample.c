/* ops_sample.c — sampling on a GPU. */
#include "gpu.h"

#include "backends/cpu/ops.h"
#include "core/error.h"
#include "core/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rows without penalties, a bias or top logprobs are sampled on the device (sample.comp: greedy, or temperature with
 * top-k, top-p and min-p, under a grammar's allowed mask and the model's tokens) in the CPU sampler's exact arithmetic
 * (core/sampling.h), so the device draws the CPU's token for the same row, seed and position, and 32 bytes come back
 * instead of the row (with a probed token's mass: speculative acceptance's p(d)). The other rows — penalties over the generated tokens, a sparse bias, top-N lists — are read back
 * and sampled by the CPU backend's sampler. */
static bool on_device(const sp_sample_job *j) {
    const splash_sampling *s = j->params;
    return s->repetition_penalty == 1.0f && s->presence_penalty == 0 && s->frequency_penalty == 0 && s->n_bias == 0 &&
           j->n_top == 0;
}

/* What sample.comp writes per row: token, logprob, the probe's logprob, its mass and the kept mass (each as two
 * words, low first), and a word of padding. */
enum { OUT_BYTES = 32 };

/* sample.comp's params of a row: (1/T, top_k, top-p fraction, top-p on, min-p's key, u53 low, u53 high, probed token
 * or UINT32_MAX). */
static void row_params(const sp_sample_job *j, uint32_t out[8]) {
    const splash_sampling *s = j->params;
    float inv_t = s->temperature > 0 ? 1.0f / s->temperature : 0, floor_w = s->min_p < 1 ? s->min_p : 1;
    uint64_t u = sp_sample_u53(s->seed, j->stream, j->position);
    memset(out, 0, 8 * sizeof(uint32_t));
    memcpy(&out[0], &inv_t, 4);
    out[1] = s->top_k > 0 ? (uint32_t)s->top_k : 0;
    out[2] = s->top_p < 1 ? sp_top_p_fraction(s->top_p) : 0;
    out[3] = s->top_p < 1;
    if (s->min_p > 0) memcpy(&out[4], &floor_w, 4);
    out[5] = (uint32_t)u, out[6] = (uint32_t)(u >> 32);
    out[7] = j->probe ? (uint32_t)*j->probe : UINT32_MAX;
}

/* A bitmask over `vocab` ids staged for the kernel; the range it occupies widens *r. 0 for none (or on failure, with
 * the status set). */
static uint64_t stage_mask(sp_gpu *gpu, const uint32_t *mask, int32_t vocab, sp_gpu_range *r) {
    if (!mask) return 0;
    uint64_t bytes = 4 * (((uint64_t)vocab + 31) / 32), a = sp_gpu_stage(gpu, mask, bytes);
    if (a && (!r->hi || a < r->lo)) r->lo = a;
    if (a && a + bytes > r->hi) r->hi = a + bytes;
    return a;
}

static splash_status gpu_sample(const sp_backend *be, sp_sample_job *jobs, int32_t n_jobs, int32_t vocab, void *scratch,
                                uint64_t scratch_bytes_per_thread) {
    sp_gpu *gpu = sp_gpu_of(be);
    uint64_t rows[64], masks[128];
    uint32_t params[64][8];
    int32_t fast[64], n_fast = 0;
    sp_gpu_range r[5] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
    for (int32_t j = 0; j < n_jobs; j++)
        if (on_device(&jobs[j]) && n_fast < 64) {
            row_params(&jobs[j], params[n_fast]);
            rows[n_fast] = sp_gpu_addr(gpu, jobs[j].logits);
            masks[2 * n_fast] = stage_mask(gpu, jobs[j].allowed, vocab, &r[4]);
            masks[2 * n_fast + 1] = stage_mask(gpu, jobs[j].tokens, vocab, &r[4]);
            if ((jobs[j].allowed && !masks[2 * n_fast]) || (jobs[j].tokens && !masks[2 * n_fast + 1]))
                return *gpu->status ? *gpu->status : SPLASH_ERR_INTERNAL;
            fast[n_fast++] = j;
        }
    if (n_fast) {
        uint64_t ra = sp_gpu_stage(gpu, rows, sizeof(uint64_t) * (uint64_t)n_fast);
        uint64_t ma = sp_gpu_stage(gpu, masks, 2 * sizeof(uint64_t) * (uint64_t)n_fast);
        uint64_t pa = sp_gpu_stage(gpu, params, sizeof params[0] * (uint64_t)n_fast);
        if (!ra || !ma || !pa) return *gpu->status ? *gpu->status : SPLASH_ERR_INTERNAL;
        r[0] = (sp_gpu_range){ra, ra + 8 * (uint64_t)n_fast};
        r[2] = (sp_gpu_range){ma, ma + 16 * (uint64_t)n_fast};
        r[3] = (sp_gpu_range){pa, pa + sizeof params[0] * (uint64_t)n_fast};
        for (int32_t i = 0; i < n_fast; i++) {
            sp_gpu_range row = sp_gpu_span(gpu, jobs[fast[i]].logits, (uint64_t)vocab * 4);
            if (!r[1].hi || row.lo < r[1].lo) r[1].lo = row.lo;
            if (row.hi > r[1].hi) r[1].hi = row.hi;
        }
        if (!gpu->sampled) gpu->sampled = sp_gpu_alloc(be, OUT_BYTES * 64);
        if (!gpu->sampled) {
            sp_gpu_fail_msg(gpu, SPLASH_ERR_OUT_OF_MEMORY, "sampling results");
            return *gpu->status;
        }
        sp_gpu_range w = sp_gpu_span(gpu, gpu->sampled, OUT_BYTES * (uint64_t)n_fast);
        struct {
            uint64_t rows, out, masks, params;
            uint32_t n, vocab;
        } p = {ra, w.lo, ma, pa, (uint32_t)n_fast, (uint32_t)vocab};
        sp_gpu_dispatch(gpu, "sample", SP_GPU_SAMPLE, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p,
                        (uint32_t[3]){(uint32_t)n_fast, 1, 1}, r, r[4].hi ? 5 : 4, &w, 1, NULL);
        uint32_t out[OUT_BYTES / 4 * 64];
        sp_gpu_read(be, out, gpu->sampled, OUT_BYTES * (uint64_t)n_fast);
        if (*gpu->status) return *gpu->status;
        for (int32_t i = 0; i < n_fast; i++) {
            const uint32_t *o = out + OUT_BYTES / 4 * i;
            sp_sample_job *j = &jobs[fast[i]];
            if (o[0] == UINT32_MAX)
                return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "sampled row %d: the allowed-token mask allows no token", fast[i]);
            j->token = (int32_t)o[0];
            memcpy(&j->logprob, &o[1], 4);
            memcpy(&j->probe_logprob, &o[2], 4);
            j->probe_mass = (uint64_t)o[4] << 32 | o[3];
            j->kept_mass = (uint64_t)o[6] << 32 | o[5];
        }
    }
    if (n_fast == n_jobs) return SPLASH_OK;
    /* the rest on the CPU, from host copies of their rows */
    int32_t n_slow = n_jobs - n_fast;
    sp_sample_job *slow = malloc(sizeof *slow * (size_t)n_slow);
    float *host = malloc(sizeof(float) * (size_t)vocab * (size_t)n_slow);
    if (!slow || !host) {
        free(slow), free(host);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for %d logits rows", n_slow);
    }
    int32_t k = 0;
    for (int32_t j = 0, f = 0; j < n_jobs; j++) {
        if (f < n_fast && fast[f] == j) {
            f++;
            continue;
        }
        slow[k] = jobs[j];
        sp_gpu_read(be, host + (size_t)k * (size_t)vocab, jobs[j].logits, (uint64_t)vocab * 4);
        slow[k].logits = host + (size_t)k * (size_t)vocab;
        k++;
    }
    splash_status st = *gpu->status ? *gpu->status : sp_cpu_sample(be, slow, n_slow, vocab, scratch, scratch_bytes_per_thread);
    for (int32_t j = 0, f = 0, s = 0; j < n_jobs && !st; j++) {
        if (f < n_fast && fast[f] == j) {
            f++;
            continue;
        }
        const float *row = jobs[j].logits;
        jobs[j] = slow[s++]; /* every answer the host's sampler wrote, and the caller's own row */
        jobs[j].logits = row;
    }
    free(slow);
    free(host);
    return st;
}

void sp_gpu_install_sample(sp_backend *be) { be->sample = gpu_sample; }
