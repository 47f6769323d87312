#include "packed.h"

#include "checkpoint.h"
#include "error.h"
#include "quant.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { FIXED_HEADER = 64 };
#define REDO "delete it and run `splash import` again"

/* ---- XXH64 (the reference algorithm, xxhash.h) ------------------------------------------------------------------ */

static const uint64_t P1 = 11400714785074694791ull, P2 = 14029467366897019727ull, P3 = 1609587929392839161ull,
                      P4 = 9650029242287828579ull, P5 = 2870177450012600261ull;

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t round64(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }
static uint64_t merge64(uint64_t h, uint64_t v) { return (h ^ round64(0, v)) * P1 + P4; }

void sp_xxh64_init(sp_xxh64_state *h) {
    memset(h, 0, sizeof *h);
    h->v[0] = P1 + P2, h->v[1] = P2, h->v[2] = 0, h->v[3] = 0 - P1;
}

void sp_xxh64_update(sp_xxh64_state *h, const void *data, size_t len) {
    if (!len) return; /* data may be NULL then, and memcpy must not see it */
    const uint8_t *p = data, *end = p + len;
    h->total += len;
    if (h->n + len < 32) {
        memcpy(h->buf + h->n, p, len);
        h->n += (uint32_t)len;
        return;
    }
    if (h->n) {
        memcpy(h->buf + h->n, p, 32 - h->n);
        p += 32 - h->n;
        for (int i = 0; i < 4; i++) h->v[i] = round64(h->v[i], rd64(h->buf + 8 * i));
        h->n = 0;
    }
    for (; p + 32 <= end; p += 32)
        for (int i = 0; i < 4; i++) h->v[i] = round64(h->v[i], rd64(p + 8 * i));
    memcpy(h->buf, p, (size_t)(end - p));
    h->n = (uint32_t)(end - p);
}

uint64_t sp_xxh64_final(const sp_xxh64_state *h) {
    uint64_t r;
    if (h->total >= 32) {
        r = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++) r = merge64(r, h->v[i]);
    } else {
        r = h->v[2] + P5;
    }
    r += h->total;
    const uint8_t *p = h->buf, *end = p + h->n;
    for (; p + 8 <= end; p += 8) r = rotl(r ^ round64(0, rd64(p)), 27) * P1 + P4;
    if (p + 4 <= end) r = rotl(r ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3, p += 4;
    for (; p < end; p++) r = rotl(r ^ *p * P5, 11) * P1;
    r ^= r >> 33, r *= P2, r ^= r >> 29, r *= P3, r ^= r >> 32;
    return r;
}

uint64_t sp_xxh64(const void *data, size_t len) {
    sp_xxh64_state h;
    sp_xxh64_init(&h);
    sp_xxh64_update(&h, data, len);
    return sp_xxh64_final(&h);
}

/* ---- the fixed header -------------------------------------------------------------------------------------------- */

typedef struct fixed {
    uint32_t version, flags;
    uint64_t header_bytes, data_offset, file_bytes, header_xxh64, payload_xxh64;
} fixed;

static void put_fixed(uint8_t out[FIXED_HEADER], const fixed *f) {
    memset(out, 0, FIXED_HEADER);
    memcpy(out, SP_PACKED_MAGIC, 8);
    memcpy(out + 8, &f->version, 4);
    memcpy(out + 12, &f->flags, 4);
    memcpy(out + 16, &f->header_bytes, 8);
    memcpy(out + 24, &f->data_offset, 8);
    memcpy(out + 32, &f->file_bytes, 8);
    memcpy(out + 40, &f->header_xxh64, 8);
    memcpy(out + 48, &f->payload_xxh64, 8);
}

static uint64_t align_up(uint64_t x) { return (x + SP_PACKED_ALIGN - 1) / SP_PACKED_ALIGN * SP_PACKED_ALIGN; }

/* ---- reading ------------------------------------------------------------------------------------------------------ */

static bool type_named(const char *name, sp_mtype *out) {
    for (int t = 0; t < SP_MAT_TYPE_COUNT && name; t++)
        if (!strcmp(name, sp_mtype_name((sp_mtype)t))) return *out = (sp_mtype)t, true;
    return false;
}

static bool dtype_named(const char *name, sp_dtype *out) {
    for (int d = 0; d < SP_DTYPE_COUNT && name; d++)
        if (!strcmp(name, sp_dtype_name((sp_dtype)d))) return *out = (sp_dtype)d, true;
    return false;
}

static bool u64_of(const sp_json *v, uint64_t *out) {
    int64_t x;
    if (!sp_json_int(v, &x) || x < 0) return false;
    *out = (uint64_t)x;
    return true;
}

/* One entry of the tensor table into t, checked against the file; NULL when it is fine, else what is wrong. */
static const char *entry(const sp_json *e, const uint8_t *buf, const fixed *f, uint64_t *prev_end, sp_tensor *t) {
    const sp_json *shape = sp_json_get(e, "shape");
    sp_mtype type;
    uint64_t rows, cols, row_bytes, offset, bytes;
    if (!(t->name = sp_json_string(sp_json_get(e, "name")))) return "an entry without a name";
    if (!type_named(sp_json_string(sp_json_get(e, "type")), &type)) return "an unknown type";
    if (!dtype_named(sp_json_string(sp_json_get(e, "dtype")), &t->dtype)) return "an unknown dtype";
    if (!shape || shape->type != SP_JSON_ARRAY || shape->len > SP_MAX_DIMS) return "a bad shape";
    if (!u64_of(sp_json_get(e, "rows"), &rows) || !u64_of(sp_json_get(e, "cols"), &cols) ||
        !u64_of(sp_json_get(e, "row_bytes"), &row_bytes) || !u64_of(sp_json_get(e, "offset"), &offset) ||
        !u64_of(sp_json_get(e, "bytes"), &bytes))
        return "missing rows, cols, row_bytes, offset or bytes";
    t->ndim = (int32_t)shape->len;
    uint64_t numel = 1;
    for (int32_t i = 0; i < t->ndim; i++) {
        uint64_t d;
        if (!u64_of(sp_json_at(shape, (size_t)i), &d) || d > (1ull << 40)) return "a bad shape";
        t->shape[i] = (int64_t)d;
        numel *= d;
    }
    if (cols != (t->ndim ? (uint64_t)t->shape[t->ndim - 1] : 1) || cols == 0 || rows * cols != numel)
        return "rows and cols that disagree with the shape";
    if (row_bytes != (uint64_t)sp_mtype_row_bytes(type, (int64_t)cols) || row_bytes == 0 || bytes != rows * row_bytes)
        return "row bytes that disagree with the type";
    if (offset % SP_PACKED_ALIGN || offset < *prev_end || offset < f->data_offset || bytes > f->file_bytes ||
        offset > f->file_bytes - bytes)
        return "an offset out of order, unaligned or past the end";
    *prev_end = offset + bytes;
    t->data = buf + offset;
    t->nbytes = bytes;
    t->layout = 1 + (int32_t)type;
    t->row_bytes = (int64_t)row_bytes;
    return NULL;
}

splash_status sp_packed_open(const char *path, sp_safetensors *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_IO, "%s: not a readable regular file", path);
    }
    uint64_t size = (uint64_t)s.st_size;
    if (size < FIXED_HEADER) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: %llu bytes, shorter than a packed file's header: truncated; " REDO, path,
                       (unsigned long long)size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    out->buf = map;
    out->size = size;
    out->mapped = true;
    out->path = strdup(path);
    const uint8_t *buf = map;
    fixed f;
    memcpy(&f.version, buf + 8, 4);
    memcpy(&f.header_bytes, buf + 16, 8);
    memcpy(&f.data_offset, buf + 24, 8);
    memcpy(&f.file_bytes, buf + 32, 8);
    memcpy(&f.header_xxh64, buf + 40, 8);
    splash_status st = SPLASH_OK;
    if (memcmp(buf, SP_PACKED_MAGIC, 8) != 0)
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: not a Splash packed file (bad magic); " REDO, path);
    else if (f.version != SP_PACKED_VERSION)
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: packed format version %u, this build reads %d; " REDO, path, f.version, SP_PACKED_VERSION);
    else if (f.file_bytes != size)
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: %llu bytes but its header says %llu: truncated or damaged; " REDO, path,
                     (unsigned long long)size, (unsigned long long)f.file_bytes);
    else if (f.header_bytes > size - FIXED_HEADER || f.data_offset != align_up(FIXED_HEADER + f.header_bytes) || f.data_offset > size)
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: header length %llu does not fit the file; " REDO, path, (unsigned long long)f.header_bytes);
    else if (sp_xxh64(buf + FIXED_HEADER, f.header_bytes) != f.header_xxh64)
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: the header's checksum does not match: damaged; " REDO, path);
    else if (sp_json_parse(&out->header, (const char *)buf + FIXED_HEADER, f.header_bytes))
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: header: %s; " REDO, path, out->header.error);
    const sp_json *list = st ? NULL : sp_json_get(sp_json_root(&out->header), "tensors");
    if (!st && (!list || list->type != SP_JSON_ARRAY))
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: header has no tensor table; " REDO, path);
    if (!st && !(out->tensors = calloc(list->len ? list->len : 1, sizeof *out->tensors)))
        st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    uint64_t prev_end = 0;
    for (const sp_json *e = st ? NULL : sp_json_first(list); e; e = sp_json_next(list, e)) {
        sp_tensor *t = &out->tensors[out->n_tensors];
        const char *bad = entry(e, buf, &f, &prev_end, t);
        if (bad) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: tensor table entry %zu (%s) has %s; " REDO, path, out->n_tensors,
                         t->name ? t->name : "?", bad);
            break;
        }
        t->file = out->path;
        out->n_tensors++;
    }
    if (st) sp_safetensors_close(out);
    return st;
}

splash_status sp_packed_verify(const char *path) {
    sp_safetensors f;
    splash_status st = sp_packed_open(path, &f);
    if (st) return st;
    uint64_t data_offset, want;
    memcpy(&data_offset, f.buf + 24, 8);
    memcpy(&want, f.buf + 48, 8);
    uint64_t got = sp_xxh64(f.buf + data_offset, f.size - data_offset);
    sp_safetensors_close(&f);
    if (got != want)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: the weights' checksum does not match (xxh64 %016llx, header says %016llx): "
                       "the file is damaged; " REDO, path, (unsigned long long)got, (unsigned long long)want);
    return SPLASH_OK;
}

/* ---- writing ------------------------------------------------------------------------------------------------------ */

typedef struct text {
    char *s;
    size_t len, cap;
    bool oom;
} text;

static void add(text *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->oom || n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = (b->len + (size_t)n + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s, b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A JSON string: tensor names and kinds are plain ASCII, but quotes, backslashes and controls are escaped anyway. */
static void add_string(text *b, const char *s) {
    add(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') add(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) add(b, "\\u%04x", (unsigned char)*s);
        else add(b, "%c", *s);
    }
    add(b, "\"");
}

typedef struct planned {
    const sp_tensor *t;
    sp_mtype type;
    const char *kind;
    int64_t rows, cols, row_bytes;
    uint64_t offset, bytes;
} planned;

static splash_status write_all(int fd, const void *data, size_t len, const char *path, sp_xxh64_state *h) {
    const uint8_t *p = data;
    if (h) sp_xxh64_update(h, data, len);
    while (len) {
        ssize_t n = write(fd, p, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return SP_FAIL(SPLASH_ERR_IO, "%s: write failed: %s", path, n < 0 ? strerror(errno) : "no progress");
        p += n, len -= (size_t)n;
    }
    return SPLASH_OK;
}

static splash_status zeros(int fd, uint64_t n, const char *path, sp_xxh64_state *h) {
    static const uint8_t z[4096];
    splash_status st = SPLASH_OK;
    while (n && !st) {
        size_t k = n < sizeof z ? (size_t)n : sizeof z;
        st = write_all(fd, z, k, path, h);
        n -= k;
    }
    return st;
}

/* Decides every tensor's type, rows and place; the header text goes into `b`. */
static splash_status plan(const sp_checkpoint *ck, const sp_json *choices, planned *p, text *b, const char *meta_json) {
    const char *dir = sp_checkpoint_dir(ck);
    size_t n = sp_checkpoint_count(ck);
    for (size_t i = 0; i < n; i++) {
        const sp_tensor *t = sp_checkpoint_tensor(ck, i);
        const sp_json *c = sp_json_get(choices, t->name);
        const char *want = sp_json_string(sp_json_get(c, "type"));
        p[i] = (planned){.t = t, .kind = sp_json_string(sp_json_get(c, "kind"))};
        switch (t->dtype) {
        case SP_DTYPE_F32: p[i].type = SP_MAT_F32; break;
        case SP_DTYPE_BF16: p[i].type = SP_MAT_BF16; break;
        case SP_DTYPE_F16: p[i].type = SP_MAT_F16; break;
        default:
            return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "tensor %s in %s is %s: `splash import` takes a float (bf16/f16/f32) "
                           "checkpoint (an MLX-quantized one loads as it is)", t->name, t->file, sp_dtype_name(t->dtype));
        }
        if (want && !strcmp(want, "q8")) p[i].type = SP_MAT_Q8;
        else if (want && !strcmp(want, "q4")) p[i].type = SP_MAT_Q4;
        else if (want) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%s: type \"%s\" for tensor %s: expected q8 or q4 (or none: as stored)", dir, want, t->name);
        if (want && t->ndim < 2)
            return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "%s: tensor %s has %d dimension(s): only matrices are quantized", dir, t->name, t->ndim);
        p[i].cols = t->ndim ? t->shape[t->ndim - 1] : 1;
        if (p[i].cols == 0) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "%s: tensor %s has no columns", dir, t->name);
        p[i].rows = sp_tensor_numel(t) / p[i].cols;
        p[i].row_bytes = sp_mtype_row_bytes(p[i].type, p[i].cols);
        p[i].bytes = (uint64_t)(p[i].rows * p[i].row_bytes);
    }
    /* Offsets are printed 20 characters wide (space-padded), so the header's length does not depend on them: measure it with
     * placeholders, place the tensors after it, then print it again with the real offsets. */
    for (int pass = 0; pass < 2; pass++) {
        b->len = 0;
        add(b, "{\"format\":\"splash-packed\",\"version\":%d,\"meta\":%s,\"tensors\":[", SP_PACKED_VERSION, meta_json);
        for (size_t i = 0; i < n; i++) {
            add(b, "%s{\"name\":", i ? "," : "");
            add_string(b, p[i].t->name);
            add(b, ",\"kind\":");
            add_string(b, p[i].kind ? p[i].kind : "");
            add(b, ",\"type\":\"%s\",\"dtype\":\"%s\",\"shape\":[", sp_mtype_name(p[i].type), sp_dtype_name(p[i].t->dtype));
            for (int32_t d = 0; d < p[i].t->ndim; d++) add(b, "%s%lld", d ? "," : "", (long long)p[i].t->shape[d]);
            add(b, "],\"rows\":%lld,\"cols\":%lld,\"row_bytes\":%lld,\"offset\":%20llu,\"bytes\":%llu}", (long long)p[i].rows,
                (long long)p[i].cols, (long long)p[i].row_bytes, (unsigned long long)p[i].offset, (unsigned long long)p[i].bytes);
        }
        add(b, "]}");
        if (b->oom) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory for the packed header");
        uint64_t off = align_up(FIXED_HEADER + b->len);
        for (size_t i = 0; i < n && pass == 0; i++) off = align_up(off), p[i].offset = off, off += p[i].bytes;
    }
    return SPLASH_OK;
}

splash_status sp_packed_write(sp_threadpool *pool, const char *src, const char *path, const char *tensors_json,
                               const char *meta_json) {
    sp_json_doc choices = {0}, meta = {0};
    if (sp_json_parse(&choices, tensors_json, strlen(tensors_json)))
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "tensor types: %s", choices.error);
    if (sp_json_parse(&meta, meta_json, strlen(meta_json)) || sp_json_root(&meta)->type != SP_JSON_OBJECT) {
        sp_json_free(&choices);
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "meta: not a JSON object");
    }
    sp_json_free(&meta);
    sp_checkpoint *ck = NULL;
    planned *p = NULL;
    text b = {0};
    char *tmp = NULL;
    int fd = -1;
    splash_status st = sp_checkpoint_open(src, &ck);
    if (!st && !(p = calloc(sp_checkpoint_count(ck) + 1, sizeof *p))) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    if (!st) st = plan(ck, sp_json_root(&choices), p, &b, meta_json);
    if (!st && !(tmp = malloc(strlen(path) + 5))) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    if (tmp) sprintf(tmp, "%s.tmp", path);
    if (!st && (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
        st = SP_FAIL(SPLASH_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    fixed f = {.version = SP_PACKED_VERSION, .header_bytes = b.len};
    f.data_offset = align_up(FIXED_HEADER + b.len);
    f.header_xxh64 = sp_xxh64(b.s, b.len);
    uint8_t head[FIXED_HEADER];
    put_fixed(head, &f);
    if (!st) st = write_all(fd, head, FIXED_HEADER, tmp, NULL);
    if (!st) st = write_all(fd, b.s, b.len, tmp, NULL);
    if (!st) st = zeros(fd, f.data_offset - FIXED_HEADER - b.len, tmp, NULL);
    sp_xxh64_state h;
    sp_xxh64_init(&h);
    uint64_t at = f.data_offset;
    for (size_t i = 0; !st && i < sp_checkpoint_count(ck); i++) {
        st = zeros(fd, p[i].offset - at, tmp, &h);
        void *owned = NULL;
        const void *rows = p[i].t->data;
        if (!st && (p[i].type == SP_MAT_Q8 || p[i].type == SP_MAT_Q4)) {
            sp_matrix m;
            st = sp_matrix_from_tensor(pool, p[i].t, p[i].type == SP_MAT_Q8 ? SP_QUANT_Q8 : SP_QUANT_Q4, &m, &owned);
            rows = m.data;
        }
        if (!st) st = write_all(fd, rows, (size_t)p[i].bytes, tmp, &h);
        free(owned);
        at = p[i].offset + p[i].bytes;
    }
    if (!st) {
        f.file_bytes = at;
        f.payload_xxh64 = sp_xxh64_final(&h);
        put_fixed(head, &f);
        if (pwrite(fd, head, FIXED_HEADER, 0) != FIXED_HEADER) st = SP_FAIL(SPLASH_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
        else if (fsync(fd) != 0) st = SP_FAIL(SPLASH_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    }
    if (fd >= 0 && close(fd) != 0 && !st) st = SP_FAIL(SPLASH_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0) st = SP_FAIL(SPLASH_ERR_IO, "%s: cannot rename to %s: %s", tmp, path, strerror(errno));
    if (st && fd >= 0) unlink(tmp);
    free(tmp);
    free(b.s);
    free(p);
    sp_checkpoint_close(ck);
    sp_json_free(&choices);
    return st;
}
