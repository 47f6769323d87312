/* cache.c — splash_cache_*: the sequence-state memory (KV pages, GDN state slots) and its copy/clear operations. */
#include "model.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* A page's K/V rounded up to 64 bytes: every page starts aligned, and copies move whole floats. */
static uint64_t padded(uint64_t bytes) { return (bytes + 63) & ~(uint64_t)63; }

/* A page and a slot hold the target's state and, when a drafter is attached, the drafter's (speculate.c). */
uint64_t splash_cache_page_bytes(const splash_model *m, int32_t page_tokens) {
    if (!m || page_tokens < 1) return 0;
    return padded(sp_qwen35_page_bytes(m->arch, page_tokens, m->kv_type)) +
           (m->speculator ? padded(sp_speculator_page_bytes(m->speculator, page_tokens, m->kv_type)) : 0);
}

uint64_t splash_cache_slot_bytes(const splash_model *m) {
    return m ? sp_qwen35_slot_bytes(m->arch) + (m->speculator ? sp_speculator_slot_bytes(m->speculator) : 0) : 0;
}

sp_seq_memory sp_cache_memory(const splash_cache *c) {
    return (sp_seq_memory){.kv = c->kv, .page_bytes = (int64_t)c->page_bytes, .page_tokens = c->page_tokens,
                            .kv_type = c->kv_type, .state = c->state};
}

splash_status splash_cache_create(splash_model *m, int32_t page_tokens, int32_t n_pages, int32_t n_slots,
                                  splash_cache **out) {
    if (!m || !out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_create: NULL argument");
    *out = NULL;
    if (page_tokens < 1 || n_pages < 0 || n_slots < 0)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_create: page_tokens %d (≥ 1), n_pages %d, n_slots %d (≥ 0)",
                       page_tokens, n_pages, n_slots);
    splash_cache *c = calloc(1, sizeof *c);
    if (!c) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    *c = (splash_cache){.m = m, .page_tokens = page_tokens, .n_pages = n_pages, .n_slots = n_slots, .kv_type = m->kv_type,
                        .page_bytes = padded(sp_qwen35_page_bytes(m->arch, page_tokens, m->kv_type)),
                        .slot_bytes = sp_qwen35_slot_bytes(m->arch)};
    if (m->speculator)
        c->draft_page_bytes = padded(sp_speculator_page_bytes(m->speculator, page_tokens, m->kv_type)),
        c->draft_slot_bytes = sp_speculator_slot_bytes(m->speculator);
    uint64_t kv = c->page_bytes * (uint64_t)n_pages, st = c->slot_bytes * (uint64_t)n_slots;
    uint64_t dkv = c->draft_page_bytes * (uint64_t)n_pages, dst = c->draft_slot_bytes * (uint64_t)n_slots;
    pthread_mutex_lock(&m->lock);
    c->kv = m->be.alloc(&m->be, kv ? kv : 64);
    c->state = m->be.alloc(&m->be, st ? st : 64);
    c->draft_kv = m->be.alloc(&m->be, dkv ? dkv : 64);
    c->draft_state = m->be.alloc(&m->be, dst ? dst : 64);
    m->n_caches++;
    pthread_mutex_unlock(&m->lock);
    if (!c->kv || !c->state || !c->draft_kv || !c->draft_state) {
        splash_cache_free(c);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the cache: %d pages × %llu bytes + %d slots × %llu bytes",
                       n_pages, (unsigned long long)c->page_bytes, n_slots, (unsigned long long)c->slot_bytes);
    }
    *out = c;
    return SPLASH_OK;
}

void splash_cache_free(splash_cache *c) {
    if (!c) return;
    pthread_mutex_lock(&c->m->lock);
    c->m->be.free(&c->m->be, c->kv);
    c->m->be.free(&c->m->be, c->state);
    c->m->be.free(&c->m->be, c->draft_kv);
    c->m->be.free(&c->m->be, c->draft_state);
    c->m->n_caches--;
    pthread_mutex_unlock(&c->m->lock);
    free(c->refusals);
    free(c);
}

/* Unit dst ← unit src of `bytes` each (pages, slots) in backend memory: a device copy on a GPU backend. */
static void copy_bytes(splash_model *m, void *base, int32_t dst, int32_t src, uint64_t bytes) {
    if (!bytes) return;
    int64_t floats = (int64_t)(bytes / sizeof(float));
    float *f = base;
    m->be.copy_rows(&m->be, f + dst * floats, floats, f + src * floats, floats, 1, floats);
}

static splash_status check_id(const char *what, int32_t id, int32_t n) {
    if (id < 0 || id >= n) return SP_FAIL(SPLASH_ERR_CAPACITY, "%s %d is outside the cache (0..%d)", what, id, n - 1);
    return SPLASH_OK;
}

splash_status splash_cache_copy_page(splash_cache *c, int32_t src, int32_t dst) {
    if (!c) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_copy_page: cache is NULL");
    splash_status st;
    if ((st = check_id("page", src, c->n_pages)) || (st = check_id("page", dst, c->n_pages))) return st;
    if (src == dst) return SPLASH_OK;
    pthread_mutex_lock(&c->m->lock);
    copy_bytes(c->m, c->kv, dst, src, c->page_bytes);
    copy_bytes(c->m, c->draft_kv, dst, src, c->draft_page_bytes);
    pthread_mutex_unlock(&c->m->lock);
    return SPLASH_OK;
}

splash_status splash_cache_copy_slot(splash_cache *c, int32_t src, int32_t dst) {
    if (!c) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_copy_slot: cache is NULL");
    splash_status st;
    if ((st = check_id("slot", src, c->n_slots)) || (st = check_id("slot", dst, c->n_slots))) return st;
    if (src == dst) return SPLASH_OK;
    pthread_mutex_lock(&c->m->lock);
    copy_bytes(c->m, c->state, dst, src, c->slot_bytes);
    copy_bytes(c->m, c->draft_state, dst, src, c->draft_slot_bytes);
    pthread_mutex_unlock(&c->m->lock);
    return SPLASH_OK;
}

splash_status splash_cache_clear_slot(splash_cache *c, int32_t slot) {
    if (!c) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_clear_slot: cache is NULL");
    splash_status st = check_id("slot", slot, c->n_slots);
    if (st) return st;
    pthread_mutex_lock(&c->m->lock);
    if (c->slot_bytes) c->m->be.clear(&c->m->be, (uint8_t *)c->state + slot * c->slot_bytes, c->slot_bytes);
    if (c->draft_slot_bytes) c->m->be.clear(&c->m->be, (uint8_t *)c->draft_state + slot * c->draft_slot_bytes, c->draft_slot_bytes);
    pthread_mutex_unlock(&c->m->lock);
    return SPLASH_OK;
}

/* One unit (a page or a slot) of the target's and the drafter's memory, to or from host bytes laid out as the
 * target's part then the drafter's. */
static splash_status transfer(splash_cache *c, const char *what, int32_t id, int32_t n, void *target, uint64_t target_bytes,
                              void *draft, uint64_t draft_bytes, void *host, uint64_t bytes, int to_host) {
    if (!c || !host) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_cache_%s_%s: NULL argument", to_host ? "read" : "write", what);
    splash_status st = check_id(what, id, n);
    if (st) return st;
    if (bytes != target_bytes + draft_bytes)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "a %s of this cache is %llu bytes, not %llu", what,
                       (unsigned long long)(target_bytes + draft_bytes), (unsigned long long)bytes);
    const sp_backend *be = &c->m->be;
    uint8_t *t = (uint8_t *)target + (uint64_t)id * target_bytes, *d = (uint8_t *)draft + (uint64_t)id * draft_bytes, *h = host;
    pthread_mutex_lock(&c->m->lock);
    if (to_host) {
        be->read(be, h, t, target_bytes);
        if (draft_bytes) be->read(be, h + target_bytes, d, draft_bytes);
    } else {
        be->write(be, t, h, target_bytes);
        if (draft_bytes) be->write(be, d, h + target_bytes, draft_bytes);
    }
    pthread_mutex_unlock(&c->m->lock);
    return SPLASH_OK;
}

splash_status splash_cache_read_page(splash_cache *c, int32_t page, void *dst, uint64_t bytes) {
    return transfer(c, "page", page, c ? c->n_pages : 0, c ? c->kv : NULL, c ? c->page_bytes : 0, c ? c->draft_kv : NULL,
                    c ? c->draft_page_bytes : 0, dst, bytes, 1);
}

splash_status splash_cache_write_page(splash_cache *c, int32_t page, const void *src, uint64_t bytes) {
    return transfer(c, "page", page, c ? c->n_pages : 0, c ? c->kv : NULL, c ? c->page_bytes : 0, c ? c->draft_kv : NULL,
                    c ? c->draft_page_bytes : 0, (void *)src, bytes, 0);
}

splash_status splash_cache_read_slot(splash_cache *c, int32_t slot, void *dst, uint64_t bytes) {
    return transfer(c, "slot", slot, c ? c->n_slots : 0, c ? c->state : NULL, c ? c->slot_bytes : 0, c ? c->draft_state : NULL,
                    c ? c->draft_slot_bytes : 0, dst, bytes, 1);
}

splash_status splash_cache_write_slot(splash_cache *c, int32_t slot, const void *src, uint64_t bytes) {
    return transfer(c, "slot", slot, c ? c->n_slots : 0, c ? c->state : NULL, c ? c->slot_bytes : 0, c ? c->draft_state : NULL,
                    c ? c->draft_slot_bytes : 0, (void *)src, bytes, 0);
}
