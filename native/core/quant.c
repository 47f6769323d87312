#include "quant.h"

#include "error.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

const char *sp_mtype_name(sp_mtype t) {
    static const char *const names[SP_MAT_TYPE_COUNT] = {"f32", "bf16", "f16", "q8", "q4", "mlx4", "mlx8"};
    return (unsigned)t < SP_MAT_TYPE_COUNT ? names[t] : "?";
}

int64_t sp_mtype_row_bytes(sp_mtype t, int64_t cols) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    switch (t) {
    case SP_MAT_F32: return cols * 4;
    case SP_MAT_BF16:
    case SP_MAT_F16: return cols * 2;
    case SP_MAT_Q8: return nb * (SP_QK + 2);
    case SP_MAT_Q4: return (nb + 1) / 2 * SP_QK + nb * 4;
    case SP_MAT_MLX4: return cols % SP_QK_MLX ? 0 : cols / 2 + cols / SP_QK_MLX * 4;
    case SP_MAT_MLX8: return cols % SP_QK_MLX ? 0 : cols + cols / SP_QK_MLX * 4;
    default: return 0;
    }
}

uint16_t sp_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN (quiet) */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float sp_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, u;
    if (e == 0) { /* zero or subnormal: m · 2^-24, exact in f32 */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    if (e == 31) u = sign | 0x7f800000 | (m << 13);
    else u = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t sp_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff); /* NaN */
    if (ax >= 0x477ff000) return sign | 0x7c00; /* >= 65520 rounds to infinity */
    uint32_t e = ax >> 23;
    if (e < 113) { /* below 2^-14: a subnormal in units of 2^-24 */
        if (e < 102) return sign; /* below 2^-25: rounds to zero */
        uint32_t m = (ax & 0x7fffff) | 0x800000, shift = 126 - e, q = m >> shift, rem = m & ((1u << shift) - 1),
                 half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q;
    }
    uint32_t h = ((e - 112) << 10) | ((ax >> 13) & 0x3ff), rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* a carry into the exponent is right */
    return sign | (uint16_t)h;
}

void sp_quantize_row_q8(const float *x, int64_t cols, void *row) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    int8_t *q = row;
    uint16_t *dh = (uint16_t *)(q + nb * SP_QK);
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * SP_QK, k1 = k0 + SP_QK < cols ? k0 + SP_QK : cols;
        float amax = 0;
        for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(x[k]));
        dh[b] = sp_f32_to_f16(amax / 127.0f);
        float d = sp_f16_to_f32(dh[b]), inv = d > 0 ? 1.0f / d : 0.0f;
        for (int64_t k = k0; k < k0 + SP_QK; k++)
            q[k] = k < k1 ? (int8_t)lrintf(fminf(fmaxf(x[k] * inv, -127.0f), 127.0f)) : 0;
    }
}

void sp_quantize_row_q4(const float *x, int64_t cols, void *row) {
    int64_t nb = (cols + SP_QK - 1) / SP_QK;
    uint8_t *qs = row;
    uint16_t *dh = (uint16_t *)(qs + (nb + 1) / 2 * SP_QK), *mh = dh + nb;
    memset(qs, 0, (size_t)((nb + 1) / 2 * SP_QK));
    for (int64_t b = 0; b < nb; b++) {
        int64_t k0 = b * SP_QK, k1 = k0 + SP_QK < cols ? k0 + SP_QK : cols;
        float lo = x[k0], hi = x[k0];
        for (int64_t k = k0; k < k1; k++) lo = fminf(lo, x[k]), hi = fmaxf(hi, x[k]);
        dh[b] = sp_f32_to_f16((hi - lo) / 15.0f);
        mh[b] = sp_f32_to_f16(lo);
        float d = sp_f16_to_f32(dh[b]), m = sp_f16_to_f32(mh[b]), inv = d > 0 ? 1.0f / d : 0.0f;
        uint8_t *chunk = qs + b / 2 * SP_QK;
        for (int64_t j = 0; j < SP_QK && k0 + j < k1; j++) {
            uint8_t q = (uint8_t)lrintf(fminf(fmaxf((x[k0 + j] - m) * inv, 0.0f), 15.0f));
            chunk[j] |= (uint8_t)(b % 2 ? q << 4 : q);
        }
    }
}

void sp_quantize_row_mlx(const float *x, int64_t cols, int bits, void *row) {
    int64_t nb = cols / SP_QK_MLX, qbytes = cols * bits / 8;
    uint8_t *q = row;
    uint16_t *sc = (uint16_t *)(q + qbytes), *bi = sc + nb;
    const float n_bins = (float)((1 << bits) - 1);
    memset(q, 0, (size_t)qbytes);
    for (int64_t b = 0; b < nb; b++) {
        const float *g = x + b * SP_QK_MLX;
        float hi = g[0], lo = g[0];
        for (int k = 1; k < SP_QK_MLX; k++) hi = fmaxf(hi, g[k]), lo = fminf(lo, g[k]);
        /* mlx: the edge of larger magnitude is made exactly representable (q = 0 maps onto it) */
        bool low_edge = fabsf(lo) > fabsf(hi);
        float scale = fmaxf((hi - lo) / n_bins, 1e-7f), edge = low_edge ? lo : hi;
        if (!low_edge) scale = -scale;
        float q0 = rintf(edge / scale);
        if (q0 != 0) scale = edge / q0;
        sc[b] = sp_f32_to_bf16(scale);
        bi[b] = sp_f32_to_bf16(q0 == 0 ? 0.0f : edge);
        float s = sp_bf16_to_f32(sc[b]), m = sp_bf16_to_f32(bi[b]);
        for (int k = 0; k < SP_QK_MLX; k++) {
            uint8_t v = (uint8_t)fminf(fmaxf(rintf((g[k] - m) / s), 0.0f), n_bins);
            int64_t e = b * SP_QK_MLX + k;
            if (bits == 8) q[e] = v;
            else q[e / 2] |= (uint8_t)(e % 2 ? v << 4 : v);
        }
    }
}

void sp_matrix_row_f32(const sp_matrix *m, int64_t r, float *out) {
    const uint8_t *row = (const uint8_t *)m->data + r * m->row_bytes;
    int64_t cols = m->cols, nb = (cols + SP_QK - 1) / SP_QK;
    switch (m->type) {
    case SP_MAT_F32: memcpy(out, row, (size_t)cols * 4); break;
    case SP_MAT_BF16:
        for (int64_t k = 0; k < cols; k++) out[k] = sp_bf16_to_f32(((const uint16_t *)row)[k]);
        break;
    case SP_MAT_F16:
        for (int64_t k = 0; k < cols; k++) out[k] = sp_f16_to_f32(((const uint16_t *)row)[k]);
        break;
    case SP_MAT_Q8: {
        const int8_t *q = (const int8_t *)row;
        const uint16_t *dh = (const uint16_t *)(row + nb * SP_QK);
        for (int64_t k = 0; k < cols; k++) out[k] = (float)q[k] * sp_f16_to_f32(dh[k / SP_QK]);
        break;
    }
    case SP_MAT_Q4: {
        const uint16_t *dh = (const uint16_t *)(row + (nb + 1) / 2 * SP_QK), *mh = dh + nb;
        for (int64_t k = 0; k < cols; k++) {
            int64_t b = k / SP_QK;
            uint8_t byte = row[b / 2 * SP_QK + k % SP_QK];
            int q = b % 2 ? byte >> 4 : byte & 15;
            out[k] = (float)q * sp_f16_to_f32(dh[b]) + sp_f16_to_f32(mh[b]);
        }
        break;
    }
    case SP_MAT_MLX4:
    case SP_MAT_MLX8: {
        int64_t qbytes = m->type == SP_MAT_MLX4 ? cols / 2 : cols;
        const uint16_t *sc = (const uint16_t *)(row + qbytes), *bi = sc + cols / SP_QK_MLX;
        for (int64_t k = 0; k < cols; k++) {
            int q = m->type == SP_MAT_MLX8 ? row[k] : k % 2 ? row[k / 2] >> 4 : row[k / 2] & 15;
            out[k] = (float)q * sp_bf16_to_f32(sc[k / SP_QK_MLX]) + sp_bf16_to_f32(bi[k / SP_QK_MLX]);
        }
        break;
    }
    default: break;
    }
}

typedef struct quantize_job {
    const sp_tensor *t;
    sp_matrix *m;
    uint8_t *dst;
    bool avx2;
    _Atomic bool oom;
} quantize_job;

static void quantize_rows(void *ctx, int64_t r0, int64_t r1, int thread) {
    quantize_job *j = ctx;
    int64_t cols = j->m->cols;
    float *tmp = malloc((size_t)cols * sizeof *tmp);
    if (!tmp) {
        atomic_store(&j->oom, true);
        return;
    }
    sp_matrix src = {.rows = j->m->rows, .cols = cols, .data = j->t->data};
    src.type = j->t->dtype == SP_DTYPE_F32 ? SP_MAT_F32 : j->t->dtype == SP_DTYPE_BF16 ? SP_MAT_BF16 : SP_MAT_F16;
    src.row_bytes = sp_mtype_row_bytes(src.type, cols);
    for (int64_t r = r0; r < r1; r++) {
        uint8_t *row = j->dst + r * j->m->row_bytes;
#if defined(__x86_64__)
        if (j->avx2 && sp_quantize_row_avx2(j->m->type, src.type, (const uint8_t *)src.data + r * src.row_bytes, cols, row))
            continue;
#endif
        sp_matrix_row_f32(&src, r, tmp);
        if (j->m->type == SP_MAT_Q8) sp_quantize_row_q8(tmp, cols, row);
        else sp_quantize_row_q4(tmp, cols, row);
    }
    free(tmp);
}

splash_status sp_matrix_from_tensor(sp_threadpool *pool, const sp_tensor *t, sp_quant quant, sp_matrix *m, void **owned) {
    *owned = NULL;
    memset(m, 0, sizeof *m);
    if (t->layout) { /* a packed file's rows: their type was decided at import, `quant` does not apply */
        m->type = (sp_mtype)(t->layout - 1);
        m->cols = t->ndim ? t->shape[t->ndim - 1] : 1;
        m->rows = sp_tensor_numel(t) / m->cols;
        m->data = t->data;
        m->row_bytes = t->row_bytes;
        return SPLASH_OK;
    }
    sp_mtype stored;
    switch (t->dtype) {
    case SP_DTYPE_F32: stored = SP_MAT_F32; break;
    case SP_DTYPE_BF16: stored = SP_MAT_BF16; break;
    case SP_DTYPE_F16: stored = SP_MAT_F16; break;
    default:
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "tensor %s in %s: dtype %s cannot be a weight matrix (F32, BF16 or F16)",
                       t->name, t->file, sp_dtype_name(t->dtype));
    }
    if (t->ndim < 1 || t->shape[t->ndim - 1] == 0)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "tensor %s in %s: a weight matrix needs at least one dimension and columns",
                       t->name, t->file);
    m->cols = t->shape[t->ndim - 1];
    m->rows = sp_tensor_numel(t) / m->cols;
    if (quant == SP_QUANT_NONE) {
        m->type = stored;
        m->data = t->data;
        m->row_bytes = sp_mtype_row_bytes(stored, m->cols);
        return SPLASH_OK;
    }
    if (quant != SP_QUANT_Q8 && quant != SP_QUANT_Q4)
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "tensor %s: unknown quantization %d", t->name, (int)quant);
    m->type = quant == SP_QUANT_Q8 ? SP_MAT_Q8 : SP_MAT_Q4;
    m->row_bytes = sp_mtype_row_bytes(m->type, m->cols);
    size_t bytes = (size_t)(m->rows * m->row_bytes + 63) & ~(size_t)63;
    uint8_t *dst = aligned_alloc(64, bytes ? bytes : 64);
    if (!dst)
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "tensor %s: cannot allocate %zu bytes for %s weights", t->name, bytes,
                       sp_mtype_name(m->type));
    sp_cpu cpu;
    if (pool) cpu = *sp_threadpool_cpu(pool);
    else sp_cpu_detect(&cpu);
    quantize_job job = {.t = t, .m = m, .dst = dst, .avx2 = sp_cpu_avx2(&cpu)};
    sp_parallel_for(pool, m->rows, quantize_rows, &job);
    if (atomic_load(&job.oom)) {
        free(dst);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "tensor %s: out of memory while quantizing", t->name);
    }
    m->data = dst;
    *owned = dst;
    return SPLASH_OK;
}
