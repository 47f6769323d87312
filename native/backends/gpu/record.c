/* record.c — pipelines by (kernel, spec constants), commands with the barriers their declared memory ranges need,
 * submissions, and the sync that ends a step (see gpu.h). */
#include "gpu.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bool sp_gpu_fail(sp_gpu *g, splash_status st, const char *fmt, ...) {
    if (*g->status == SPLASH_OK) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        *g->status = SP_FAIL(st, "%s: %s", g->name, msg);
    }
    return false;
}

void sp_gpu_grid(uint64_t n, uint32_t groups[3]) {
    if (n == 0) n = 1;
    groups[0] = n <= 65535 ? (uint32_t)n : 65535;
    groups[1] = (uint32_t)((n + groups[0] - 1) / groups[0]);
    groups[2] = 1;
}

/* The pipeline for (k, spec), made on first use. */
static const sp_gpu_pipeline *pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4]) {
    for (int32_t i = 0; i < g->n_pipelines; i++) {
        const sp_gpu_pipeline *p = &g->pipelines[i];
        if (p->kernel == k && !memcmp(p->spec, spec, sizeof p->spec)) return p;
    }
    if (g->n_pipelines == SP_GPU_MAX_PIPELINES) {
        sp_gpu_fail(g, SPLASH_ERR_INTERNAL, "pipeline cache full");
        return NULL;
    }
    uint32_t max_threads = 0;
    void *h = g->dev->pipeline(g, k, spec, &max_threads);
    if (!h) {
        sp_gpu_fail(g, SPLASH_ERR_INTERNAL, "kernel %s: %s", sp_gpu_kernel_names[k], splash_last_error());
        return NULL;
    }
    sp_gpu_pipeline *p = &g->pipelines[g->n_pipelines++];
    *p = (sp_gpu_pipeline){.kernel = k, .handle = h, .max_threads = max_threads};
    memcpy(p->spec, spec, sizeof p->spec);
    return p;
}

void sp_gpu_pipelines_free(sp_gpu *g) {
    for (int32_t i = 0; i < g->n_pipelines; i++) g->dev->release_pipeline(g, g->pipelines[i].handle);
    g->n_pipelines = 0;
}

static bool overlaps(sp_gpu_range x, const sp_gpu_range *list, int32_t n) {
    if (x.lo >= x.hi) return false;
    for (int32_t i = 0; i < n; i++)
        if (list[i].lo < x.hi && x.lo < list[i].hi) return true;
    return false;
}

/* Adds x to a hazard list, into an entry it overlaps or touches where there is one (the union of the two is exactly
 * what they cover together, so no conflict is found that was not there): the sequences of a step declare adjacent
 * rows of the same arrays and the same weights, and the list stays short. */
static void remember(sp_gpu_range x, sp_gpu_range *list, int32_t *n) {
    if (x.lo >= x.hi) return;
    for (int32_t i = 0; i < *n; i++)
        if (list[i].lo <= x.hi && x.lo <= list[i].hi) {
            if (x.lo < list[i].lo) list[i].lo = x.lo;
            if (x.hi > list[i].hi) list[i].hi = x.hi;
            return;
        }
    list[(*n)++] = x;
}

/* Whether the command about to be recorded needs a barrier (`force`, or a conflict with a command since the last
 * one); remembers its ranges. */
static bool order(sp_gpu *g, const sp_gpu_range *reads, int32_t nr, const sp_gpu_range *writes, int32_t nw, bool force) {
    bool need = force || g->fresh || g->barrier_all || g->n_reads + nr > SP_GPU_MAX_RANGES ||
                g->n_writes + nw > SP_GPU_MAX_RANGES;
    for (int32_t i = 0; i < nr && !need; i++) need = overlaps(reads[i], g->writes, g->n_writes);
    for (int32_t i = 0; i < nw && !need; i++)
        need = overlaps(writes[i], g->writes, g->n_writes) || overlaps(writes[i], g->reads, g->n_reads);
    if (need) {
        g->n_reads = g->n_writes = 0;
        g->fresh = false;
        g->n_barriers++;
    }
    for (int32_t i = 0; i < nr; i++) remember(reads[i], g->reads, &g->n_reads);
    for (int32_t i = 0; i < nw; i++) {
        remember(writes[i], g->writes, &g->n_writes);
        sp_gpu_wrote(g, writes[i]);
    }
    return need;
}

void sp_gpu_wrote(sp_gpu *g, sp_gpu_range r) {
    if (overlaps(r, &g->x8_of, 1)) g->x8_of = (sp_gpu_range){0, 0};
}

/* After a command: count it, and start a submission every SP_GPU_SUBMIT_EVERY commands where the device can. */
static void recorded(sp_gpu *g, splash_status st, const char *what) {
    if (st) {
        sp_gpu_fail(g, st, "%s: %s", what, splash_last_error());
        return;
    }
    g->pending = true;
    g->n_commands++;
    if (!g->dev->submit || ++g->since_submit < SP_GPU_SUBMIT_EVERY) return;
    g->since_submit = 0;
    g->n_submits++;
    g->fresh = g->submission_barrier;
    if ((st = g->dev->submit(g))) sp_gpu_fail(g, st, "submit: %s", splash_last_error());
}

void sp_gpu_dispatch(sp_gpu *g, const char *op, sp_gpu_kernel_id k, const uint32_t spec[4], const void *push,
                     uint32_t push_bytes, const uint32_t groups[3], const sp_gpu_range *reads, int32_t n_reads,
                     const sp_gpu_range *writes, int32_t n_writes, const void *indirect) {
    if (*g->status) return;
    const sp_gpu_pipeline *p = pipeline(g, k, spec);
    if (!p) return;
    if (spec[0] == 0 || spec[0] > p->max_threads || spec[0] > SP_GPU_MAX_THREADS || push_bytes > SP_GPU_PUSH_BYTES) {
        sp_gpu_fail(g, SPLASH_ERR_UNSUPPORTED, "kernel %s: %u invocations per workgroup (the pipeline runs at most %u), %u push bytes",
                    sp_gpu_kernel_names[k], spec[0], p->max_threads, push_bytes);
        return;
    }
    sp_gpu_launch l = {.pipeline = p->handle, .kernel = k, .op = op, .threads = spec[0], .push = push, .push_bytes = push_bytes};
    if (indirect) {
        const sp_gpu_chunk *c = sp_gpu_chunk_of(g, indirect);
        if (!c || c->host_row || ((uintptr_t)indirect - c->fake) % 4) {
            sp_gpu_fail(g, SPLASH_ERR_INTERNAL, "indirect dispatch arguments outside backend memory");
            return;
        }
        l.indirect = &c->buf;
        l.indirect_offset = c->offset + ((uintptr_t)indirect - c->fake);
    } else {
        memcpy(l.groups, groups, sizeof l.groups);
    }
    /* an indirect dispatch reads its workgroup counts before any shader runs: always after a barrier */
    l.barrier = order(g, reads, n_reads, writes, n_writes, indirect != NULL);
    recorded(g, g->dev->dispatch(g, &l), sp_gpu_kernel_names[k]);
}

void sp_gpu_copy(sp_gpu *g, const sp_gpu_buffer *src, uint64_t src_offset, const sp_gpu_buffer *dst, uint64_t dst_offset,
                 uint64_t bytes, sp_gpu_range read, sp_gpu_range write) {
    if (*g->status) return;
    bool barrier = order(g, &read, 1, &write, 1, false);
    recorded(g, g->dev->copy(g, src, src_offset, dst, dst_offset, bytes, barrier), "copy");
}

void sp_gpu_fill(sp_gpu *g, const sp_gpu_buffer *dst, uint64_t offset, uint64_t bytes, sp_gpu_range write) {
    if (*g->status) return;
    bool barrier = order(g, NULL, 0, &write, 1, false);
    recorded(g, g->dev->fill(g, dst, offset, bytes, barrier), "fill");
}

splash_status sp_gpu_sync(sp_gpu *g) {
    splash_status st = SPLASH_OK;
    if (g->pending) {
        st = g->dev->finish(g);
        g->n_submits++;
    }
    g->pending = false;
    g->since_submit = 0;
    g->n_reads = g->n_writes = 0;
    g->fresh = g->submission_barrier;
    g->ring_used = 0;
    g->n_stage_cache = 0;
    g->x8_of = (sp_gpu_range){0, 0}; /* the host may write anything before the next command */
    if (st) sp_gpu_fail(g, st, "%s", splash_last_error());
    return *g->status ? *g->status : st;
}
