/* metal.c — splash_metal_query: the Mac's GPU as the Metal backend sees it (native/backends/metal/), or
 * SPLASH_ERR_UNSUPPORTED in a library built without that backend. */
#include "splash.h"

#include "core/error.h"

#ifdef SPLASH_HAVE_METAL
#include "backends/metal/metal.h"
#endif

splash_status splash_metal_query(splash_metal_info *out) {
    if (!out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_metal_query: out is NULL");
    if (out->struct_size < sizeof *out)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_metal_info.struct_size %u < %zu: rebuild the binding",
                       out->struct_size, sizeof *out);
#ifdef SPLASH_HAVE_METAL
    sp_metal_info info;
    splash_status st = sp_metal_query(&info);
    if (st) return st;
    *out = (splash_metal_info){
        .struct_size = sizeof *out,
        .apple_family = info.apple_family,
        .metal3 = info.metal3,
        .usable = info.metal3 && info.apple_family >= 7 && info.unified_memory,
        .recommended_working_set = info.recommended_working_set,
        .max_buffer = info.max_buffer,
        .wired_limit = info.wired_limit,
    };
    return SPLASH_OK;
#else
    return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "this libsplash was built without the Metal backend (macOS builds have it)");
#endif
}
