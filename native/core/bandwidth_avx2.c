/* bandwidth_avx2.c — one thread's share of the bandwidth measurement (bandwidth.h) with 256-bit loads. */
#include "bandwidth.h"

#include <immintrin.h>

uint64_t sp_stream_read_avx2(const uint64_t *p, int64_t begin, int64_t end) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    const __m256i *v = (const __m256i *)p;
    int64_t q = (end - begin) / 4 * 2; /* 256-bit words per quarter */
    const __m256i *s0 = v + begin * 2, *s1 = s0 + q, *s2 = s1 + q, *s3 = s2 + q;
    for (int64_t i = 0; i + 2 <= q; i += 2) {
        a = _mm256_add_epi64(a, _mm256_add_epi64(_mm256_load_si256(s0 + i), _mm256_load_si256(s0 + i + 1)));
        b = _mm256_add_epi64(b, _mm256_add_epi64(_mm256_load_si256(s1 + i), _mm256_load_si256(s1 + i + 1)));
        c = _mm256_add_epi64(c, _mm256_add_epi64(_mm256_load_si256(s2 + i), _mm256_load_si256(s2 + i + 1)));
        d = _mm256_add_epi64(d, _mm256_add_epi64(_mm256_load_si256(s3 + i), _mm256_load_si256(s3 + i + 1)));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
