/* moe.c — MoE routing (softmax → top-k → renormalize) and the routed experts' SwiGLU MLPs.
 *
 * Experts run grouped: the (token, slot) pairs of a step are sorted by expert (counting sort), each expert's rows are
 * gathered into one block, and the expert's three matrices are applied to the whole block with one matmul each, so a
 * batch reads each chosen expert's weights once instead of once per token. The weighted sum is then accumulated per
 * token in ascending expert order, the order HF's index_add_ loop uses. */
#include "ops.h"

#include "core/quant.h"

#include <string.h>

enum { MAX_EXPERTS = 1024 };

void sp_cpu_moe_route(const sp_backend *be, int32_t *ids, float *w, const float *logits, int64_t n, int32_t n_experts,
                      int32_t top_k) {
    for (int64_t i = 0; i < n; i++) {
        const float *l = logits + i * n_experts;
        int32_t *id = ids + i * top_k;
        float *wi = w + i * top_k;
        /* probs = softmax(logits) in fp32; only the chosen ones are needed, normalized by the full sum */
        float mx = l[0];
        for (int32_t e = 1; e < n_experts; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (int32_t e = 0; e < n_experts; e++) sum += expf(l[e] - mx);
        /* top k by repeated selection (k is small); ties go to the lower expert id */
        for (int32_t j = 0; j < top_k; j++) {
            int32_t best = -1;
            for (int32_t e = 0; e < n_experts; e++) {
                int taken = 0;
                for (int32_t q = 0; q < j; q++) taken |= id[q] == e;
                if (!taken && (best < 0 || l[e] > l[best])) best = e;
            }
            id[j] = best;
            wi[j] = (float)(expf(l[best] - mx) / sum);
        }
        /* always renormalize the k weights to sum to 1 */
        float s = 0;
        for (int32_t j = 0; j < top_k; j++) s += wi[j];
        for (int32_t j = 0; j < top_k; j++) wi[j] /= s;
    }
}

int64_t sp_moe_scratch_floats(int64_t n, int32_t top_k, int64_t hidden, int64_t inter) {
    int64_t pairs = n * top_k;
    return pairs * (2 * hidden + 2 * inter + 1);
}

void sp_cpu_moe_experts(const sp_backend *be, float *y, const float *x, const int32_t *ids, const float *w, int64_t n,
                        const sp_moe_experts *ex, float *scratch, const float *shared, const float *shared_gate) {
    int64_t H = ex->hidden, I = ex->inter, pairs = n * ex->top_k;
    float *xg = scratch, *hg = xg + pairs * H, *hu = hg + pairs * I, *yo = hu + pairs * I;
    int32_t *order = (int32_t *)(yo + pairs * H); /* pair index (token · top_k + slot), sorted by expert */
    int64_t start[MAX_EXPERTS + 1] = {0};
    for (int64_t p = 0; p < pairs; p++) start[ids[p] + 1]++;
    for (int32_t e = 0; e < ex->n_experts; e++) start[e + 1] += start[e];
    int64_t fill[MAX_EXPERTS];
    memcpy(fill, start, sizeof(int64_t) * (size_t)ex->n_experts);
    for (int64_t p = 0; p < pairs; p++) order[fill[ids[p]]++] = (int32_t)p;
    for (int64_t r = 0; r < pairs; r++) memcpy(xg + r * H, x + (order[r] / ex->top_k) * H, sizeof(float) * (size_t)H);

    for (int32_t e = 0; e < ex->n_experts; e++) {
        int64_t r0 = start[e], c = start[e + 1] - r0;
        if (c == 0) continue;
        /* down(silu(gate(x)) · up(x)) for the c rows routed to expert e */
        be->matmul(be, hg + r0 * I, &ex->gate[e], xg + r0 * H, c);
        be->matmul(be, hu + r0 * I, &ex->up[e], xg + r0 * H, c);
        be->silu_mul(be, hg + r0 * I, hg + r0 * I, hu + r0 * I, c * I);
        be->matmul(be, yo + r0 * H, &ex->down[e], hg + r0 * I, c);
    }

    memset(y, 0, sizeof(float) * (size_t)(n * H));
    for (int64_t r = 0; r < pairs; r++) {
        int64_t tok = order[r] / ex->top_k;
        float wt = w[order[r]];
        float *yt = y + tok * H;
        const float *src = yo + r * H;
        for (int64_t j = 0; j < H; j++) yt[j] += src[j] * wt;
    }
    for (int64_t i = 0; shared && i < n; i++) {
        float s = sp_sigmoid(shared_gate[i]);
        for (int64_t j = 0; j < H; j++) y[i * H + j] += s * shared[i * H + j];
    }
}
