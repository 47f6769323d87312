#include "core/sampling.h"

#include "core/mask.h"
#include "core/rank.h"

#include <string.h>

void sp_sampling_row(float *z, const float *logits, int32_t V, const splash_sampling *s, const int32_t *penalty,
                     int32_t n_penalty, const uint32_t *allowed, const uint32_t *tokens, uint32_t *seen) {
    memcpy(z, logits, sizeof(float) * (size_t)V);
    int rep = s->repetition_penalty != 1.0f && s->repetition_penalty > 0;
    if (rep || s->presence_penalty != 0 || s->frequency_penalty != 0) {
        memset(seen, 0, (size_t)sp_sampling_row_scratch(V));
        for (int32_t i = 0; i < n_penalty; i++) {
            int32_t t = penalty[i];
            if (t < 0 || t >= V) continue;
            if (!(seen[t >> 5] & (1u << (t & 31)))) {
                seen[t >> 5] |= 1u << (t & 31);
                if (rep) z[t] = z[t] > 0 ? z[t] / s->repetition_penalty : z[t] * s->repetition_penalty;
                z[t] -= s->presence_penalty;
            }
            z[t] -= s->frequency_penalty;
        }
    }
    for (int32_t k = 0; k < s->n_bias; k++) z[s->bias_ids[k]] += s->bias[k];
    sp_mask_row(z, V, allowed, tokens);
}

/* Bin of a weight in (0, 1]: its exponent and top 3 mantissa bits, 0 for the largest weights. */
static inline int32_t bin_of(float w) {
    uint32_t bits;
    memcpy(&bits, &w, sizeof bits);
    int32_t b = (int32_t)((127u << 3) - (bits >> 20)); /* (exponent, 3 mantissa bits) counted down from 1.0 */
    return b < 0 ? 0 : b >= SP_SAMPLE_BINS ? SP_SAMPLE_BINS - 1 : b;
}

/* Keeps the smallest most-likely subset of idx[0..c) whose mass reaches `need`, moved to the front; returns its
 * size. Bins by weight, takes whole bins from the top, then sorts only the bin where the mass crosses `need`. */
static int64_t nucleus(int32_t *idx, int64_t c, const float *w, uint64_t need, uint64_t *mass) {
    memset(mass, 0, sizeof(uint64_t) * SP_SAMPLE_BINS);
    for (int64_t i = 0; i < c; i++) mass[bin_of(w[idx[i]])] += sp_sample_mass(w[idx[i]]);
    uint64_t cum = 0;
    int32_t cut = 0;
    while (cut < SP_SAMPLE_BINS - 1 && cum + mass[cut] < need) cum += mass[cut++];
    int64_t above = 0; /* tokens in bins before `cut` go first, then the cut bin's tokens */
    for (int64_t i = 0; i < c; i++)
        if (bin_of(w[idx[i]]) < cut) {
            int32_t t = idx[above];
            idx[above++] = idx[i];
            idx[i] = t;
        }
    int64_t in_cut = above;
    for (int64_t i = above; i < c; i++)
        if (bin_of(w[idx[i]]) == cut) {
            int32_t t = idx[in_cut];
            idx[in_cut++] = idx[i];
            idx[i] = t;
        }
    sp_rank_sort(idx + above, in_cut - above, w);
    int64_t keep = above;
    while (keep < in_cut && cum < need) cum += sp_sample_mass(w[idx[keep++]]);
    return keep > 0 ? keep : 1;
}

int64_t sp_sample_kept(const float *w, int32_t V, const splash_sampling *s, int32_t *idx, uint64_t *bins) {
    /* candidates: tokens of non-zero mass. With top_p alone, a token of mass m with m · V ≤ total − need cannot be
     * in the nucleus (it and everything ranked after it would weigh more than what top_p leaves out), so the
     * filter drops most of a peaked distribution before any selection. */
    uint64_t need = 0, floor_m = 0;
    uint32_t fraction = s->top_p < 1 ? sp_top_p_fraction(s->top_p) : 0;
    if (s->top_p < 1 && s->top_k <= 0) {
        uint64_t all = 0;
        for (int32_t t = 0; t < V; t++) all += sp_sample_mass(w[t]);
        need = sp_top_p_need(all, fraction);
        floor_m = (all - need) / (uint64_t)V;
    }
    int64_t c = 0;
    for (int32_t t = 0; t < V; t++)
        if (w[t] >= SP_SAMPLE_MIN_W && sp_sample_mass(w[t]) > floor_m) idx[c++] = t;
    int sorted = 0;
    if (s->top_k > 0 && s->top_k < c) {
        if (s->top_k <= 64) { /* one scan keeping the best k in order: few insertions after the first rows */
            int32_t k = s->top_k, have = 0;
            for (int64_t i = 0; i < c; i++) {
                int32_t t = idx[i];
                if (have == k && !sp_rank_before(w, t, idx[k - 1])) continue;
                int32_t at = have < k ? have++ : k - 1;
                while (at > 0 && sp_rank_before(w, t, idx[at - 1])) idx[at] = idx[at - 1], at--;
                idx[at] = t;
            }
        } else {
            sp_rank_select(idx, c, s->top_k, w);
            sp_rank_sort(idx, s->top_k, w);
        }
        c = s->top_k;
        sorted = 1;
    }
    if (s->top_p < 1) {
        if (!need) { /* after top_k, top_p is relative to the kept tokens */
            uint64_t total = 0;
            for (int64_t i = 0; i < c; i++) total += sp_sample_mass(w[idx[i]]);
            need = sp_top_p_need(total, fraction);
        }
        if (sorted) {
            uint64_t cum = 0;
            int64_t keep = 0;
            while (keep < c && cum < need) cum += sp_sample_mass(w[idx[keep++]]);
            c = keep;
        } else {
            c = nucleus(idx, c, w, need, bins);
        }
    }
    if (s->min_p > 0) c = sp_min_p_keep(idx, c, w, s->min_p);
    return c;
}
