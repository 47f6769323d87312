/* rank.c — see rank.h. */
#include "core/rank.h"

#include <math.h>

static inline void swap(int32_t *idx, int64_t i, int64_t j) {
    int32_t t = idx[i];
    idx[i] = idx[j];
    idx[j] = t;
}

/* A heap whose root ranks last, so popping roots to the end leaves the array best-first. */
static void sift(int32_t *idx, int64_t root, int64_t n, const float *w) {
    for (;;) {
        int64_t c = 2 * root + 1;
        if (c >= n) return;
        if (c + 1 < n && sp_rank_before(w, idx[c], idx[c + 1])) c++;
        if (!sp_rank_before(w, idx[root], idx[c])) return;
        swap(idx, root, c);
        root = c;
    }
}

void sp_rank_sort(int32_t *idx, int64_t n, const float *w) {
    for (int64_t i = n / 2 - 1; i >= 0; i--) sift(idx, i, n, w);
    for (int64_t end = n - 1; end > 0; end--) {
        swap(idx, 0, end);
        sift(idx, 0, end, w);
    }
}

void sp_rank_select(int32_t *idx, int64_t n, int64_t k, const float *w) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t pivot = idx[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (sp_rank_before(w, idx[i], pivot)) i++;
            while (sp_rank_before(w, pivot, idx[j])) j--;
            if (i <= j) swap(idx, i++, j--);
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else return;
    }
}

int32_t sp_rank_top(const float *w, int64_t n, int32_t k, int32_t *ids) {
    int32_t have = 0;
    for (int64_t t = 0; t < n && k > 0; t++) {
        if (w[t] == -INFINITY || (have == k && !sp_rank_before(w, (int32_t)t, ids[k - 1]))) continue;
        int32_t i = have < k ? have++ : k - 1;
        while (i > 0 && sp_rank_before(w, (int32_t)t, ids[i - 1])) {
            ids[i] = ids[i - 1];
            i--;
        }
        ids[i] = (int32_t)t;
    }
    return have;
}
