/* backend.c — the Metal backend: the GPU op layer (backends/gpu/) over the device layer (device.m), with the checks
 * Metal needs and Vulkan would not notice (see mtl.h). */
#include "metal.h"

#include "mtl.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

/* The pipeline, once the kernel is known to run as the op layer dispatches it: it has a translation (Vulkan-only
 * kernels have none), threads per threadgroup from function constant 0 in x alone, and a value only for the function
 * constants the kernel declares. */
static void *checked_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads) {
    const sp_mtl_kernel *K = &sp_mtl_kernels[k];
    if (!K->source) {
        SP_FAIL(SPLASH_ERR_INTERNAL, "metal: kernel %s has no Metal translation", sp_gpu_kernel_names[k]);
        return NULL;
    }
    if (K->size_constant[0] != 0 || K->size_constant[1] >= 0 || K->size_constant[2] >= 0 || K->size_literal[1] != 1 ||
        K->size_literal[2] != 1) {
        SP_FAIL(SPLASH_ERR_INTERNAL, "metal: kernel %s does not take its threadgroup size from function constant 0", K->name);
        return NULL;
    }
    for (uint32_t i = 0; i < 4; i++)
        if (spec[i] && !(K->constants >> i & 1u)) {
            SP_FAIL(SPLASH_ERR_INTERNAL, "metal: kernel %s declares no function constant %u (the op sets %u)", K->name, i, spec[i]);
            return NULL;
        }
    return sp_mtl_pipeline(g, k, spec, max_threads);
}

/* The dispatch, once its push constants are the size the kernel was translated with (kernels/msl/manifest.json). */
static splash_status checked_dispatch(sp_gpu *g, const sp_gpu_launch *l) {
    const sp_mtl_kernel *K = &sp_mtl_kernels[l->kernel];
    if (l->push_bytes != K->push_bytes)
        return SP_FAIL(SPLASH_ERR_INTERNAL, "metal: kernel %s takes %u push bytes, the op passes %u", K->name, K->push_bytes,
                       l->push_bytes);
    return sp_mtl_dispatch(g, l);
}

static const sp_gpu_device METAL = {
    .buffer = sp_mtl_buffer,
    .wrap = sp_mtl_wrap,
    .release = sp_mtl_release,
    .pipeline = checked_pipeline,
    .release_pipeline = sp_mtl_release_pipeline,
    .dispatch = checked_dispatch,
    .finish = sp_mtl_finish,
};

splash_status sp_metal_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status) {
    sp_gpu *g = calloc(1, sizeof *g);
    sp_mtl *m = calloc(1, sizeof *m);
    if (!g || !m) {
        free(g), free(m);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    /* the launch parameters measured on Vulkan GPUs are not Apple GPUs': the defaults until one is measured */
    const char *b = getenv("SPLASH_METAL_BARRIERS");
    *g = (sp_gpu){.dev = &METAL, .device = m, .name = "metal", .device_name = m->info.name, .measured = false,
                  .no_coopmat = "not on Metal", .no_int_dot = "not on Metal", .barrier_all = b && !strcmp(b, "all")};
    *be = (sp_backend){.name = "metal", .impl = g};
    splash_status st = sp_mtl_open(m);
    g->max_buffer = m->info.max_buffer;
    /* simdgroup matrices (the GEMM of kernels/matmul_simdgroup.metal) are Apple family 7 (M1) and newer */
    g->simdgroup_gemm = m->info.apple_family >= 7;
    if (!st) st = sp_gpu_init(be, g, pool, n_threads, status);
    if (st) sp_metal_backend_destroy(be);
    return st;
}

void sp_metal_backend_destroy(sp_backend *be) {
    sp_gpu *g = sp_gpu_of(be);
    if (!g) return;
    sp_mtl *m = sp_mtl_of(g);
    if (m->objc) {
        sp_gpu_release(g);
        sp_mtl_close(m);
    }
    free(m);
    free(g);
    be->impl = NULL;
}

const sp_metal_info *sp_metal_backend_info(const sp_backend *be) { return &sp_mtl_of(sp_gpu_of(be))->info; }
