/* ops_attention.c — the KV cache and attention on a GPU: kv_write, attention (split-key scalar kernel for decode and
 * verify blocks, the cooperative-matrix flash attention for prefill chunks), and the drafters' attention_ext.
 * Kernels: attention.comp (kv_write, attend, attend_reduce), flash_attention_coopmat.comp, attention_ext.comp. */
#include "gpu.h"

#include "core/error.h"

/* attention.comp ATTEND: workgroups of 128 over up to 16 query vectors of a kv head in tiles of 8 keys (attend), or 8
 * vectors in tiles of 16 keys (attend_nv8); keys go in chunks of ATTN_CHUNK. A split holds at least ATTN_MIN_SPLIT keys
 * (shorter ones cost more in partials and in the reduction than they save) and a multiple of it: whole tiles of either
 * width, so that a row's splits, and so its result, do not depend on the width its step took. */
enum { ATTN_CHUNK = 64, ATTN_MIN_SPLIT = 16, ATTN_HD_MAX = 256, ATTN_MAX_SPLITS = 1024 };
/* A kv_write over at most this many pages declares just those pages as written (more: the whole cache). */
enum { KV_WRITE_PAGES = 4 };
/* flash_attention_coopmat.comp: 8 subgroups of 32, 16 query vectors each; it takes chunks of FLASH_MIN_ROWS rows up
 * (decode and verify blocks take attention.comp's split kernel) */
enum { FLASH_THREADS = 256, FLASH_VECTORS = 128, FLASH_MIN_ROWS = 16 };

/* The KV row types kv_write and the attention kernels (attention.comp, attention_ext.comp; kernels/kv_rows.glsl) take:
 * f32, and f16 and int8 converted on write and read back to f32 for the arithmetic. */
#define GPU_KV_TYPES (1u << SPLASH_KV_F32 | 1u << SPLASH_KV_F16 | 1u << SPLASH_KV_INT8)

typedef struct {
    uint64_t dst, src, k, v, pages, part;
    uint32_t n_past, n, heads, kv_heads, page_tokens, page_stride, split_len, n_splits, hb, rt;
    float scale;
    uint32_t kv_type; /* SPLASH_KV_*: the type of every row */
    uint64_t src2;    /* kv_write: the new v rows; attention: the output gate, or 0 */
} attn_push;

/* The whole KV allocation as one range (pages are scattered; kernels touch only the sequence's). */
static sp_gpu_range kv_range(sp_gpu *gpu, const sp_kv_view *kv) {
    const sp_gpu_chunk *c = sp_gpu_chunk_of(gpu, kv->k);
    return c ? (sp_gpu_range){c->buf.addr + c->offset, c->buf.addr + c->offset + c->size} : (sp_gpu_range){0, 0};
}

/* What writing positions [n_past, n_past + n) touches: this layer's K and V rows of each page they fall in (one range
 * a page: the layer's K rows, then its V rows), so that the K/V writes of a step's sequences, which own their pages,
 * do not wait for each other; the whole cache past KV_WRITE_PAGES pages. Returns the count. */
static int32_t written_pages(sp_gpu *gpu, const sp_kv_view *kv, int32_t n_past, int64_t n, int32_t n_kv_heads, int32_t head_dim,
                             sp_gpu_range w[KV_WRITE_PAGES]) {
    int64_t first = n_past / kv->page_tokens, last = (n_past + n - 1) / kv->page_tokens;
    if (last - first >= KV_WRITE_PAGES) return w[0] = kv_range(gpu, kv), 1;
    uint64_t k = sp_gpu_addr(gpu, kv->k), v = sp_gpu_addr(gpu, kv->v), lo = k < v ? k : v;
    uint64_t half = (uint64_t)n_kv_heads * (uint64_t)kv->page_tokens * (uint64_t)sp_kv_row_bytes(kv->type, head_dim);
    uint64_t hi = (k > v ? k : v) + half;
    for (int64_t p = first; p <= last; p++) {
        uint64_t at = (uint64_t)kv->pages[p] * (uint64_t)kv->page_stride;
        w[p - first] = (sp_gpu_range){lo + at, hi + at};
    }
    return (int32_t)(last - first + 1);
}

static bool attn_base(sp_gpu *gpu, const sp_kv_view *kv, int32_t n_past, int64_t n, int32_t head_dim, attn_push *p,
                      sp_gpu_range *pages) {
    if (head_dim > ATTN_HD_MAX || head_dim % 8) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "attention needs head_dim ≤ 256, a multiple of 8");
    if (!(GPU_KV_TYPES & 1u << kv->type)) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "attention reads f32, f16 or int8 KV rows");
    if (kv->page_stride > UINT32_MAX) return sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "a KV page of more than 4 GiB");
    uint64_t n_pages = ((uint64_t)n_past + (uint64_t)n + (uint64_t)kv->page_tokens - 1) / (uint64_t)kv->page_tokens;
    uint64_t pa = sp_gpu_stage(gpu, kv->pages, n_pages * 4);
    if (!pa) return false;
    *pages = (sp_gpu_range){pa, pa + n_pages * 4};
    *p = (attn_push){.k = sp_gpu_addr(gpu, kv->k), .v = sp_gpu_addr(gpu, kv->v), .pages = pa, .n_past = (uint32_t)n_past,
                     .n = (uint32_t)n, .page_tokens = (uint32_t)kv->page_tokens,
                     .page_stride = (uint32_t)kv->page_stride, .kv_type = (uint32_t)kv->type};
    return true;
}

static void gpu_kv_write(const sp_backend *be, const sp_kv_view *kv, const float *k, const float *v, int32_t n_past,
                         int64_t n, int32_t n_kv_heads, int32_t head_dim) {
    sp_gpu *gpu = sp_gpu_of(be);
    attn_push p;
    sp_gpu_range pages;
    if (!attn_base(gpu, kv, n_past, n, head_dim, &p, &pages)) return;
    uint64_t bytes = (uint64_t)n * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_gpu_range r[3] = {sp_gpu_span(gpu, k, bytes), sp_gpu_span(gpu, v, bytes), pages}, w[KV_WRITE_PAGES];
    int32_t nw = written_pages(gpu, kv, n_past, n, n_kv_heads, head_dim, w);
    p.src = r[0].lo;
    p.src2 = r[1].lo;
    p.kv_heads = (uint32_t)n_kv_heads;
    uint32_t groups[3];
    if (kv->type == SPLASH_KV_INT8) {
        /* a workgroup per K or V row; two rows that share a word are one workgroup's, which needs the K and V
         * halves and pages to start on words (2-byte aligned rows: an even page_tokens · n_kv_heads) */
        if ((p.k | p.v | p.page_stride) % 4) {
            sp_gpu_fail(gpu, SPLASH_ERR_UNSUPPORTED, "int8 KV rows of %lld bytes need K, V and pages 4-byte aligned (page_tokens %d)",
                        (long long)sp_kv_row_bytes(kv->type, head_dim), kv->page_tokens);
            return;
        }
        sp_gpu_grid(2 * (uint64_t)n * (uint64_t)n_kv_heads, groups);
        sp_gpu_dispatch(gpu, "kv_write", SP_GPU_KV_WRITE, (uint32_t[4]){64, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                        w, nw, NULL);
        return;
    }
    sp_gpu_grid(sp_gpu_div_up(bytes / 8, 256), groups); /* an invocation per pair of values */
    sp_gpu_dispatch(gpu, "kv_write", SP_GPU_KV_WRITE, (uint32_t[4]){256, (uint32_t)head_dim, 0, 0}, &p, sizeof p, groups, r, 3,
                    w, nw, NULL);
}

/* Every KV type: the kernel rounds f32 and int8 rows to f16 as it loads a tile. */
bool sp_gpu_flash_attention(const sp_gpu *g, int32_t kv_type, int32_t head_dim, int64_t n) {
    return !g->no_coopmat && (GPU_KV_TYPES & 1u << kv_type) && n >= FLASH_MIN_ROWS && sp_gpu_flash_kernel(head_dim) >= 0;
}

/* How a sequence's attention runs: flash attention for a prefill chunk on the matrix units, else ATTEND of NV query
 * vectors a workgroup (nv8: 8, else 16), its keys split over `splits` workgroups of split_len keys each when its query
 * tiles alone would leave the GPU idle (flash decoding), with partial results of part_bytes then. */
typedef struct {
    bool flash, nv8;
    uint32_t hb, rt, blocks, tiles, splits, split_len;
    uint64_t part_bytes;
} attn_plan;

static attn_plan plan_attention(const sp_gpu *gpu, int32_t kv_type, int32_t head_dim, int32_t n_past, int64_t n, int32_t n_heads,
                                int32_t n_kv_heads) {
    attn_plan a = {.flash = sp_gpu_flash_attention(gpu, kv_type, head_dim, n), .splits = 1};
    if (a.flash) return a;
    uint32_t G = (uint32_t)(n_heads / n_kv_heads);
    /* the narrow variant (half the round trips to memory per key) where the rows' groups fit it: one decode row of up to 8 */
    a.nv8 = (uint64_t)n * G <= 8;
    uint32_t NV = a.nv8 ? 8 : 16;
    a.hb = G <= NV ? G : NV;
    a.rt = G <= NV ? NV / G : 1;
    a.blocks = sp_gpu_div_up(G, a.hb), a.tiles = sp_gpu_div_up((uint64_t)n, a.rt);
    uint64_t keys = (uint64_t)n_past + (uint64_t)n, wgs = (uint64_t)n_kv_heads * a.blocks * a.tiles;
    a.split_len = (uint32_t)keys;
    if (wgs < gpu->attention_workgroups && keys >= 2 * ATTN_MIN_SPLIT) {
        /* whole tiles, and whole chunks once a split holds more than one (a partial one costs a whole one's steps) */
        uint64_t len = sp_gpu_div_up(keys, sp_gpu_div_up(gpu->attention_workgroups, wgs));
        if (sp_gpu_div_up(keys, len) > ATTN_MAX_SPLITS) len = sp_gpu_div_up(keys, ATTN_MAX_SPLITS);
        if (len < ATTN_MIN_SPLIT) len = ATTN_MIN_SPLIT;
        len = len > ATTN_CHUNK ? (len + ATTN_CHUNK - 1) / ATTN_CHUNK * ATTN_CHUNK : (len + ATTN_MIN_SPLIT - 1) / ATTN_MIN_SPLIT * ATTN_MIN_SPLIT;
        a.split_len = (uint32_t)len;
        a.splits = sp_gpu_div_up(keys, len);
    }
    /* split-key partials: n · heads · splits · (head_dim + 2) floats */
    if (a.splits > 1) a.part_bytes = ((uint64_t)n * (uint64_t)n_heads * a.splits * (uint64_t)(head_dim + 2) * 4 + 255) / 256 * 256;
    return a;
}

/* A split decode's REDUCE, recorded once every sequence's ATTEND is (so that the sequences' ATTENDs run at once). */
typedef struct {
    attn_push p;
    sp_gpu_range part, gate, out;
    uint32_t groups[3], spec[4];
} attn_reduce;

/* One sequence's attention as planned; a split one takes its partials at part (device memory of a.part_bytes) and
 * leaves its REDUCE in *reduce (p.n_splits > 1). */
static void attend_seq(const sp_backend *be, float *out, const float *q, const float *gate, const sp_kv_view *kv, int32_t n_past,
                       int64_t n, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale, const attn_plan *a,
                       void *part, attn_reduce *reduce) {
    sp_gpu *gpu = sp_gpu_of(be);
    attn_push p;
    sp_gpu_range pages;
    reduce->p.n_splits = 1;
    if (!attn_base(gpu, kv, n_past, n, head_dim, &p, &pages)) return;
    uint64_t qbytes = (uint64_t)n * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    p.heads = (uint32_t)n_heads, p.kv_heads = (uint32_t)n_kv_heads, p.scale = scale;
    if (a->flash) {
        uint32_t G = (uint32_t)(n_heads / n_kv_heads);
        sp_gpu_range r[3] = {sp_gpu_span(gpu, q, qbytes), kv_range(gpu, kv), pages}, w = sp_gpu_span(gpu, out, qbytes);
        p.src = r[0].lo, p.dst = w.lo;
        sp_gpu_dispatch(gpu, "flash_attention", (sp_gpu_kernel_id)sp_gpu_flash_kernel(head_dim), (uint32_t[4]){FLASH_THREADS, (uint32_t)kv->type, 0, 0},
                        &p, sizeof p, (uint32_t[3]){(uint32_t)n_kv_heads, sp_gpu_div_up((uint64_t)n * G, FLASH_VECTORS), 1}, r, 3, &w, 1,
                        NULL);
        if (gate) be->sigmoid_mul(be, out, gate, n * n_heads * head_dim);
        return;
    }
    p.hb = a->hb, p.rt = a->rt, p.split_len = a->split_len, p.n_splits = a->splits;
    /* the gate is applied by the kernel that writes out: ATTEND unsplit, else REDUCE */
    sp_gpu_range r[4] = {sp_gpu_span(gpu, q, qbytes), kv_range(gpu, kv), pages, gate ? sp_gpu_span(gpu, gate, qbytes) : (sp_gpu_range){0, 0}};
    sp_gpu_range w = sp_gpu_span(gpu, out, qbytes);
    p.src = r[0].lo;
    p.dst = w.lo;
    p.src2 = r[3].lo;
    uint32_t spec[4] = {128, (uint32_t)head_dim, (uint32_t)kv->type, 0};
    sp_gpu_kernel_id kernel = a->nv8 ? SP_GPU_ATTEND_NV8 : SP_GPU_ATTEND;
    if (a->splits == 1) {
        sp_gpu_dispatch(gpu, "attention", kernel, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * a->blocks, a->tiles, 1}, r,
                        4, &w, 1, NULL);
        return;
    }
    sp_gpu_range pr = sp_gpu_span(gpu, part, a->part_bytes);
    p.part = pr.lo;
    sp_gpu_dispatch(gpu, "attention", kernel, spec, &p, sizeof p, (uint32_t[3]){n_kv_heads * a->blocks, a->tiles, a->splits}, r,
                    3, &pr, 1, NULL);
    *reduce = (attn_reduce){.p = p, .part = pr, .gate = r[3], .out = w, .spec = {head_dim >= 128 ? 128 : 64, (uint32_t)head_dim, 0, 0}};
    sp_gpu_grid((uint64_t)n * (uint64_t)n_heads, reduce->groups);
}

/* Every sequence's ATTEND (or flash attention), then every REDUCE: the ATTENDs wait for nothing of each other, and
 * each sequence's partials have their own region of the partials buffer, after the previous call's (which this call
 * reuses only once those reductions are recorded: the hazard ranges then order them). */
static void gpu_attention(const sp_backend *be, float *out, const float *q, const float *gate, const sp_attn_seq *seqs,
                          int32_t n_seqs, int32_t n_heads, int32_t n_kv_heads, int32_t head_dim, float scale) {
    sp_gpu *gpu = sp_gpu_of(be);
    attn_plan plan[n_seqs > 0 ? n_seqs : 1];
    attn_reduce reduce[n_seqs > 0 ? n_seqs : 1];
    uint64_t parts = 0;
    for (int32_t i = 0; i < n_seqs; i++) {
        plan[i] = plan_attention(gpu, seqs[i].kv.type, head_dim, seqs[i].n_past, seqs[i].n, n_heads, n_kv_heads);
        parts += plan[i].part_bytes;
    }
    if (parts) {
        if (!sp_gpu_scratch(be, &gpu->part, &gpu->part_bytes, parts, parts * 2, "attention partials")) return;
        if (gpu->part_next + parts > gpu->part_bytes) gpu->part_next = 0;
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        int64_t at = seqs[i].row0 * n_heads * head_dim;
        attend_seq(be, out + at, q + at, gate ? gate + at : NULL, &seqs[i].kv, seqs[i].n_past, seqs[i].n, n_heads, n_kv_heads,
                   head_dim, scale, &plan[i], (char *)gpu->part + gpu->part_next, &reduce[i]);
        gpu->part_next += plan[i].part_bytes;
    }
    for (int32_t i = 0; i < n_seqs; i++) {
        if (reduce[i].p.n_splits <= 1) continue;
        sp_gpu_range rr[2] = {reduce[i].part, reduce[i].gate};
        sp_gpu_dispatch(gpu, "attention_reduce", SP_GPU_ATTEND_REDUCE, reduce[i].spec, &reduce[i].p, sizeof reduce[i].p,
                        reduce[i].groups, rr, 2, &reduce[i].out, 1, NULL);
    }
}

/* Drafters' attention (kernels/attention_ext.comp): one workgroup per (row, query head). */
static void gpu_attention_ext(const sp_backend *be, float *out, const float *q, int32_t n_heads, int32_t n_kv_heads,
                              int32_t head_dim, float scale, const sp_attn_ext *x) {
    sp_gpu *gpu = sp_gpu_of(be);
    if (head_dim > ATTN_HD_MAX || head_dim % 4) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "attention_ext needs head_dim ≤ 256, a multiple of 4");
        return;
    }
    if (x->kv && !(GPU_KV_TYPES & 1u << x->kv->type)) {
        sp_gpu_fail_msg(gpu, SPLASH_ERR_UNSUPPORTED, "attention_ext reads f32, f16 or int8 KV rows");
        return;
    }
    struct {
        uint64_t dst, q, k, v, pages, k_blk, v_blk;
        uint32_t n_rows, heads, kv_heads, page_tokens, page_stride;
        uint32_t q_pos0, page_lo, page_hi, page_causal, window, blk_causal;
        float scale;
        uint32_t kv_type;
    } p = {0};
    uint64_t qbytes = (uint64_t)x->n_rows * (uint64_t)n_heads * (uint64_t)head_dim * 4;
    uint64_t blk = (uint64_t)x->n_rows * (uint64_t)n_kv_heads * (uint64_t)head_dim * 4;
    sp_gpu_range r[5];
    int nr = 0;
    r[nr++] = sp_gpu_span(gpu, q, qbytes);
    /* pages cover every position a row may see: page_hi + (n_rows − 1) when causal */
    int64_t last = (int64_t)x->page_hi + (x->page_causal ? x->n_rows - 1 : 0);
    if (x->kv && last > x->page_lo) {
        uint64_t n_pages = (uint64_t)(last + x->kv->page_tokens - 1) / (uint64_t)x->kv->page_tokens;
        uint64_t pa = sp_gpu_stage(gpu, x->kv->pages, n_pages * 4);
        if (!pa) return;
        r[nr++] = (sp_gpu_range){pa, pa + n_pages * 4};
        r[nr++] = kv_range(gpu, x->kv);
        p.pages = pa, p.k = sp_gpu_addr(gpu, x->kv->k), p.v = sp_gpu_addr(gpu, x->kv->v);
        p.page_tokens = (uint32_t)x->kv->page_tokens, p.page_stride = (uint32_t)x->kv->page_stride;
        p.kv_type = (uint32_t)x->kv->type;
        p.page_lo = (uint32_t)x->page_lo, p.page_hi = (uint32_t)x->page_hi, p.page_causal = (uint32_t)x->page_causal;
    }
    if (x->k_blk) {
        r[nr++] = sp_gpu_span(gpu, x->k_blk, blk);
        r[nr++] = sp_gpu_span(gpu, x->v_blk, blk);
        p.k_blk = r[nr - 2].lo, p.v_blk = r[nr - 1].lo, p.blk_causal = (uint32_t)x->blk_causal;
    }
    sp_gpu_range w = sp_gpu_span(gpu, out, qbytes);
    p.dst = w.lo, p.q = r[0].lo, p.n_rows = (uint32_t)x->n_rows, p.heads = (uint32_t)n_heads, p.kv_heads = (uint32_t)n_kv_heads;
    p.q_pos0 = (uint32_t)x->q_pos0, p.window = (uint32_t)x->window, p.scale = scale;
    uint32_t groups[3];
    sp_gpu_grid((uint64_t)x->n_rows * (uint64_t)n_heads, groups);
    sp_gpu_dispatch(gpu, "attention_ext", SP_GPU_ATTENTION_EXT, (uint32_t[4]){128, (uint32_t)head_dim, 0, 0}, &p, sizeof p,
                    groups, r, nr, &w, 1, NULL);
}

void sp_gpu_install_attention(sp_backend *be) {
    be->kv_write = gpu_kv_write;
    be->attention = gpu_attention;
    be->attention_ext = gpu_attention_ext;
    be->kv_types = GPU_KV_TYPES;
}
