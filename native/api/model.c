/* model.c — splash_model_*: load a checkpoint onto a backend (Metal, Vulkan or the CPU with its thread pool), report
 * what it holds. */
#include "model.h"

#include "arch/qwen3_5_vision.h"
#include "core/checkpoint.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/threadpool.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef SPLASH_HAVE_VULKAN
#include "backends/vulkan/vulkan.h"
#endif
#ifdef SPLASH_HAVE_METAL
#include "backends/metal/metal.h"
#endif

#if defined(SPLASH_HAVE_VULKAN) || defined(SPLASH_HAVE_METAL)
/* Appends why a GPU backend AUTO tried was passed over (the message it failed with, less its file:line) to `why`. */
static void passed_over(char *why, size_t cap) {
    const char *msg = splash_last_error(), *colon = strstr(msg, ": ");
    if (colon && colon < msg + 64) msg = colon + 2;
    size_t n = strlen(why);
    if (n + 1 < cap) snprintf(why + n, cap - n, "%s%s", n ? "; " : "", msg);
    sp_clear_error();
}
#endif

/* The backend asked for: AUTO tries a GPU (never lavapipe) and settles for the CPU, noting in `why` (cap bytes, may
 * be NULL) why each GPU was passed over; VULKAN accepts any device. */
static splash_status make_backend(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *op_status,
                                  int32_t backend, char *why, size_t cap) {
    char unused[256];
    if (!why || !cap) why = unused, cap = sizeof unused;
    why[0] = 0;
#ifdef SPLASH_HAVE_METAL
    if (backend == SPLASH_BACKEND_AUTO || backend == SPLASH_BACKEND_METAL) {
        splash_status st = sp_metal_backend_create(be, pool, n_threads, op_status);
        if (!st || backend == SPLASH_BACKEND_METAL) return st;
        passed_over(why, cap);
    }
#else
    if (backend == SPLASH_BACKEND_METAL)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "this libsplash was built without the Metal backend (macOS builds have it)");
#endif
#ifdef SPLASH_HAVE_VULKAN
    if (backend != SPLASH_BACKEND_CPU) {
        splash_status st = sp_vulkan_backend_create(be, pool, n_threads, op_status, backend == SPLASH_BACKEND_VULKAN);
        if (!st || backend == SPLASH_BACKEND_VULKAN) return st;
        passed_over(why, cap);
    }
#else
    if (backend == SPLASH_BACKEND_VULKAN)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "this libsplash was built without the Vulkan backend (no glslang or Vulkan headers)");
    if (backend == SPLASH_BACKEND_AUTO)
        snprintf(why + strlen(why), cap - strlen(why), "%sthis libsplash was built without the Vulkan backend", why[0] ? "; " : "");
#endif
    sp_cpu_backend_init(be, pool, n_threads, op_status);
    return SPLASH_OK;
}

static void destroy_backend(sp_backend *be) {
#ifdef SPLASH_HAVE_VULKAN
    if (be->impl && !strcmp(be->name, "vulkan")) sp_vulkan_backend_destroy(be);
#endif
#ifdef SPLASH_HAVE_METAL
    if (be->impl && !strcmp(be->name, "metal")) sp_metal_backend_destroy(be);
#endif
    (void)be;
}

/* What splash_model_backend says: the backend's name and its device. */
static void describe_backend(const sp_backend *be, char *out, size_t cap) {
    if (be->device) snprintf(out, cap, "%s: %s", be->name, be->device);
    else snprintf(out, cap, "%s", be->name);
}

const char *splash_tensor_kind_name(int32_t kind) {
    static const char *const NAMES[SPLASH_N_TENSOR_KINDS] = {
        [SPLASH_KIND_EMBED] = "embed",
        [SPLASH_KIND_LM_HEAD] = "lm_head",
        [SPLASH_KIND_NORM] = "norm",
        [SPLASH_KIND_ATTN_PROJ] = "attn_proj",
        [SPLASH_KIND_GDN_PROJ] = "gdn_proj",
        [SPLASH_KIND_GDN_GATE_PROJ] = "gdn_gate_proj",
        [SPLASH_KIND_GDN_CONV] = "gdn_conv",
        [SPLASH_KIND_GDN_PARAM] = "gdn_param",
        [SPLASH_KIND_MLP] = "mlp",
        [SPLASH_KIND_MOE_ROUTER] = "moe_router",
        [SPLASH_KIND_MOE_EXPERTS] = "moe_experts",
        [SPLASH_KIND_SHARED_EXPERT] = "shared_expert",
        [SPLASH_KIND_SHARED_EXPERT_GATE] = "shared_expert_gate",
        [SPLASH_KIND_MTP_FC] = "mtp_fc",
        [SPLASH_KIND_VISION] = "vision",
        [SPLASH_KIND_DFLASH] = "dflash",
    };
    return kind >= 0 && kind < SPLASH_N_TENSOR_KINDS ? NAMES[kind] : NULL;
}

splash_status splash_model_load(const char *dir, const splash_load_options *opts, splash_model **out) {
    if (!out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_load: out is NULL");
    *out = NULL;
    if (!dir) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_load: dir is NULL");
    splash_load_options o = {sizeof o, NULL, 0, 0, SPLASH_BACKEND_AUTO, 0, NULL};
    if (opts) {
        if (opts->struct_size < sizeof o)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_load_options.struct_size %u < %zu: rebuild the binding",
                           opts->struct_size, sizeof o);
        o = *opts;
    }
    for (int32_t k = 0; o.quant && k < SPLASH_N_TENSOR_KINDS; k++) {
        if (o.quant[k] < SPLASH_QUANT_NONE || o.quant[k] > SPLASH_QUANT_Q4)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "quant[%s] %d: expected 0 (none), 1 (q8) or 2 (q4)",
                           splash_tensor_kind_name(k), o.quant[k]);
        if (k == SPLASH_KIND_VISION && o.quant[k] != SPLASH_QUANT_NONE)
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "quant[vision] %d: the vision tower computes in f32 from its weights as "
                           "stored (0, none)", o.quant[k]);
    }
    if (o.n_threads < 0 || o.n_threads > 1024)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "n_threads %d: expected 0 (every core) .. 1024", o.n_threads);
    if (o.max_step_tokens < 0 || o.max_step_tokens > (1 << 20))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "max_step_tokens %d: expected 0 (default) .. 1048576", o.max_step_tokens);
    if (o.backend < SPLASH_BACKEND_AUTO || o.backend > SPLASH_BACKEND_METAL)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "backend %d: expected 0 (auto), 1 (cpu), 2 (vulkan) or 3 (metal)", o.backend);
    sp_cpu cpu;
    sp_cpu_detect(&cpu);
    int n = o.n_threads ? o.n_threads : cpu.n_cores;
    splash_model *m = calloc(1, sizeof *m);
    if (!m) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    splash_status st = sp_threadpool_create(n, &m->pool);
    if (!st) st = make_backend(&m->be, m->pool, n, &m->op_status, o.backend, NULL, 0);
    sp_checkpoint *ck = NULL;
    if (!st) st = sp_checkpoint_open(dir, &ck);
    if (!st) st = sp_qwen35_load(ck, &m->be, o.quant, o.max_step_tokens, &m->arch); /* the model owns ck from here */
    if (!st) st = sp_qwen35_set_tokens(m->arch, o.n_tokens, o.tokens);
    if (!st) st = sp_qwen35_vision_load(ck, m->pool, n, &m->vision);
    if (st) {
        splash_model_free(m);
        return st;
    }
    describe_backend(&m->be, m->backend, sizeof m->backend);
    *out = m;
    return SPLASH_OK;
}

const char *splash_model_backend(const splash_model *m) { return m ? m->backend : ""; }

uint32_t splash_model_kv_types(const splash_model *m) { return m ? m->be.kv_types : 0; }

static const char *kv_type_name(int32_t t) { return t == SPLASH_KV_F16 ? "f16" : t == SPLASH_KV_INT8 ? "int8" : "f32"; }

splash_status splash_model_set_kv_type(splash_model *m, int32_t kv_type) {
    if (!m) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_set_kv_type: model is NULL");
    if (kv_type < SPLASH_KV_F32 || kv_type > SPLASH_KV_INT8)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "kv_type %d: expected 0 (f32), 1 (f16) or 2 (int8)", kv_type);
    if (m->n_caches) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "set the KV type before creating a cache (page sizes change)");
    if (!(m->be.kv_types & (1u << kv_type))) {
        char have[32] = "";
        for (int32_t t = SPLASH_KV_F32; t <= SPLASH_KV_INT8; t++)
            if (m->be.kv_types & (1u << t)) snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", *have ? ", " : "", kv_type_name(t));
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "the %s backend has no %s KV cache (it has %s)", m->backend, kv_type_name(kv_type), have);
    }
    m->kv_type = kv_type;
    return SPLASH_OK;
}

splash_status splash_backend_probe(int32_t backend, char *name, int32_t name_cap, char *why, int32_t why_cap) {
    if (!name || name_cap < 1 || (why && why_cap < 1))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_backend_probe: name and why need room for their texts");
    if (backend < SPLASH_BACKEND_AUTO || backend > SPLASH_BACKEND_METAL)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "backend %d: expected 0 (auto), 1 (cpu), 2 (vulkan) or 3 (metal)", backend);
    name[0] = 0;
    sp_threadpool *pool;
    splash_status op_status = SPLASH_OK, st = sp_threadpool_create(1, &pool);
    if (st) return st;
    sp_backend be = {0};
    st = make_backend(&be, pool, 1, &op_status, backend, why, why ? (size_t)why_cap : 0);
    if (!st) describe_backend(&be, name, (size_t)name_cap);
    if (!st) destroy_backend(&be);
    sp_threadpool_free(pool);
    return st;
}

void splash_model_free(splash_model *m) {
    if (!m) return;
    sp_speculator_free(m->speculator);
    sp_qwen35_vision_free(m->vision);
    sp_qwen35_free(m->arch);
    destroy_backend(&m->be);
    sp_threadpool_free(m->pool);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

splash_status splash_model_get_info(const splash_model *m, splash_model_info *out) {
    if (!m || !out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_get_info: NULL argument");
    if (out->struct_size < sizeof *out)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_model_info.struct_size %u < %zu: rebuild the binding",
                       out->struct_size, sizeof *out);
    sp_qwen35_info(m->arch, out);
    out->kv_type = m->kv_type;
    out->kv_bytes_per_token = sp_qwen35_page_bytes(m->arch, 1, m->kv_type);
    out->has_vision = m->vision != NULL;
    if (m->speculator) sp_speculator_add_info(m->speculator, out); /* the drafter's weights and scratch */
    return SPLASH_OK;
}
