/* metal.h — the Metal backend (kernels/msl/: the SPIR-V kernels translated by SPIRV-Cross; the GEMM on simdgroup
 * matrices written in MSL by hand, kernels/matmul_simdgroup.metal), for native/api/.
 *
 * Built on macOS only (scripts/build/native.ts); its portable part is also built on Linux into the host test
 * (native/tests/metal_host_test.c), which runs it over the Vulkan backend's device. */
#ifndef SP_METAL_H
#define SP_METAL_H

#include "backends/backend.h"

#include <stdint.h>

/* What the GPU is and how much memory the memory planner may give it. */
typedef struct sp_metal_info {
    char name[128];                   /* MTLDevice.name */
    int32_t apple_family;             /* highest MTLGPUFamilyAppleN supported (7 = M1, 8 = M2, 9 = M3/M4), 0 = none */
    int32_t metal3;                   /* supportsFamily(MTLGPUFamilyMetal3) */
    int32_t unified_memory;           /* MTLDevice.hasUnifiedMemory */
    uint64_t recommended_working_set; /* MTLDevice.recommendedMaxWorkingSetSize: bytes the GPU uses without paging */
    uint64_t max_buffer;              /* MTLDevice.maxBufferLength */
    uint64_t wired_limit;             /* sysctl iogpu.wired_limit_mb in bytes; 0 = the system's default */
    uint64_t page_size;               /* the VM page (16 KiB on Apple silicon): no-copy buffers are page-aligned */
} sp_metal_info;

/* The system's default GPU, without making a backend (splash doctor, the memory plan). Fails with
 * SPLASH_ERR_UNSUPPORTED when there is none. */
splash_status sp_metal_query(sp_metal_info *out);

/* Fills *be with the Metal backend on the system's default GPU; ops that stay on the CPU (sampling with penalties)
 * use `pool`. Fails with SPLASH_ERR_UNSUPPORTED and a message when there is no GPU with Metal 3 and Apple family 7
 * or newer (what the kernels need: 64-bit device addresses, SIMD-group reductions). */
splash_status sp_metal_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status);
void sp_metal_backend_destroy(sp_backend *be);
const sp_metal_info *sp_metal_backend_info(const sp_backend *be);

#endif
