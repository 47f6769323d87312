// route.glsl — one token's MoE routing with the CPU backend's results (sp_cpu_moe_route): softmax over the E router
// logits in fp32, the top k (ties to the lower id), their weights renormalized to sum 1. The whole workgroup runs it in
// uniform control flow: the logits go to shared memory, each expert's rank (the experts before it: a larger logit, or
// an equal one at a lower id) is counted there, and rank j is slot j — the CPU's repeated selection, in one pass.
// Leaves route_id[0..k) for every invocation and, with weights, route_w[0..k). E ≤ ROUTE_E_MAX, k ≤ ROUTE_K_MAX.
#define ROUTE_E_MAX 1024u
#define ROUTE_K_MAX 64u
shared float route_l[ROUTE_E_MAX];
shared uint route_id[ROUTE_K_MAX];
shared float route_w[ROUTE_K_MAX];

void route_token(uint64_t logits, uint E, uint k, bool weights) {
    uint tid = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
    Floats l = Floats(logits);
    float mx = -1.0 / 0.0;
    for (uint e = tid; e < E; e += wg) {
        route_l[e] = l.v[e];
        mx = max(mx, route_l[e]);
    }
    barrier();
    for (uint e = tid; e < E; e += wg) {
        float v = route_l[e];
        uint rank = 0u;
        for (uint f = 0u; f < E && rank < k; f++) {
            float u = route_l[f];
            rank += u > v || (u == v && f < e) ? 1u : 0u;
        }
        if (rank < k) route_id[rank] = e;
    }
    if (!weights) {
        barrier();
        return;
    }
    mx = workgroup_max(mx);
    float sum = 0.0;
    for (uint e = tid; e < E; e += wg) sum += exp(route_l[e] - mx);
    sum = workgroup_sum(sum);  // its barriers also publish route_id
    if (tid == 0u) {
        float s = 0.0;
        for (uint j = 0u; j < k; j++) {
            route_w[j] = exp(route_l[route_id[j]] - mx) / sum;
            s += route_w[j];
        }
        for (uint j = 0u; j < k; j++) route_w[j] /= s;
    }
    barrier();
}
