/* vulkan.h — the Vulkan backend (kernels/ (GLSL) compiled to SPIR-V and embedded), for native/api/. What it shares
 * with the Metal backend (finish, the bandwidth probe, the matmul lab hook) is in backends/gpu/gpu.h.
 *
 * allow_cpu: accept a CPU implementation of Vulkan (Mesa's lavapipe). Automatic backend choice passes false, so only
 * a real GPU is used; tests pass true to run the kernels on lavapipe. */
#ifndef SP_VULKAN_H
#define SP_VULKAN_H

#include "backends/backend.h"

#include <stdbool.h>

/* Fills *be with the Vulkan backend on the chosen device; ops that fall back to the CPU (sampling with penalties)
 * use `pool`. Fails with SPLASH_ERR_UNSUPPORTED and a message naming why when no loader or usable device exists. */
splash_status sp_vulkan_backend_create(sp_backend *be, sp_threadpool *pool, int n_threads, splash_status *status,
                                       bool allow_cpu);
void sp_vulkan_backend_destroy(sp_backend *be);
/* The device's name ("NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)") and subgroup size. */
const char *sp_vulkan_device_name(const sp_backend *be);
uint32_t sp_vulkan_subgroup_size(const sp_backend *be);

#endif
