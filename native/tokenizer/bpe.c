/* bpe.c — byte-level BPE merges with hash tables for the vocabulary, the merge ranks and a per-piece cache (bpe.h).
 *
 * Two merge loops that give the same result: short pieces (almost all of them) keep an array of adjacent-pair
 * ranks and merge the leftmost lowest one until none is left, O(n²) in a handful of bytes; long pieces (runs of
 * spaces, '=' lines, minified code) use tokenizers' own algorithm, a min-heap of (rank, position) with stale entries
 * skipped, O(n log n). */
#include "tokenizer/bpe.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_PIECE 48        /* bytes: the array loop below this, the heap above */
#define CACHE_MAX_PIECE 2048  /* bytes: CJK runs are single pieces of hundreds of bytes; longer ones are not cached */
#define CACHE_SLOTS (1 << 17) /* power of two; the cache is cleared when half full or its arenas are */
#define CACHE_ARENA (1 << 22) /* bytes of piece text, and ids, kept by the cache */

typedef struct {
    uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
    int32_t rank, result;
} merge_slot;

typedef struct {
    uint32_t hash, bytes_off, ids_off;
    uint16_t n_bytes, n_ids; /* n_bytes 0 = empty */
} cache_slot;

struct sp_bpe {
    uint8_t *bytes;    /* token bytes, concatenated */
    uint32_t *offsets; /* [n_tokens + 1] */
    int32_t n_tokens;
    int32_t *vocab; /* open addressing over token bytes: id or -1 */
    uint32_t vocab_mask;
    merge_slot *merges;
    uint32_t merges_mask;
    int32_t byte_id[256];
    bool ignore_merges;

    cache_slot *cache;
    uint32_t cache_used;
    uint8_t *cache_bytes;
    int32_t *cache_ids;
    uint32_t cache_bytes_used, cache_ids_used;

    /* heap-path scratch, grown on demand */
    int32_t *sym_prev, *sym_next;
    struct heap_item {
        int32_t rank, pos, result;
    } *heap;
    int32_t scratch_cap, heap_cap;
};

static inline uint32_t hash_bytes(const uint8_t *s, int32_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, folded: pieces are a few bytes long */
    for (int32_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ull;
    return (uint32_t)(h ^ (h >> 32));
}

static inline uint32_t hash_pair(uint64_t key) { return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32); }

static uint32_t table_size(uint64_t n) {
    uint64_t c = 64;
    while (c < 2 * n) c *= 2;
    return (uint32_t)c;
}

static int32_t vocab_find(const sp_bpe *b, const uint8_t *s, int32_t n) {
    for (uint32_t i = hash_bytes(s, n) & b->vocab_mask;; i = (i + 1) & b->vocab_mask) {
        int32_t id = b->vocab[i];
        if (id < 0) return -1;
        if ((int32_t)(b->offsets[id + 1] - b->offsets[id]) == n && memcmp(b->bytes + b->offsets[id], s, (size_t)n) == 0) return id;
    }
}

static inline const merge_slot *merge_find(const sp_bpe *b, int32_t left, int32_t right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    for (uint32_t i = hash_pair(key) & b->merges_mask;; i = (i + 1) & b->merges_mask) {
        const merge_slot *m = &b->merges[i];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

splash_status sp_bpe_create(const uint8_t *bytes, const uint32_t *offsets, int32_t n_tokens, const int32_t *merges,
                            int32_t n_merges, bool ignore_merges, sp_bpe **out) {
    *out = NULL;
    if (n_tokens <= 0 || n_merges < 0) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "tokenizer: %d tokens, %d merges", n_tokens, n_merges);
    sp_bpe *b = calloc(1, sizeof *b);
    if (!b) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    b->n_tokens = n_tokens;
    b->ignore_merges = ignore_merges;
    b->bytes = malloc(offsets[n_tokens] ? offsets[n_tokens] : 1);
    b->offsets = malloc(((size_t)n_tokens + 1) * sizeof *b->offsets);
    uint32_t vsize = table_size((uint64_t)n_tokens);
    b->vocab = malloc(vsize * sizeof *b->vocab);
    uint32_t msize = table_size((uint64_t)n_merges);
    b->merges = malloc(msize * sizeof *b->merges);
    b->cache = calloc(CACHE_SLOTS, sizeof *b->cache);
    b->cache_bytes = malloc(CACHE_ARENA);
    b->cache_ids = malloc(CACHE_ARENA * sizeof(int32_t));
    if (!b->bytes || !b->offsets || !b->vocab || !b->merges || !b->cache || !b->cache_bytes || !b->cache_ids) {
        sp_bpe_free(b);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory building the tokenizer tables");
    }
    memcpy(b->bytes, bytes, offsets[n_tokens]);
    for (int32_t i = 0; i <= n_tokens; i++) {
        if (i < n_tokens && offsets[i] > offsets[i + 1]) {
            sp_bpe_free(b);
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "tokenizer: token offsets decrease at id %d", i);
        }
        b->offsets[i] = offsets[i];
    }

    b->vocab_mask = vsize - 1;
    memset(b->vocab, 0xff, vsize * sizeof *b->vocab);
    for (int i = 0; i < 256; i++) b->byte_id[i] = -1;
    for (int32_t id = 0; id < n_tokens; id++) {
        int32_t n = (int32_t)(b->offsets[id + 1] - b->offsets[id]);
        if (n == 0) continue;
        const uint8_t *s = b->bytes + b->offsets[id];
        if (vocab_find(b, s, n) >= 0) continue; /* a duplicate string: the first id wins */
        uint32_t i = hash_bytes(s, n) & b->vocab_mask;
        while (b->vocab[i] >= 0) i = (i + 1) & b->vocab_mask;
        b->vocab[i] = id;
        if (n == 1) b->byte_id[s[0]] = id;
    }

    b->merges_mask = msize - 1;
    for (uint32_t i = 0; i < msize; i++) b->merges[i].key = UINT64_MAX;
    uint8_t joined[1024];
    for (int32_t r = 0; r < n_merges; r++) {
        int32_t l = merges[2 * r], rt = merges[2 * r + 1];
        if (l < 0 || l >= n_tokens || rt < 0 || rt >= n_tokens) {
            sp_bpe_free(b);
            return SP_FAIL(SPLASH_ERR_FORMAT, "tokenizer: merge %d refers to an id outside the vocabulary", r);
        }
        uint32_t nl = b->offsets[l + 1] - b->offsets[l], nr = b->offsets[rt + 1] - b->offsets[rt];
        int32_t result = -1;
        if (nl + nr <= sizeof joined) {
            memcpy(joined, b->bytes + b->offsets[l], nl);
            memcpy(joined + nl, b->bytes + b->offsets[rt], nr);
            result = vocab_find(b, joined, (int32_t)(nl + nr));
        }
        if (result < 0) {
            sp_bpe_free(b);
            return SP_FAIL(SPLASH_ERR_FORMAT, "tokenizer: merge %d (ids %d + %d) makes a token that is not in the vocabulary", r, l, rt);
        }
        uint64_t key = (uint64_t)(uint32_t)l << 32 | (uint32_t)rt;
        uint32_t i = hash_pair(key) & b->merges_mask;
        while (b->merges[i].key != UINT64_MAX && b->merges[i].key != key) i = (i + 1) & b->merges_mask;
        b->merges[i] = (merge_slot){.key = key, .rank = r, .result = result};
    }
    *out = b;
    return SPLASH_OK;
}

void sp_bpe_free(sp_bpe *b) {
    if (!b) return;
    free(b->bytes);
    free(b->offsets);
    free(b->vocab);
    free(b->merges);
    free(b->cache);
    free(b->cache_bytes);
    free(b->cache_ids);
    free(b->sym_prev);
    free(b->sym_next);
    free(b->heap);
    free(b);
}

/* ---- merge loops --------------------------------------------------------------------------------------------- */

static int32_t merge_small(const sp_bpe *b, int32_t *ids, int32_t m) {
    int32_t rank[SMALL_PIECE], result[SMALL_PIECE];
    for (int32_t i = 0; i + 1 < m; i++) {
        const merge_slot *s = merge_find(b, ids[i], ids[i + 1]);
        rank[i] = s ? s->rank : INT32_MAX;
        result[i] = s ? s->result : -1;
    }
    while (m > 1) {
        int32_t best = -1, best_rank = INT32_MAX;
        for (int32_t i = 0; i + 1 < m; i++) {
            if (rank[i] < best_rank) best_rank = rank[i], best = i;
        }
        if (best < 0) break;
        ids[best] = result[best];
        m--;
        memmove(ids + best + 1, ids + best + 2, (size_t)(m - best - 1) * sizeof *ids);
        memmove(rank + best, rank + best + 1, (size_t)(m - best - 1) * sizeof *rank);
        memmove(result + best, result + best + 1, (size_t)(m - best - 1) * sizeof *result);
        for (int32_t i = best > 0 ? best - 1 : 0; i <= best && i + 1 < m; i++) {
            const merge_slot *s = merge_find(b, ids[i], ids[i + 1]);
            rank[i] = s ? s->rank : INT32_MAX;
            result[i] = s ? s->result : -1;
        }
    }
    return m;
}

static inline bool heap_less(const struct heap_item *a, const struct heap_item *c) {
    return a->rank < c->rank || (a->rank == c->rank && a->pos < c->pos);
}

static void heap_push(struct heap_item *h, int32_t *n, struct heap_item it) {
    int32_t i = (*n)++;
    while (i > 0) {
        int32_t parent = (i - 1) / 2;
        if (!heap_less(&it, &h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = it;
}

static struct heap_item heap_pop(struct heap_item *h, int32_t *n) {
    struct heap_item top = h[0], last = h[--(*n)];
    int32_t i = 0;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0) h[i] = last;
    return top;
}

/* tokenizers' Word::merge_all: symbols in a linked list; a popped entry is stale if its left symbol was merged away
 * or the pair it was made for no longer yields the same token. */
static int32_t merge_large(sp_bpe *b, int32_t *ids, int32_t m) {
    if (m > b->scratch_cap) {
        int32_t *p = realloc(b->sym_prev, (size_t)m * sizeof *p);
        if (p) b->sym_prev = p;
        int32_t *q = realloc(b->sym_next, (size_t)m * sizeof *q);
        if (q) b->sym_next = q;
        if (!p || !q) return -1;
        b->scratch_cap = m;
    }
    if (m > b->heap_cap) {
        /* At most one live entry per adjacent pair plus two per merge: 3m bounds the heap. */
        struct heap_item *h = realloc(b->heap, (size_t)m * 3 * sizeof *h);
        if (!h) return -1;
        b->heap = h;
        b->heap_cap = m;
    }
    int32_t *prev = b->sym_prev, *next = b->sym_next;
    struct heap_item *heap = b->heap;
    int32_t nh = 0;
    for (int32_t i = 0; i < m; i++) {
        prev[i] = i - 1;
        next[i] = i + 1 < m ? i + 1 : -1;
    }
    for (int32_t i = 0; i + 1 < m; i++) {
        const merge_slot *s = merge_find(b, ids[i], ids[i + 1]);
        if (s) heap_push(heap, &nh, (struct heap_item){s->rank, i, s->result});
    }
    while (nh > 0) {
        struct heap_item top = heap_pop(heap, &nh);
        int32_t pos = top.pos;
        if (ids[pos] < 0 || next[pos] < 0) continue; /* merged away, or the last symbol */
        int32_t right = next[pos];
        const merge_slot *s = merge_find(b, ids[pos], ids[right]);
        if (!s || s->result != top.result) continue;
        ids[pos] = top.result;
        ids[right] = -1;
        next[pos] = next[right];
        if (next[pos] >= 0) prev[next[pos]] = pos;
        if (prev[pos] >= 0) {
            const merge_slot *l = merge_find(b, ids[prev[pos]], ids[pos]);
            if (l) heap_push(heap, &nh, (struct heap_item){l->rank, prev[pos], l->result});
        }
        if (next[pos] >= 0) {
            const merge_slot *r = merge_find(b, ids[pos], ids[next[pos]]);
            if (r) heap_push(heap, &nh, (struct heap_item){r->rank, pos, r->result});
        }
    }
    int32_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) ids[k++] = ids[i];
    return k;
}

/* ---- cache --------------------------------------------------------------------------------------------------- */

static const cache_slot *cache_find(const sp_bpe *b, uint32_t h, const uint8_t *s, int32_t n, uint32_t *slot) {
    for (uint32_t i = h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
        const cache_slot *c = &b->cache[i];
        if (c->n_bytes == 0) {
            *slot = i;
            return NULL;
        }
        if (c->hash == h && c->n_bytes == n && memcmp(b->cache_bytes + c->bytes_off, s, (size_t)n) == 0) return c;
    }
}

static void cache_store(sp_bpe *b, uint32_t h, uint32_t slot, const uint8_t *s, int32_t n, const int32_t *ids, int32_t k) {
    if (b->cache_used + 1 > CACHE_SLOTS / 2 || b->cache_bytes_used + (uint32_t)n > CACHE_ARENA || b->cache_ids_used + (uint32_t)k > CACHE_ARENA) {
        memset(b->cache, 0, CACHE_SLOTS * sizeof *b->cache);
        b->cache_used = b->cache_bytes_used = b->cache_ids_used = 0;
        cache_find(b, h, s, n, &slot);
    }
    memcpy(b->cache_bytes + b->cache_bytes_used, s, (size_t)n);
    memcpy(b->cache_ids + b->cache_ids_used, ids, (size_t)k * sizeof *ids);
    b->cache[slot] = (cache_slot){.hash = h, .bytes_off = b->cache_bytes_used, .ids_off = b->cache_ids_used, .n_bytes = (uint16_t)n, .n_ids = (uint16_t)k};
    b->cache_bytes_used += (uint32_t)n;
    b->cache_ids_used += (uint32_t)k;
    b->cache_used++;
}

int32_t sp_bpe_encode(sp_bpe *b, const uint8_t *piece, int32_t n, int32_t *out) {
    if (n <= 0) return 0;
    uint32_t h = 0, slot = 0;
    bool cacheable = n <= CACHE_MAX_PIECE;
    if (cacheable) {
        h = hash_bytes(piece, n);
        const cache_slot *c = cache_find(b, h, piece, n, &slot);
        if (c) {
            memcpy(out, b->cache_ids + c->ids_off, (size_t)c->n_ids * sizeof *out);
            return c->n_ids;
        }
    }
    int32_t k = -1;
    if (b->ignore_merges) {
        int32_t id = vocab_find(b, piece, n);
        if (id >= 0) out[0] = id, k = 1;
    }
    if (k < 0) {
        int32_t m = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t id = b->byte_id[piece[i]];
            if (id >= 0) out[m++] = id;
        }
        k = m <= SMALL_PIECE ? merge_small(b, out, m) : merge_large(b, out, m);
        if (k < 0) return -1;
    }
    if (cacheable) cache_store(b, h, slot, piece, n, out, k);
    return k;
}
