/* backend.c — the Metal backend's op table: device, memory and encoding come up together here. */
#include "metal.h"

#include "mtl.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

splash_status sp_metal_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status) {
    sp_mtl *m = calloc(1, sizeof *m);
    if (!m) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    m->status = status;
    const char *b = getenv("SPLASH_METAL_BARRIERS");
    m->barrier_all = b && !strcmp(b, "all");
    *be = (sp_backend){.name = "metal", .pool = pool, .n_threads = n_threads, .status = status, .impl = m};
    splash_status st = sp_mtl_device_open(m);
    if (!st) st = sp_mtl_memory_init(m);
    if (st) {
        sp_metal_backend_destroy(be);
        return st;
    }
    sp_mtl_ops_install(be);
    return SPLASH_OK;
}

void sp_metal_backend_destroy(sp_backend *be) {
    sp_mtl *m = sp_mtl_of(be);
    if (!m) return;
    if (m->device) {
        sp_mtl_record_free(m);
        sp_mtl_memory_free(m);
        sp_mtl_device_close(m);
    }
    free(m);
    be->impl = NULL;
}

const sp_metal_info *sp_metal_backend_info(const sp_backend *be) { return &sp_mtl_of(be)->info; }
