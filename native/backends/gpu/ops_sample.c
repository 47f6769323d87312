/* ops_sample.c — sampling on a GPU. */
#include "gpu.h"

#include "backends/cpu/ops.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Greedy rows without penalties, a bias or top logprobs need only (argmax, max, Σ exp) over the ids they may take (a
 * grammar's allowed mask and the model's tokens, both applied on the device) — computed there, so 12 bytes come back
 * instead of the row. Every other row is read back and sampled by the CPU backend's sampler. */
static bool greedy_on_device(const sp_sample_job *j) {
    const splash_sampling *s = j->params;
    return s->temperature == 0 && s->repetition_penalty == 1.0f && s->presence_penalty == 0 && s->frequency_penalty == 0 &&
           s->n_bias == 0 && j->n_top == 0;
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
    int32_t fast[64], n_fast = 0;
    sp_gpu_range r[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
    for (int32_t j = 0; j < n_jobs; j++)
        if (greedy_on_device(&jobs[j]) && n_fast < 64) {
            rows[n_fast] = sp_gpu_addr(gpu, jobs[j].logits);
            masks[2 * n_fast] = stage_mask(gpu, jobs[j].allowed, vocab, &r[3]);
            masks[2 * n_fast + 1] = stage_mask(gpu, jobs[j].tokens, vocab, &r[3]);
            if ((jobs[j].allowed && !masks[2 * n_fast]) || (jobs[j].tokens && !masks[2 * n_fast + 1]))
                return *gpu->status ? *gpu->status : SPLASH_ERR_INTERNAL;
            fast[n_fast++] = j;
        }
    if (n_fast) {
        uint64_t ra = sp_gpu_stage(gpu, rows, sizeof(uint64_t) * (uint64_t)n_fast);
        uint64_t ma = sp_gpu_stage(gpu, masks, 2 * sizeof(uint64_t) * (uint64_t)n_fast);
        if (!ra || !ma) return *gpu->status ? *gpu->status : SPLASH_ERR_INTERNAL;
        r[0] = (sp_gpu_range){ra, ra + 8 * (uint64_t)n_fast};
        r[2] = (sp_gpu_range){ma, ma + 16 * (uint64_t)n_fast};
        for (int32_t i = 0; i < n_fast; i++) {
            sp_gpu_range row = sp_gpu_span(gpu, jobs[fast[i]].logits, (uint64_t)vocab * 4);
            if (!r[1].hi || row.lo < r[1].lo) r[1].lo = row.lo;
            if (row.hi > r[1].hi) r[1].hi = row.hi;
        }
        if (!gpu->stats) gpu->stats = sp_gpu_alloc(be, 12 * 64);
        if (!gpu->stats) {
            sp_gpu_fail_msg(gpu, SPLASH_ERR_OUT_OF_MEMORY, "greedy sampling results");
            return *gpu->status;
        }
        sp_gpu_range w = sp_gpu_span(gpu, gpu->stats, 12 * (uint64_t)n_fast);
        struct {
            uint64_t rows, stats, masks;
            uint32_t n, vocab;
        } p = {ra, w.lo, ma, (uint32_t)n_fast, (uint32_t)vocab};
        sp_gpu_dispatch(gpu, "sample_stats", SP_GPU_SAMPLE_STATS, (uint32_t[4]){256, 0, 0, 0}, &p, sizeof p,
                        (uint32_t[3]){(uint32_t)n_fast, 1, 1}, r, r[3].hi ? 4 : 3, &w, 1, NULL);
        float stats[3 * 64];
        sp_gpu_read(be, stats, gpu->stats, 12 * (uint64_t)n_fast);
        if (*gpu->status) return *gpu->status;
        for (int32_t i = 0; i < n_fast; i++) {
            uint32_t arg;
            memcpy(&arg, &stats[3 * i], 4);
            jobs[fast[i]].token = (int32_t)arg;
            jobs[fast[i]].logprob = -logf(stats[3 * i + 2]);
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
        jobs[j].token = slow[s].token;
        jobs[j].logprob = slow[s].logprob;
        s++;
    }
    free(slow);
    free(host);
    return st;
}

void sp_gpu_install_sample(sp_backend *be) { be->sample = gpu_sample; }
