/* record.c — pipelines by (kernel, function constants), dispatches checked against the kernel table, barriers from
 * the ops' declared memory ranges, and the sync that runs a command buffer (see mtl.h). */
#include "mtl.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

void sp_mtl_grid(uint64_t n, uint32_t groups[3]) {
    if (n == 0) n = 1;
    groups[0] = n <= 65535 ? (uint32_t)n : 65535;
    groups[1] = (uint32_t)((n + groups[0] - 1) / groups[0]);
    groups[2] = 1;
}

/* The pipeline for (k, spec), made on first use; *max_threads is what it can run per threadgroup. */
static sp_mtl_pipeline *pipeline(sp_mtl *m, sp_mtl_kernel_id k, const uint32_t spec[4], uint32_t *max_threads) {
    for (int32_t i = 0; i < m->n_pipelines; i++) {
        sp_mtl_pipeline *p = &m->pipelines[i];
        if (p->kernel == k && !memcmp(p->spec, spec, sizeof p->spec)) {
            *max_threads = p->max_threads;
            return p;
        }
    }
    if (m->n_pipelines == SP_MTL_MAX_PIPELINES) {
        sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "pipeline cache full");
        return NULL;
    }
    void *h = sp_mtl_device_pipeline(m, k, spec, max_threads);
    if (!h) {
        sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "kernel %s: %s", sp_mtl_kernels[k].name, splash_last_error());
        return NULL;
    }
    sp_mtl_pipeline *p = &m->pipelines[m->n_pipelines++];
    *p = (sp_mtl_pipeline){.kernel = k, .handle = h, .max_threads = *max_threads};
    memcpy(p->spec, spec, sizeof p->spec);
    return p;
}

static bool overlaps(sp_mtl_range x, const sp_mtl_range *list, int32_t n) {
    if (x.lo >= x.hi) return false;
    for (int32_t i = 0; i < n; i++)
        if (list[i].lo < x.hi && x.lo < list[i].hi) return true;
    return false;
}

/* Whether the dispatch about to be encoded needs a barrier before it; remembers its ranges. */
static bool order(sp_mtl *m, const sp_mtl_range *reads, int32_t nr, const sp_mtl_range *writes, int32_t nw) {
    bool need = m->barrier_all || m->n_reads + nr > SP_MTL_MAX_RANGES || m->n_writes + nw > SP_MTL_MAX_RANGES;
    for (int32_t i = 0; i < nr && !need; i++) need = overlaps(reads[i], m->writes, m->n_writes);
    for (int32_t i = 0; i < nw && !need; i++)
        need = overlaps(writes[i], m->writes, m->n_writes) || overlaps(writes[i], m->reads, m->n_reads);
    if (need) {
        m->n_reads = m->n_writes = 0;
        m->n_barriers++;
    }
    for (int32_t i = 0; i < nr; i++)
        if (reads[i].lo < reads[i].hi) m->reads[m->n_reads++] = reads[i];
    for (int32_t i = 0; i < nw; i++)
        if (writes[i].lo < writes[i].hi) m->writes[m->n_writes++] = writes[i];
    return need;
}

void sp_mtl_dispatch(sp_mtl *m, sp_mtl_kernel_id k, const uint32_t spec[4], const void *push, uint32_t push_bytes,
                     const uint32_t groups[3], const sp_mtl_range *reads, int32_t n_reads, const sp_mtl_range *writes,
                     int32_t n_writes, const void *indirect) {
    if (*m->status) return;
    const sp_mtl_kernel *K = &sp_mtl_kernels[k];
    /* what the kernel was translated with (kernels/msl/manifest.json) against what this dispatch passes */
    if (push_bytes != K->push_bytes || push_bytes > SP_MTL_PUSH_BYTES) {
        sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "kernel %s takes %u push bytes, the op passes %u", K->name, K->push_bytes, push_bytes);
        return;
    }
    for (uint32_t i = 0; i < 4; i++)
        if (spec[i] && !(K->constants >> i & 1u)) {
            sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "kernel %s declares no function constant %u (the op sets %u)", K->name, i, spec[i]);
            return;
        }
    uint32_t threads[3];
    for (int d = 0; d < 3; d++) threads[d] = K->size_constant[d] >= 0 ? spec[K->size_constant[d]] : K->size_literal[d];
    uint32_t max_threads = 0;
    sp_mtl_pipeline *p = pipeline(m, k, spec, &max_threads);
    if (!p) return;
    uint64_t total = (uint64_t)threads[0] * threads[1] * threads[2];
    if (total == 0 || total > max_threads || total > SP_MTL_MAX_THREADS) {
        sp_mtl_fail(m, SPLASH_ERR_UNSUPPORTED, "kernel %s: %llu threads per threadgroup, the pipeline runs at most %u",
                    K->name, (unsigned long long)total, max_threads);
        return;
    }
    void *ib = NULL;
    uint64_t ioff = 0;
    if (indirect) {
        const sp_mtl_chunk *c = sp_mtl_chunk_of(m, indirect);
        if (!c || c->host_row || ((uintptr_t)indirect - c->fake) % 4) {
            sp_mtl_fail(m, SPLASH_ERR_INTERNAL, "indirect dispatch arguments outside backend memory");
            return;
        }
        ib = c->buffer;
        ioff = c->offset + ((uintptr_t)indirect - c->fake);
    }
    /* an indirect dispatch reads its threadgroup counts before any shader stage: always after a barrier */
    bool barrier = order(m, reads, n_reads, writes, n_writes) || indirect;
    splash_status st = sp_mtl_device_dispatch(m, p->handle, push, push_bytes, K->push_index, groups, threads, barrier, ib, ioff);
    if (st) {
        sp_mtl_fail(m, st, "dispatch of %s: %s", K->name, splash_last_error());
        return;
    }
    m->open = true;
    m->n_dispatches++;
}

splash_status sp_mtl_sync(sp_mtl *m) {
    splash_status st = SPLASH_OK;
    if (m->open) {
        st = sp_mtl_device_finish(m);
        m->n_commits++;
    }
    m->open = false;
    m->n_reads = m->n_writes = 0;
    m->ring_used = 0;
    m->n_stage_cache = 0;
    if (st) sp_mtl_fail(m, st, "%s", splash_last_error());
    return *m->status ? *m->status : st;
}

void sp_mtl_record_free(sp_mtl *m) {
    sp_mtl_sync(m);
    for (int32_t i = 0; i < m->n_pipelines; i++) {
        sp_mtl_pipeline *p = &m->pipelines[i];
        sp_mtl_device_release_pipeline(m, p->handle);
    }
    m->n_pipelines = 0;
}
