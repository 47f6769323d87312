#include "safetensors.h"

#include "error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[SP_DTYPE_COUNT] = {
    [SP_DTYPE_F32] = {"F32", 4},         [SP_DTYPE_F16] = {"F16", 2},         [SP_DTYPE_BF16] = {"BF16", 2},
    [SP_DTYPE_F64] = {"F64", 8},         [SP_DTYPE_I8] = {"I8", 1},           [SP_DTYPE_U8] = {"U8", 1},
    [SP_DTYPE_I16] = {"I16", 2},         [SP_DTYPE_U16] = {"U16", 2},         [SP_DTYPE_I32] = {"I32", 4},
    [SP_DTYPE_U32] = {"U32", 4},         [SP_DTYPE_I64] = {"I64", 8},         [SP_DTYPE_U64] = {"U64", 8},
    [SP_DTYPE_BOOL] = {"BOOL", 1},       [SP_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [SP_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
    [SP_DTYPE_F8_E8M0] = {"F8_E8M0", 1},
};

const char *sp_dtype_name(sp_dtype d) { return (unsigned)d < SP_DTYPE_COUNT ? dtypes[d].name : "?"; }
size_t sp_dtype_size(sp_dtype d) { return (unsigned)d < SP_DTYPE_COUNT ? dtypes[d].size : 0; }

char *sp_shape_string(char *buf, size_t size, int32_t ndim, const int64_t *shape) {
    size_t n = 0;
    buf[0] = 0;
    n += (size_t)snprintf(buf, size, "[");
    for (int32_t i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}

static const uint64_t empty_tensor[1];

static int by_offset(const void *a, const void *b) {
    const sp_tensor *x = a, *y = b;
    uintptr_t p = (uintptr_t)x->data, q = (uintptr_t)y->data; /* offsets until finish() fixes them up */
    return p < q ? -1 : p > q ? 1 : (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}

static int by_name(const void *a, const void *b) { return strcmp((*(const sp_tensor *const *)a)->name, (*(const sp_tensor *const *)b)->name); }

/* Reads one header entry into *t (data as an offset from the data section, fixed up by the caller). */
static splash_status read_entry(const sp_json *e, const char *path, uint64_t data_size, sp_tensor *t) {
    const char *name = e->key;
    if (e->key_len == 0) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: a tensor has an empty name", path);
    if (strlen(name) != e->key_len) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: a tensor name contains a NUL character", path);
    if (e->type != SP_JSON_OBJECT)
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: entry is a JSON %s, not an object", name, path,
                       sp_json_type_name(e->type));
    const sp_json *dt = sp_json_get(e, "dtype"), *shape = sp_json_get(e, "shape"), *offs = sp_json_get(e, "data_offsets");
    if (!sp_json_string(dt)) return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: missing or non-string \"dtype\"", name, path);
    if (!shape || shape->type != SP_JSON_ARRAY)
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: missing or non-array \"shape\"", name, path);
    if (!offs || offs->type != SP_JSON_ARRAY || offs->len != 2)
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: \"data_offsets\" must be an array [begin, end]", name, path);

    memset(t, 0, sizeof *t);
    t->name = name;
    t->file = path;
    int d = 0;
    while (d < SP_DTYPE_COUNT && strcmp(dtypes[d].name, dt->v.s) != 0) d++;
    if (d == SP_DTYPE_COUNT)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "tensor %s in %s: dtype \"%.32s\" is not supported", name, path, dt->v.s);
    t->dtype = (sp_dtype)d;

    if (shape->len > SP_MAX_DIMS)
        return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "tensor %s in %s: %zu dimensions (at most %d supported)", name, path,
                       shape->len, SP_MAX_DIMS);
    t->ndim = (int32_t)shape->len;
    uint64_t numel = 1;
    bool overflow = false;
    int32_t i = 0;
    for (const sp_json *s = sp_json_first(shape); s; s = sp_json_next(shape, s), i++) {
        int64_t v;
        if (!sp_json_int(s, &v) || v < 0)
            return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: shape[%d] is not a non-negative integer", name, path, i);
        t->shape[i] = v;
        overflow |= __builtin_mul_overflow(numel, (uint64_t)v, &numel);
    }
    uint64_t need;
    overflow |= __builtin_mul_overflow(numel, (uint64_t)dtypes[d].size, &need);
    int64_t begin, end;
    if (!sp_json_int(sp_json_at(offs, 0), &begin) || !sp_json_int(sp_json_at(offs, 1), &end) || begin < 0 || end < begin)
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: \"data_offsets\" must be integers 0 <= begin <= end", name,
                       path);
    char sh[160];
    if (overflow || need != (uint64_t)(end - begin))
        return SP_FAIL(SPLASH_ERR_FORMAT,
                       "tensor %s in %s: shape %s of %s needs %s%llu bytes but data_offsets [%lld, %lld] hold %lld",
                       name, path, sp_shape_string(sh, sizeof sh, t->ndim, t->shape), dtypes[d].name,
                       overflow ? "more than " : "", overflow ? (unsigned long long)UINT64_MAX : (unsigned long long)need,
                       (long long)begin, (long long)end, (long long)(end - begin));
    if ((uint64_t)end > data_size)
        return SP_FAIL(SPLASH_ERR_FORMAT,
                       "tensor %s in %s: data_offsets [%lld, %lld] run past the end of the data (%llu bytes): the file "
                       "is truncated or corrupt",
                       name, path, (long long)begin, (long long)end, (unsigned long long)data_size);
    t->data = (const void *)(uintptr_t)begin;
    t->nbytes = need;
    return SPLASH_OK;
}

static splash_status check_metadata(const sp_json *m, const char *path) {
    if (m->type != SP_JSON_OBJECT) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"__metadata__\" is not an object", path);
    for (const sp_json *e = sp_json_first(m); e; e = sp_json_next(m, e))
        if (e->type != SP_JSON_STRING)
            return SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"__metadata__\" value of \"%s\" is not a string (%s)", path, e->key,
                           sp_json_type_name(e->type));
    return SPLASH_OK;
}

/* Overlap and duplicate-name checks over the entries, then data pointers fixed up and misaligned data copied. */
static splash_status finish(sp_safetensors *f, const uint8_t *data) {
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_offset);
    const sp_tensor *prev = NULL; /* the non-empty range that ends furthest so far */
    for (size_t i = 0; i < f->n_tensors; i++) {
        const sp_tensor *t = &f->tensors[i];
        if (t->nbytes == 0) continue;
        uintptr_t begin = (uintptr_t)t->data;
        if (prev && begin < (uintptr_t)prev->data + prev->nbytes)
            return SP_FAIL(SPLASH_ERR_FORMAT, "tensors %s and %s in %s: data ranges overlap", prev->name, t->name, f->path);
        if (!prev || begin + t->nbytes > (uintptr_t)prev->data + prev->nbytes) prev = t;
    }
    if (f->n_tensors > 1) {
        const sp_tensor **names = malloc(f->n_tensors * sizeof *names);
        if (!names) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory indexing %zu tensors", f->path, f->n_tensors);
        for (size_t i = 0; i < f->n_tensors; i++) names[i] = &f->tensors[i];
        qsort(names, f->n_tensors, sizeof *names, by_name);
        for (size_t i = 1; i < f->n_tensors; i++) {
            if (strcmp(names[i - 1]->name, names[i]->name) == 0) {
                splash_status st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: the name appears twice in the header",
                                           names[i]->name, f->path);
                free(names);
                return st;
            }
        }
        free(names);
    }
    uint64_t copy_bytes = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        sp_tensor *t = &f->tensors[i];
        /* An empty tensor gets an aligned address that owns nothing, wherever its offset points. */
        t->data = t->nbytes ? data + (uintptr_t)t->data : (const void *)empty_tensor;
        if ((uintptr_t)t->data % sp_dtype_size(t->dtype)) copy_bytes += (t->nbytes + 63) & ~63ull;
    }
    if (copy_bytes) {
        uint8_t *dst = aligned_alloc(64, copy_bytes);
        if (!dst) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory aligning %llu bytes of tensor data", f->path,
                                 (unsigned long long)copy_bytes);
        f->aligned_copies = dst;
        for (size_t i = 0; i < f->n_tensors; i++) {
            sp_tensor *t = &f->tensors[i];
            if ((uintptr_t)t->data % sp_dtype_size(t->dtype) == 0) continue;
            memcpy(dst, t->data, t->nbytes);
            t->data = dst;
            dst += (t->nbytes + 63) & ~63ull;
        }
    }
    return SPLASH_OK;
}

static splash_status parse(const uint8_t *buf, uint64_t size, sp_safetensors *f) {
    const char *path = f->path;
    if (size < 8)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: %llu bytes, too short for a safetensors file (truncated?)", path,
                       (unsigned long long)size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n > size - 8)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: header length %llu exceeds the file size %llu (truncated or not safetensors)",
                       path, (unsigned long long)n, (unsigned long long)size);
    if (n > SP_SAFETENSORS_MAX_HEADER)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: header length %llu exceeds the %llu-byte limit", path,
                       (unsigned long long)n, SP_SAFETENSORS_MAX_HEADER);
    if (n < 2 || buf[8] != '{')
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: the header is not a JSON object (not a safetensors file?)", path);
    if (sp_json_parse(&f->header, (const char *)buf + 8, n) != SPLASH_OK)
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: bad header JSON at header %s", path, f->header.error);
    const sp_json *root = sp_json_root(&f->header);
    if (root->type != SP_JSON_OBJECT) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: the header is not a JSON object", path);

    size_t count = 0;
    for (const sp_json *e = sp_json_first(root); e; e = sp_json_next(root, e))
        if (strcmp(e->key, "__metadata__") != 0) count++;
    f->tensors = calloc(count ? count : 1, sizeof *f->tensors);
    if (!f->tensors) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensors", path, count);
    uint64_t data_size = size - 8 - n;
    for (const sp_json *e = sp_json_first(root); e; e = sp_json_next(root, e)) {
        splash_status st;
        if (strcmp(e->key, "__metadata__") == 0) {
            if (f->metadata) return SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"__metadata__\" appears twice", path);
            f->metadata = e;
            st = check_metadata(e, path);
        } else {
            st = read_entry(e, path, data_size, &f->tensors[f->n_tensors++]);
        }
        if (st != SPLASH_OK) return st;
    }
    return finish(f, buf + 8 + n);
}

splash_status sp_safetensors_parse(const uint8_t *buf, uint64_t size, const char *path, sp_safetensors *out) {
    memset(out, 0, sizeof *out);
    out->path = strdup(path);
    if (!out->path) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    out->buf = buf;
    out->size = size;
    splash_status st = parse(buf, size, out);
    if (st != SPLASH_OK) sp_safetensors_close(out);
    return st;
}

splash_status sp_safetensors_open(const char *path, sp_safetensors *out) {
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0) {
        int e = errno;
        close(fd);
        return SP_FAIL(SPLASH_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(s.st_mode)) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)s.st_size;
    if (size < 8) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: %llu bytes, too short for a safetensors file (truncated?)", path,
                       (unsigned long long)size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot map %llu bytes: %s", path, (unsigned long long)size, strerror(e));
    splash_status st = sp_safetensors_parse(map, size, path, out);
    if (st != SPLASH_OK) {
        munmap(map, size);
        return st;
    }
    out->mapped = true;
    return SPLASH_OK;
}

void sp_safetensors_close(sp_safetensors *f) {
    if (f->mapped) munmap((void *)(uintptr_t)f->buf, f->size);
    sp_json_free(&f->header);
    free(f->tensors);
    free(f->aligned_copies);
    free(f->path);
    memset(f, 0, sizeof *f);
}
