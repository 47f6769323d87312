/* mtl.h — the Metal backend's internals. Three layers:
 *
 * - The GPU op layer (backends/gpu/: plain C11, shared with the Vulkan backend) owns every decision: which kernel,
 *   which function constants, how many threadgroups and threads, what goes in the push constants, where each byte
 *   lives, when a barrier is needed. Metal's memory is unified: every buffer is shared storage with a host view, so
 *   write, read and clear are memcpy after the encoded work has run, weights in a mapped file are wrapped without a
 *   copy, and host data for kernels is read from the ring where the host wrote it.
 * - backend.c (portable C) checks each pipeline and dispatch against the translated kernel's interface
 *   (kernels/msl/manifest.json: push size, declared function constants, threads per threadgroup) before the device
 *   layer sees it. It is compiled and tested on Linux (native/tests/metal_host_test.c runs it against the CPU backend
 *   over the Vulkan device).
 * - The device layer (the sp_mtl_* functions below) is the only code that calls Metal: device.m on macOS. It
 *   follows orders and decides nothing.
 *
 * Execution model. Ops encode into one compute encoder of one command buffer (MTLDispatchTypeConcurrent), open from
 * the first op until a sync (any read back to the host: logits, sampled tokens, which ends a step), so one step is
 * one command buffer; a barrier is memoryBarrierWithScope:MTLBarrierScopeBuffers. */
#ifndef SP_MTL_H
#define SP_MTL_H

#include "backends/gpu/gpu.h"
#include "metal.h"
#include "metal_kernels.h"

/* The device layer's state behind sp_gpu.device. */
typedef struct sp_mtl {
    sp_metal_info info;
    void *objc;              /* the device layer's objects (device, queue, residency set, open encoder) */
} sp_mtl;

static inline sp_mtl *sp_mtl_of(const sp_gpu *g) { return (sp_mtl *)g->device; }

/* ---- the device layer (device.m on macOS; the host test's adapter on Linux) ---- */

/* Opens the default GPU: device, queue, residency set; fills m->info. Fails with SPLASH_ERR_UNSUPPORTED and a
 * message naming what is missing when the GPU cannot run the kernels. */
splash_status sp_mtl_open(sp_mtl *m);
void sp_mtl_close(sp_mtl *m);
/* sp_gpu_device calls (gpu.h). Every buffer is shared storage (`mem` makes no difference on unified memory), zero-
 * filled and resident for every command buffer until released; sp_mtl_wrap wraps the pages of a mapped file. */
splash_status sp_mtl_buffer(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b);
splash_status sp_mtl_wrap(sp_gpu *g, const void *data, uint64_t bytes, sp_gpu_buffer *b, uint64_t *offset);
void sp_mtl_release(sp_gpu *g, sp_gpu_buffer *b);
void *sp_mtl_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads);
void sp_mtl_release_pipeline(sp_gpu *g, void *pipeline);
/* Encodes one dispatch: l->threads × 1 × 1 threads per threadgroup, the push bytes at the kernel's push index. */
splash_status sp_mtl_dispatch(sp_gpu *g, const sp_gpu_launch *l);
/* Ends encoding, commits the command buffer and waits for it; no-op when nothing is encoded. */
splash_status sp_mtl_finish(sp_gpu *g);

#endif
