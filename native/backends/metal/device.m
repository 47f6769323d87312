/* device.m — the Metal backend's device layer: the only code that calls Metal (mtl.h explains the split). It
 * decides nothing: which kernel, which function constants, how many threadgroups and threads, the push bytes, every
 * barrier and every buffer size come from the portable C (the GPU op layer in backends/gpu/ and backend.c), which
 * the Linux test runs over the Vulkan device. Built only on macOS, with ARC (-fobjc-arc).
 *
 * Metal API used here, by name as in Apple's documentation (developer.apple.com/documentation/metal), each call
 * checked against its page:
 *   MTLCreateSystemDefaultDevice()      the GPU (command-line tools must link CoreGraphics for it: native.ts does);
 *   MTLCopyAllDevices()                 the first GPU when there is no default (an Apple silicon Mac has one)
 *   MTLDevice       name, supportsFamily: (MTLGPUFamilyApple1 = 1001 … AppleN = 1000 + N, MTLGPUFamilyMetal3),
 *                   hasUnifiedMemory, recommendedMaxWorkingSetSize, maxBufferLength, newCommandQueue,
 *                   newResidencySetWithDescriptor:error: (macOS 15), newBufferWithLength:options: (zero-filled),
 *                   newBufferWithBytesNoCopy:length:options:deallocator: (page-aligned pointer and length),
 *                   newLibraryWithSource:options:error:, newComputePipelineStateWithFunction:error:
 *   MTLResourceOptions   MTLResourceStorageModeShared (unified memory: contents is the host view),
 *                        MTLResourceHazardTrackingModeUntracked (record.c orders every access)
 *   MTLBuffer       contents, gpuAddress (macOS 13: what kernels read through push constants)
 *   MTLResidencySetDescriptor   label, initialCapacity
 *   MTLResidencySet addAllocation:, removeAllocation:, commit, requestResidency (buffers reached only through
 *                   gpuAddress are never bound, so the set on the queue is what makes them resident)
 *   MTLCommandQueue addResidencySet:, removeResidencySet:, commandBuffer
 *   MTLCompileOptions   languageVersion = MTLLanguageVersion3_0 (the MSL SPIRV-Cross wrote), mathMode =
 *                   MTLMathModeSafe and mathFloatingPointFunctions = MTLMathFloatingPointFunctionsPrecise (macOS 15:
 *                   the default is fast math, which may drop the infinities softmax relies on)
 *   MTLLibrary      newFunctionWithName:constantValues:error:
 *   MTLFunctionConstantValues   setConstantValue:type:atIndex: with MTLDataTypeUInt (the kernels' constants are uint)
 *   MTLComputePipelineState     maxTotalThreadsPerThreadgroup
 *   MTLCommandBuffer    computeCommandEncoderWithDispatchType: (MTLDispatchTypeConcurrent), commit,
 *                   waitUntilCompleted, status (MTLCommandBufferStatusCompleted), error
 *   MTLComputeCommandEncoder    setComputePipelineState:, setBytes:length:atIndex: (push constants, < 4 KiB),
 *                   memoryBarrierWithScope: (MTLBarrierScopeBuffers), dispatchThreadgroups:threadsPerThreadgroup:,
 *                   dispatchThreadgroupsWithIndirectBuffer:indirectBufferOffset:threadsPerThreadgroup: (the buffer
 *                   holds MTLDispatchThreadgroupsIndirectArguments: 3 × uint32, 4-byte aligned), endEncoding
 *   MTLSizeMake
 * Besides Metal: sysctlbyname("iogpu.wired_limit_mb") (the GPU wired-memory limit, 0 = default), getpagesize(),
 * proc_pidinfo(PROC_PIDREGIONPATHINFO) from <libproc.h> (the file and offset behind a page), open/fstat/mmap/munmap.
 *
 * Objects live across calls through retained handles (__bridge_retained / __bridge_transfer); every function body
 * runs in an @autoreleasepool, since the library is called from threads that have none. */
#include "mtl.h"

#include "core/error.h"

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <fcntl.h>
#include <libproc.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysctl.h>
#include <unistd.h>

static const MTLResourceOptions BUFFER_OPTIONS = MTLResourceStorageModeShared | MTLResourceHazardTrackingModeUntracked;

@interface SPMetalState : NSObject
@property(nonatomic, strong) id<MTLDevice> device;
@property(nonatomic, strong) id<MTLCommandQueue> queue;
@property(nonatomic, strong) id<MTLResidencySet> residency;
@property(nonatomic) BOOL residencyDirty; /* allocations added since the last commit of the set */
@property(nonatomic, strong) NSMutableDictionary<NSNumber *, id<MTLLibrary>> *libraries; /* by kernel id */
@property(nonatomic, strong) id<MTLCommandBuffer> commandBuffer; /* the open one, with its encoder */
@property(nonatomic, strong) id<MTLComputeCommandEncoder> encoder;
@property(nonatomic, strong) id<MTLComputePipelineState> bound;
@end

@implementation SPMetalState
@end

static SPMetalState *state_of(sp_gpu *g) { return (__bridge SPMetalState *)sp_mtl_of(g)->objc; }

static const char *describe(NSError *e) { return e ? e.localizedDescription.UTF8String : "no reason given"; }

static id<MTLDevice> default_device(void) {
    id<MTLDevice> dev = MTLCreateSystemDefaultDevice();
    return dev ? dev : MTLCopyAllDevices().firstObject;
}

static void fill_info(id<MTLDevice> dev, sp_metal_info *info) {
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", dev.name.UTF8String);
    for (NSInteger n = 1; n <= 12; n++) /* MTLGPUFamilyAppleN = 1000 + N (Apple11 is in the SDK docs; 12 for what comes next) */
        if ([dev supportsFamily:(MTLGPUFamily)(1000 + n)]) info->apple_family = (int32_t)n;
    info->metal3 = [dev supportsFamily:MTLGPUFamilyMetal3];
    info->unified_memory = dev.hasUnifiedMemory;
    info->recommended_working_set = dev.recommendedMaxWorkingSetSize;
    info->max_buffer = dev.maxBufferLength;
    int mb = 0;
    size_t size = sizeof mb;
    if (!sysctlbyname("iogpu.wired_limit_mb", &mb, &size, NULL, 0) && mb > 0) info->wired_limit = (uint64_t)mb << 20;
    info->page_size = (uint64_t)getpagesize();
}

splash_status sp_metal_query(sp_metal_info *out) {
    @autoreleasepool {
        id<MTLDevice> dev = default_device();
        if (!dev) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "metal: no GPU (Metal lists no device)");
        fill_info(dev, out);
        return SPLASH_OK;
    }
}

splash_status sp_mtl_open(sp_mtl *m) {
    @autoreleasepool {
        id<MTLDevice> dev = default_device();
        if (!dev) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "metal: no GPU (Metal lists no device)");
        fill_info(dev, &m->info);
        /* 64-bit device addresses in push constants need Metal 3; SIMD-group reductions, Apple family 7 (M1) */
        if (!m->info.metal3 || m->info.apple_family < 7 || !m->info.unified_memory)
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "metal: %s (Apple family %d, Metal 3: %s) cannot run the kernels: they need Metal 3 "
                           "and an Apple GPU of family 7 (M1) or newer", m->info.name, m->info.apple_family, m->info.metal3 ? "yes" : "no");
        SPMetalState *s = [SPMetalState new];
        s.device = dev;
        s.queue = [dev newCommandQueue];
        MTLResidencySetDescriptor *desc = [MTLResidencySetDescriptor new];
        desc.label = @"splash";
        desc.initialCapacity = 256;
        NSError *err = nil;
        s.residency = [dev newResidencySetWithDescriptor:desc error:&err];
        if (!s.queue || !s.residency)
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "metal: no command queue or residency set on %s: %s", m->info.name, describe(err));
        [s.queue addResidencySet:s.residency];
        s.libraries = [NSMutableDictionary new];
        m->objc = (__bridge_retained void *)s;
        return SPLASH_OK;
    }
}

void sp_mtl_close(sp_mtl *m) {
    @autoreleasepool {
        SPMetalState *s = (__bridge_transfer SPMetalState *)m->objc;
        m->objc = NULL;
        [s.queue removeResidencySet:s.residency];
    }
}

/* Makes the set's staged additions part of it: before a command buffer that may use them is committed. */
static void commit_residency(SPMetalState *s) {
    if (!s.residencyDirty) return;
    [s.residency commit];
    [s.residency requestResidency];
    s.residencyDirty = NO;
}

static void keep(SPMetalState *s, id<MTLBuffer> buf, uint64_t size, sp_gpu_buffer *b) {
    [s.residency addAllocation:buf];
    s.residencyDirty = YES;
    *b = (sp_gpu_buffer){.handle = (__bridge_retained void *)buf, .host = (uint8_t *)buf.contents, .addr = buf.gpuAddress,
                         .size = size};
}

splash_status sp_mtl_buffer(sp_gpu *g, uint64_t bytes, sp_gpu_memory mem, sp_gpu_buffer *b) {
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        id<MTLBuffer> buf = [s.device newBufferWithLength:(NSUInteger)bytes options:BUFFER_OPTIONS];
        if (!buf) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "metal: no memory for a buffer of %llu bytes", (unsigned long long)bytes);
        keep(s, buf, bytes, b);
        return SPLASH_OK;
    }
}

/* The file behind the pages of [data, data + bytes), mapped again read-only at the same file offset: the same page
 * cache pages as the loader's mapping (no copy), and a mapping of our own that lives as long as the buffer (the
 * loader may unmap its own first). NULL when the pages are not one file mapping, or the bytes differ. */
static void *map_file_pages(const void *data, uint64_t bytes, uint64_t page, uint64_t *len, uint64_t *offset) {
    uintptr_t lo = (uintptr_t)data / page * page, hi = ((uintptr_t)data + bytes + page - 1) / page * page;
    struct proc_regionwithpathinfo info;
    if (proc_pidinfo(getpid(), PROC_PIDREGIONPATHINFO, (uint64_t)lo, &info, sizeof info) != (int)sizeof info) return NULL;
    uint64_t start = info.prp_prinfo.pri_address, size = info.prp_prinfo.pri_size;
    if (!info.prp_vip.vip_path[0] || lo < start || hi > start + size) return NULL;
    uint64_t file_offset = info.prp_prinfo.pri_offset + (lo - start);
    int fd = open(info.prp_vip.vip_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (!fstat(fd, &st) && file_offset + (hi - lo) <= ((uint64_t)st.st_size + page - 1) / page * page)
        p = mmap(NULL, hi - lo, PROT_READ, MAP_SHARED, fd, (off_t)file_offset);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    /* the same bytes at both ends, or the region's offset was not what it seemed */
    uint64_t off = (uintptr_t)data - lo, probe = bytes < 65536 ? bytes : 65536;
    const uint8_t *mine = (const uint8_t *)p + off, *theirs = data;
    if (memcmp(mine, theirs, (size_t)probe) || memcmp(mine + bytes - probe, theirs + bytes - probe, (size_t)probe)) {
        munmap(p, hi - lo);
        return NULL;
    }
    *len = hi - lo;
    *offset = off;
    return p;
}

splash_status sp_mtl_wrap(sp_gpu *g, const void *data, uint64_t bytes, sp_gpu_buffer *b, uint64_t *offset) {
    const sp_metal_info *info = &sp_mtl_of(g)->info;
    uint64_t len = 0, off = 0;
    void *pages = map_file_pages(data, bytes, info->page_size, &len, &off);
    if (!pages) return SPLASH_ERR_UNSUPPORTED;
    if (len > info->max_buffer) {
        munmap(pages, len);
        return SPLASH_ERR_UNSUPPORTED;
    }
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        id<MTLBuffer> buf = [s.device newBufferWithBytesNoCopy:pages
                                                        length:(NSUInteger)len
                                                       options:BUFFER_OPTIONS
                                                   deallocator:^(void *p, NSUInteger n) { munmap(p, n); }];
        if (!buf) {
            munmap(pages, len);
            return SPLASH_ERR_UNSUPPORTED;
        }
        keep(s, buf, len, b);
        *offset = off;
        return SPLASH_OK;
    }
}

void sp_mtl_release(sp_gpu *g, sp_gpu_buffer *b) {
    if (!b->handle) return;
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        id<MTLBuffer> buf = (__bridge_transfer id<MTLBuffer>)b->handle;
        [s.residency removeAllocation:buf];
        [s.residency commit];
        s.residencyDirty = NO;
    }
    memset(b, 0, sizeof *b);
}

void *sp_mtl_pipeline(sp_gpu *g, sp_gpu_kernel_id k, const uint32_t spec[4], uint32_t *max_threads) {
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        const sp_mtl_kernel *K = &sp_mtl_kernels[k];
        NSError *err = nil;
        id<MTLLibrary> lib = s.libraries[@(k)];
        if (!lib) { /* each kernel is its own library (its MSL defines types every kernel names alike) */
            MTLCompileOptions *o = [MTLCompileOptions new];
            o.languageVersion = MTLLanguageVersion3_0;
            o.mathMode = MTLMathModeSafe;
            o.mathFloatingPointFunctions = MTLMathFloatingPointFunctionsPrecise;
            lib = [s.device newLibraryWithSource:@(K->source) options:o error:&err];
            if (!lib) {
                SP_FAIL(SPLASH_ERR_INTERNAL, "metal: compiling %s: %s", K->name, describe(err));
                return NULL;
            }
            s.libraries[@(k)] = lib;
        }
        MTLFunctionConstantValues *values = [MTLFunctionConstantValues new];
        for (NSUInteger i = 0; i < 4; i++)
            if (K->constants >> i & 1u) [values setConstantValue:&spec[i] type:MTLDataTypeUInt atIndex:i];
        id<MTLFunction> fn = [lib newFunctionWithName:@(K->entry) constantValues:values error:&err];
        if (!fn) {
            SP_FAIL(SPLASH_ERR_INTERNAL, "metal: specializing %s: %s", K->name, describe(err));
            return NULL;
        }
        id<MTLComputePipelineState> p = [s.device newComputePipelineStateWithFunction:fn error:&err];
        if (!p) {
            SP_FAIL(SPLASH_ERR_INTERNAL, "metal: pipeline for %s: %s", K->name, describe(err));
            return NULL;
        }
        *max_threads = (uint32_t)p.maxTotalThreadsPerThreadgroup;
        return (__bridge_retained void *)p;
    }
}

void sp_mtl_release_pipeline(sp_gpu *g, void *pipeline) {
    @autoreleasepool {
        id<MTLComputePipelineState> p = (__bridge_transfer id<MTLComputePipelineState>)pipeline;
        if (state_of(g).bound == p) state_of(g).bound = nil;
    }
}

splash_status sp_mtl_dispatch(sp_gpu *g, const sp_gpu_launch *l) {
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        if (!s.encoder) {
            commit_residency(s);
            s.commandBuffer = [s.queue commandBuffer];
            s.encoder = [s.commandBuffer computeCommandEncoderWithDispatchType:MTLDispatchTypeConcurrent];
            s.bound = nil;
            if (!s.encoder) return SP_FAIL(SPLASH_ERR_INTERNAL, "metal: no compute command encoder");
        }
        id<MTLComputeCommandEncoder> enc = s.encoder;
        id<MTLComputePipelineState> p = (__bridge id<MTLComputePipelineState>)l->pipeline;
        if (l->barrier) [enc memoryBarrierWithScope:MTLBarrierScopeBuffers];
        if (s.bound != p) {
            [enc setComputePipelineState:p];
            s.bound = p;
        }
        [enc setBytes:l->push length:l->push_bytes atIndex:sp_mtl_kernels[l->kernel].push_index];
        MTLSize tg = MTLSizeMake(l->threads, 1, 1);
        if (l->indirect)
            [enc dispatchThreadgroupsWithIndirectBuffer:(__bridge id<MTLBuffer>)l->indirect->handle
                                   indirectBufferOffset:(NSUInteger)l->indirect_offset
                                  threadsPerThreadgroup:tg];
        else
            [enc dispatchThreadgroups:MTLSizeMake(l->groups[0], l->groups[1], l->groups[2]) threadsPerThreadgroup:tg];
        return SPLASH_OK;
    }
}

splash_status sp_mtl_finish(sp_gpu *g) {
    @autoreleasepool {
        SPMetalState *s = state_of(g);
        if (!s.encoder) return SPLASH_OK;
        [s.encoder endEncoding];
        id<MTLCommandBuffer> cb = s.commandBuffer;
        s.encoder = nil;
        s.commandBuffer = nil;
        s.bound = nil;
        commit_residency(s); /* buffers made while this command buffer was encoded (MoE expert tables) */
        [cb commit];
        [cb waitUntilCompleted];
        if (cb.status != MTLCommandBufferStatusCompleted)
            return SP_FAIL(SPLASH_ERR_INTERNAL, "metal: command buffer failed: %s", describe(cb.error));
        return SPLASH_OK;
    }
}
