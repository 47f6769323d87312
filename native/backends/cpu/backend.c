/* backend.c — the CPU backend: its op table, memory, and the parallel-for every op splits work with. */
#include "ops.h"

#include "core/threadpool.h"

#include <string.h>
#include <sys/mman.h>

/* Allocations are anonymous mappings: zeroed by the kernel on first touch, so a large KV cache costs nothing
 * until used. The mapping's size sits in a 64-byte header so the data stays 64-byte aligned. */
static void *cpu_alloc(const sp_backend *be, uint64_t bytes) {
    uint64_t total = bytes + 64;
    void *p = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *(uint64_t *)p = total;
    return (uint8_t *)p + 64;
}

static void cpu_free(const sp_backend *be, void *p) {
    if (!p) return;
    uint8_t *base = (uint8_t *)p - 64;
    munmap(base, (size_t) * (uint64_t *)base);
}

static void cpu_copy(const sp_backend *be, void *dst, const void *src, uint64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void cpu_clear(const sp_backend *be, void *dst, uint64_t bytes) { memset(dst, 0, (size_t)bytes); }
static void cpu_copy_rows(const sp_backend *be, float *dst, int64_t dst_stride, const float *src, int64_t src_stride,
                          int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) memcpy(dst + r * dst_stride, src + r * src_stride, sizeof(float) * (size_t)cols);
}

void sp_cpu_for(const sp_backend *be, int64_t n, sp_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (n == 1 || be->n_threads <= 1) fn(ctx, 0, n, 0);
    else sp_parallel_for(be->pool, n, fn, ctx);
}

void sp_cpu_backend_init(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status) {
    *be = (sp_backend){
        .name = "cpu",
        .pool = pool,
        .n_threads = n_threads,
        .status = status,
        .kv_types = 1u << SPLASH_KV_F32 | 1u << SPLASH_KV_F16 | 1u << SPLASH_KV_INT8,
        .alloc = cpu_alloc,
        .free = cpu_free,
        .write = cpu_copy,
        .read = cpu_copy,
        .clear = cpu_clear,
        .copy_rows = cpu_copy_rows,
        .matmul = sp_cpu_matmul,
        .embed = sp_cpu_embed,
        .add = sp_cpu_add,
        .silu_mul = sp_cpu_silu_mul,
        .matmul_gate_up = sp_cpu_matmul_gate_up,
        .sigmoid_mul = sp_cpu_sigmoid_mul,
        .rmsnorm = sp_cpu_rmsnorm,
        .add_rmsnorm = sp_cpu_add_rmsnorm,
        .rmsnorm_gated = sp_cpu_rmsnorm_gated,
        .rope = sp_cpu_rope,
        .attention_prep = sp_cpu_attention_prep,
        .kv_write = sp_cpu_kv_write,
        .attention = sp_cpu_attention,
        .attention_ext = sp_cpu_attention_ext,
        .conv_silu = sp_cpu_conv_silu,
        .block_conv = sp_cpu_block_conv,
        .gdn_recurrent = sp_cpu_gdn_recurrent,
        .gdn_core = sp_cpu_gdn_core,
        .moe_route = sp_cpu_moe_route,
        .moe_experts = sp_cpu_moe_experts,
        .layernorm = sp_cpu_layernorm,
        .gelu = sp_cpu_gelu,
        .add_rows = sp_cpu_add_rows,
        .sample = sp_cpu_sample,
    };
}
