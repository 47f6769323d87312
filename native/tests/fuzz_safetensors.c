/* fuzz_safetensors — feeds random and mutated safetensors images to the header parser (and their headers to the JSON
 * parser) and checks what it accepts. Built in the ASan+UBSan debug build, so an out-of-bounds read or undefined
 * behaviour aborts with a report; an accepted image that breaks an invariant (tensor outside the data, overlap,
 * size mismatch, duplicate name, inconsistent JSON tree) aborts too.
 *
 *   bun scripts/build/native.ts --debug
 *   build/debug/tests/fuzz_safetensors [--seconds 10] [--seed N]    run for a while; prints a summary line
 *   build/debug/tests/fuzz_safetensors --seed N --iter I --dump f   write input I of seed N to f (reproduce a report)
 *
 * Every input is a function of (seed, iteration), so the iteration printed before a crash reproduces it.
 * Each image lives in a heap buffer of exactly its size, so ASan sees any read past its end.
 *
 * The same code is a libFuzzer target when built with -DSP_LIBFUZZER (optional; clang only):
 *   clang -DSP_LIBFUZZER -fsanitize=fuzzer,address,undefined -std=c11 -D_GNU_SOURCE -Inative/include -Inative \
 *     native/tools/fuzz_safetensors.c native/core/{json,safetensors,error}.c -o build/fuzz && build/fuzz -max_total_time=60
 */
#include "core/json.h"
#include "core/safetensors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- invariants of an accepted input ---------------------------------------------------------------------------- */

/* The input being run, so a report can say how to reproduce it. */
static uint64_t current_seed, current_iter;

static void print_reproduce(void) {
    fprintf(stderr, "\nfuzz_safetensors: reproduce with --seed %llu --iter %llu --dump input.safetensors\n",
            (unsigned long long)current_seed, (unsigned long long)current_iter);
}

static void die(const char *what) {
    fprintf(stderr, "fuzz_safetensors: invariant broken: %s\n", what);
    print_reproduce();
    abort();
}

/* Present only in sanitizer builds: lets a sanitizer report end with the reproduce line. */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

/* Walks a JSON subtree; returns its node count, which must equal its span. */
static size_t walk_json(const sp_json *v) {
    size_t n = 1, children = 0;
    if (v->type == SP_JSON_STRING && (v->v.s[v->len] != 0)) die("string not NUL-terminated at len");
    if (v->type == SP_JSON_ARRAY || v->type == SP_JSON_OBJECT) {
        for (const sp_json *c = sp_json_first(v); c; c = sp_json_next(v, c)) {
            if ((v->type == SP_JSON_OBJECT) != (c->key != NULL)) die("member key presence");
            if (c->key && c->key[c->key_len] != 0) die("key not NUL-terminated");
            n += walk_json(c);
            children++;
        }
        if (children != v->len) die("child count != len");
    }
    if (n != v->span) die("subtree size != span");
    return n;
}

static void check_accepted(const sp_safetensors *f, const uint8_t *buf, uint64_t size) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    const uint8_t *data = buf + 8 + n, *end = buf + size;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sp_tensor *t = &f->tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (uint64_t)t->shape[d];
        if (numel * sp_dtype_size(t->dtype) != t->nbytes) die("nbytes != numel * dtype size");
        if ((uintptr_t)t->data % sp_dtype_size(t->dtype)) die("misaligned data");
        const uint8_t *p = t->data;
        bool in_file = p >= data && p <= end;
        if (in_file && (uint64_t)(end - p) < t->nbytes) die("tensor runs past the end of the file");
        if (!in_file && t->nbytes && !f->aligned_copies) die("tensor outside the file");
        for (uint64_t k = 0; k < t->nbytes; k++) sink ^= p[k]; /* ASan checks every byte */
        for (size_t j = 0; j < i; j++) {
            const sp_tensor *u = &f->tensors[j];
            if (strcmp(t->name, u->name) == 0) die("duplicate name accepted");
            const uint8_t *q = u->data;
            if (in_file && t->nbytes && u->nbytes && q >= data && q <= end && p < q + u->nbytes && q < p + t->nbytes)
                die("overlapping tensors accepted");
        }
    }
    (void)sink;
    walk_json(sp_json_root(&f->header));
}

/* Returns whether the safetensors parser accepted the input. */
static bool run_one(const uint8_t *input, size_t size) {
    /* A private copy of exactly `size` bytes: the parser must not read beyond it. */
    uint8_t *buf = calloc(size ? size : 1, 1);
    if (size) memcpy(buf, input, size);
    sp_safetensors f;
    bool accepted = sp_safetensors_parse(buf, size, "fuzz.safetensors", &f) == SPLASH_OK;
    if (accepted) {
        check_accepted(&f, buf, size);
        sp_safetensors_close(&f);
    }
    if (size > 8) {
        sp_json_doc doc;
        if (sp_json_parse(&doc, (const char *)buf + 8, size - 8) == SPLASH_OK) {
            walk_json(sp_json_root(&doc));
            sp_json_free(&doc);
        }
    }
    free(buf);
    return accepted;
}

#ifdef SP_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    run_one(data, size);
    return 0;
}
#else

/* ---- input generation ---------------------------------------------------------------------------------------- */

typedef struct rng {
    uint64_t s;
} rng;

static uint64_t next(rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t below(rng *r, uint64_t n) { return n ? next(r) % n : 0; }

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}
static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }
static void putf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static const char *const dtype_names[] = {"F32", "F16",  "BF16",    "F64",     "I8",      "U8", "I16", "U16", "I32",
                                          "U32", "I64",  "U64",     "BOOL",    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                          "C64", "f32", "",        "BF16 ",   "F6_E2M3"};
static const char *const interesting[] = {"0",    "1",          "-1",         "7",       "255",       "65536",
                                          "2147483647", "4294967296", "9223372036854775807", "9223372036854775808",
                                          "18446744073709551615", "-9223372036854775808", "1.5", "1e308", "1e999",
                                          "0.0", "-0", "1E2", "null", "\"3\"", "[]", "{}", "true"};

/* A well-formed image: up to 6 tensors of random dtype and shape laid out back to back (sometimes with holes),
 * optional metadata, header sometimes padded. The header text goes to *h, the data to *d. */
static void valid_image(rng *r, buf *h, buf *d) {
    puts_(h, "{");
    bool first = true;
    if (below(r, 3) == 0) {
        puts_(h, "\"__metadata__\": {\"format\": \"pt\", \"k\": \"v\\u00e9\"}");
        first = false;
    }
    size_t n = below(r, 7), off = 0;
    for (size_t i = 0; i < n; i++) {
        int dt = (int)below(r, 16);
        static const int sizes[16] = {4, 2, 2, 8, 1, 1, 2, 2, 4, 4, 8, 8, 1, 1, 1, 1};
        int nd = (int)below(r, 4);
        int64_t shape[4], numel = 1;
        for (int k = 0; k < nd; k++) numel *= (shape[k] = (int64_t)below(r, 5));
        size_t nb = (size_t)numel * (size_t)sizes[dt];
        if (below(r, 4) == 0) off += below(r, 9); /* a hole */
        putf(h, "%s\"t%zu.w\": {\"dtype\": \"%s\", \"shape\": [", first ? "" : ", ", i, dtype_names[dt]);
        for (int k = 0; k < nd; k++) putf(h, "%s%lld", k ? ", " : "", (long long)shape[k]);
        putf(h, "], \"data_offsets\": [%zu, %zu]}", off, off + nb);
        off += nb;
        first = false;
    }
    puts_(h, "}");
    size_t pad = below(r, 2) ? (8 - h->len % 8) % 8 : 0;
    for (size_t i = 0; i < pad; i++) puts_(h, " ");
    for (size_t i = 0; i < off + below(r, 3); i++) {
        char c = (char)next(r);
        put(d, &c, 1);
    }
}

/* Replaces the i-th number literal in the header with an interesting token. */
static void swap_number(rng *r, buf *h) {
    size_t count = 0;
    for (size_t i = 0; i < h->len; i++)
        if ((h->p[i] >= '0' && h->p[i] <= '9') && (i == 0 || !(h->p[i - 1] >= '0' && h->p[i - 1] <= '9'))) count++;
    if (!count) return;
    size_t want = below(r, count), seen = 0;
    for (size_t i = 0; i < h->len; i++) {
        if (!(h->p[i] >= '0' && h->p[i] <= '9') || (i > 0 && h->p[i - 1] >= '0' && h->p[i - 1] <= '9')) continue;
        if (seen++ != want) continue;
        size_t j = i;
        while (j < h->len && h->p[j] >= '0' && h->p[j] <= '9') j++;
        const char *rep = interesting[below(r, sizeof interesting / sizeof interesting[0])];
        buf out = {0};
        put(&out, h->p, i);
        puts_(&out, rep);
        put(&out, h->p + j, h->len - j);
        free(h->p);
        *h = out;
        return;
    }
}

/* Replaces a dtype string with another (maybe unknown) one. */
static void swap_dtype(rng *r, buf *h) {
    char *p = strstr(h->p, "\"dtype\": \"");
    if (!p) return;
    size_t skip = below(r, 4);
    while (skip-- && strstr(p + 1, "\"dtype\": \"")) p = strstr(p + 1, "\"dtype\": \"");
    char *v = p + 10, *e = strchr(v, '"');
    if (!e) return;
    buf out = {0};
    put(&out, h->p, (size_t)(v - h->p));
    puts_(&out, dtype_names[below(r, sizeof dtype_names / sizeof dtype_names[0])]);
    puts_(&out, e);
    free(h->p);
    *h = out;
}

/* Inserts a snippet at a random position: deep nesting, bad escapes, invalid UTF-8, stray tokens. */
static void insert_snippet(rng *r, buf *h) {
    buf s = {0};
    switch (below(r, 6)) {
    case 0: {
        size_t depth = 1 + below(r, 200);
        for (size_t i = 0; i < depth; i++) puts_(&s, below(r, 2) ? "[" : "{\"k\":");
        break;
    }
    case 1: puts_(&s, (const char *[]){"\\ud800", "\\udc00\\ud800", "\\u12", "\\x", "\\", "\\u0000"}[below(r, 6)]); break;
    case 2: puts_(&s, (const char *[]){"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "\xe2\x82", "\x01"}[below(r, 6)]); break;
    case 3: puts_(&s, (const char *[]){",", ":", "]", "}", "\"", "-", ".", "e", " "}[below(r, 9)]); break;
    case 4: puts_(&s, interesting[below(r, sizeof interesting / sizeof interesting[0])]); break;
    default: {
        /* a copy of an existing entry: a duplicate name or an overlapping range */
        char *p = strstr(h->p, "\"t");
        char *e = p ? strchr(p, '}') : NULL;
        if (e) {
            puts_(&s, ", ");
            put(&s, p, (size_t)(e - p + 1));
        }
    }
    }
    size_t at = below(r, h->len + 1);
    buf out = {0};
    put(&out, h->p, at);
    put(&out, s.p ? s.p : "", s.len);
    put(&out, h->p + at, h->len - at);
    free(s.p);
    free(h->p);
    *h = out;
}

/* Input `iter` of `seed`: a valid image, mutated at the text level and/or the byte level. */
static uint8_t *make_input(uint64_t seed, uint64_t iter, size_t *size) {
    rng r = {seed * 0x100000001b3ull ^ (iter + 1) * 0x9e3779b97f4a7c15ull};
    buf h = {0}, d = {0};
    puts_(&h, "");
    valid_image(&r, &h, &d);
    int kind = (int)below(&r, 10);
    if (kind >= 2) { /* text-level mutations, header length kept consistent */
        for (uint64_t m = 1 + below(&r, 3); m-- > 0;) {
            switch (below(&r, 3)) {
            case 0: swap_number(&r, &h); break;
            case 1: swap_dtype(&r, &h); break;
            default: insert_snippet(&r, &h);
            }
        }
    }
    size_t n = 8 + h.len + d.len;
    uint8_t *out = malloc(n < 64 ? 64 : n);
    uint64_t hl = h.len;
    switch (below(&r, 8)) { /* the length field: usually right, sometimes not */
    case 0: hl = next(&r); break;
    case 1: hl = (uint64_t[]){0, 1, 2, h.len + 1, h.len - 1, n - 8, n - 7, UINT64_MAX, 1ull << 63}[below(&r, 9)]; break;
    default: break;
    }
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)(hl >> (8 * i));
    memcpy(out + 8, h.p, h.len);
    if (d.len) memcpy(out + 8 + h.len, d.p, d.len);
    free(h.p);
    free(d.p);
    if (kind == 0) { /* byte-level: bit flips and random bytes anywhere */
        for (uint64_t m = 1 + below(&r, 8); m-- > 0;) {
            size_t at = below(&r, n);
            if (below(&r, 2)) out[at] ^= (uint8_t)(1u << below(&r, 8));
            else out[at] = (uint8_t)next(&r);
        }
    }
    if (kind == 1 || below(&r, 8) == 0) n = below(&r, n + 1); /* truncation */
    if (below(&r, 50) == 0) { /* pure noise */
        n = below(&r, 64);
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)next(&r);
    }
    *size = n;
    return out;
}

int main(int argc, char **argv) {
    double seconds = 10;
    uint64_t seed = (uint64_t)time(NULL), one = UINT64_MAX;
    const char *dump = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--seed") == 0) seed = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--iter") == 0) one = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--dump") == 0) dump = argv[i + 1];
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--seed N] [--iter I --dump FILE]\n", argv[0]);
            return 2;
        }
    }
    current_seed = seed;
    if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(print_reproduce);
    if (one != UINT64_MAX) {
        current_iter = one;
        size_t n;
        uint8_t *in = make_input(seed, one, &n);
        if (dump) {
            FILE *f = fopen(dump, "wb");
            if (!f || fwrite(in, 1, n, f) != n) return 2;
            fclose(f);
        }
        run_one(in, n);
        free(in);
        return 0;
    }
    printf("fuzz_safetensors: seed %llu, %.0f s\n", (unsigned long long)seed, seconds);
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t iter = 0, accepted = 0;
    for (;; iter++) {
        if ((iter & 255) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) >= seconds) break;
        }
        current_iter = iter;
        size_t n;
        uint8_t *in = make_input(seed, iter, &n);
        accepted += run_one(in, n);
        free(in);
    }
    printf("fuzz_safetensors: %llu inputs, %llu accepted, %llu refused, no crash, no invariant broken\n",
           (unsigned long long)iter, (unsigned long long)accepted, (unsigned long long)(iter - accepted));
    return 0;
}
#endif
