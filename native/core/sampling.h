/* sampling.h — the row a sampler draws from: the logits after the penalties, the bias and the masks. The CPU
 * sampler (backends/cpu/sample.c) and speculative acceptance (draft/accept.c) build it the same way through this. */
#ifndef SP_CORE_SAMPLING_H
#define SP_CORE_SAMPLING_H

#include "splash.h"

#include <math.h>
#include <stdint.h>

/* Bytes of the scratch sp_sampling_row needs for a vocabulary of V (a bitmask of the penalized ids). */
static inline uint64_t sp_sampling_row_scratch(int32_t V) { return ((uint64_t)V + 31) / 32 * sizeof(uint32_t); }

/* z[V] = logits with s's repetition, presence and frequency penalties over the n_penalty tokens (each distinct id
 * once for repetition and presence, every occurrence for frequency), then s's bias, then −inf outside the
 * intersection of `allowed` and `tokens` (NULL: every id). seen: sp_sampling_row_scratch(V) bytes. */
void sp_sampling_row(float *z, const float *logits, int32_t V, const splash_sampling *s, const int32_t *penalty,
                     int32_t n_penalty, const uint32_t *allowed, const uint32_t *tokens, uint32_t *seen);

/* min-p: the candidates idx[0..c) keep those of weight ≥ min_p (weights relative to the largest, which is 1; a min_p
 * above 1 counts as 1), in order; at least the first. Returns how many are kept. */
static inline int64_t sp_min_p_keep(int32_t *idx, int64_t c, const float *w, float min_p) {
    float floor_w = min_p < 1 ? min_p : 1;
    int64_t m = 0;
    for (int64_t i = 0; i < c; i++)
        if (w[idx[i]] >= floor_w) idx[m++] = idx[i];
    return m > 0 ? m : 1;
}

/* ---- sampling at temperature > 0, in arithmetic every backend carries out alike ----------------------------------
 * A CPU and a GPU must draw the same token from the same row and seed, so nothing the draw depends on may hang on
 * the order of a sum or on a library's exp:
 *   w = sp_sample_exp((z − max z) · (1/T))   float ops without fused multiply-adds, each correctly rounded on every
 *                                           CPU and under Vulkan, so w has the same bits everywhere (the best is 1);
 *   mass = ⌊w · 2^44⌋                       an integer, so sums are exact in any order (a row of up to 2^20 ids);
 *   tokens of mass 0 (w < 2^-44: a logit more than 30.5·T below the best) are never drawn.
 * top-k and top-p keep best-first prefixes ranked by w (then the lower id); top-p's need and the draw's point are
 * integers (below), and the draw walks the kept ids in id order until their running mass passes the point.
 * kernels/sample.comp is the GPU's copy of these functions, op for op. */

enum { SP_SAMPLE_MASS_BITS = 44 };
#define SP_SAMPLE_MIN_W 0x1p-44f /* the smallest weight of non-zero mass */

/* exp(x) for x ≤ 0: the Cephes expf polynomial (0 below −87), one rounding per statement, so no
 * compiler fuses a multiply into an add (C11 compilers contract only within an expression); within an ulp of exp. */
static inline float sp_sample_exp(float in) {
    float x = in > -87.0f ? in : -87.0f;
    float n = nearbyintf(x * 1.44269504f);
    float a = n * 0.693359375f;
    float r = x - a;
    float b = n * 2.12194440e-4f;
    r = r + b;
    float p = 1.9875691500e-4f, t;
    t = p * r, p = t + 1.3981999507e-3f;
    t = p * r, p = t + 8.3334519073e-3f;
    t = p * r, p = t + 4.1665795894e-2f;
    t = p * r, p = t + 1.6666665459e-1f;
    t = p * r, p = t + 5.0000001201e-1f;
    t = p * r;
    t = t * r;
    float y = t + r;
    y = y + 1.0f;
    union { uint32_t u; float f; } e = {.u = (uint32_t)((int32_t)n + 127) << 23};
    return in >= -87.0f ? y * e.f : 0.0f;
}

static inline uint64_t sp_sample_mass(float w) { return (uint64_t)(w * 0x1p44f); }

enum { SP_SAMPLE_BINS = 2048 };

/* The tokens a sampler at temperature > 0 draws from, given the row's weights w[V] (0 where the masks leave a token
 * out): those of non-zero mass, cut by s's top-k, top-p and min-p, into idx[0 … return) (idx: V entries). Nothing
 * sorts the vocabulary: top-k keeps its best in one scan (or a quickselect), top-p bins the weights by their float
 * exponent and sorts only the bin where the cut falls. bins: SP_SAMPLE_BINS entries of scratch. The CPU sampler and
 * speculative acceptance (draft/accept.c) both cut with this, so a draft is judged against exactly the distribution
 * the sampler draws from. */
int64_t sp_sample_kept(const float *w, int32_t V, const splash_sampling *s, int32_t *idx, uint64_t *bins);

/* top-p's threshold as a 32-bit fraction (top_p < 1), and the mass a nucleus must reach: ⌈total · fraction / 2^32⌉,
 * at least 1 (top_p 0 keeps the most likely token alone). */
static inline uint32_t sp_top_p_fraction(float top_p) { return top_p > 0 ? (uint32_t)((double)top_p * 0x1p32) : 0; }
static inline uint64_t sp_top_p_need(uint64_t total, uint32_t fraction) {
    uint64_t need = (total >> 32) * fraction + (((total & 0xffffffffu) * fraction + 0xffffffffu) >> 32);
    return need > 0 ? need : 1;
}

/* The draw u of a sequence at a position, a 53-bit integer (u / 2^53 is uniform in [0, 1)): splitmix64's finalizer
 * over (seed, stream, position), a counter-based generator with no state between calls, so a row samples the same
 * alone or batched, on any backend. Stream 0 is the sampler's; speculative acceptance draws from others
 * (draft/accept.h). */
static inline uint64_t sp_sample_u53(uint64_t seed, uint32_t stream, uint64_t position) {
    uint64_t z = (seed ^ (0xD1B54A32D192ED03ull * stream)) + 0x9E3779B97F4A7C15ull * (position + 1);
    for (int i = 0; i < 2; i++) {
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
    }
    return z >> 11;
}

/* The point the draw lands on in [0, total): ⌊u53 · total / 2^53⌋, the 117-bit product in 32-bit pieces. */
static inline uint64_t sp_sample_point(uint64_t u53, uint64_t total) {
    uint64_t m = 0xffffffffu, al = u53 & m, ah = u53 >> 32, bl = total & m, bh = total >> 32;
    uint64_t p0 = al * bl, p1 = al * bh, p2 = ah * bl, p3 = ah * bh;
    uint64_t mid = (p0 >> 32) + (p1 & m) + (p2 & m);
    uint64_t hi = p3 + (p1 >> 32) + (p2 >> 32) + (mid >> 32), lo = (mid << 32) | (p0 & m);
    return (hi << 11) | (lo >> 53);
}

#endif
