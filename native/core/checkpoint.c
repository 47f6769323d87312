#include "checkpoint.h"

#include "error.h"
#include "packed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct sp_checkpoint {
    char *dir;
    sp_json_doc config; /* empty when there is no config.json */
    sp_safetensors *files;
    size_t n_files;
    const sp_tensor **tensors; /* all tensors, file by file */
    size_t n_tensors;
    const sp_tensor **slots; /* open-addressing hash table by name, n_slots a power of two */
    size_t n_slots;
};

static const char index_name[] = "model.safetensors.index.json";

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static bool exists(const char *dir, const char *name) {
    char *p = join(dir, name);
    struct stat s;
    bool ok = p && stat(p, &s) == 0;
    free(p);
    return ok;
}

/* Reads a whole (small) file into a malloc'd buffer. */
static splash_status read_file(const char *path, char **out, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_IO, "%s: not a readable regular file", path);
    }
    size_t n = (size_t)s.st_size;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            close(fd);
            free(buf);
            return SP_FAIL(SPLASH_ERR_IO, "%s: read failed: %s", path, r == 0 ? "unexpected end of file" : strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    *out = buf;
    *len = n;
    return SPLASH_OK;
}

static splash_status parse_json_file(const char *dir, const char *name, sp_json_doc *doc) {
    char *path = join(dir, name);
    if (!path) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    char *text = NULL;
    size_t len = 0;
    splash_status st = read_file(path, &text, &len);
    if (st == SPLASH_OK) {
        if (sp_json_parse(doc, text, len) != SPLASH_OK) st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: invalid JSON at %s", path, doc->error);
        free(text);
    }
    free(path);
    return st;
}

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Inserts every tensor into the name table; a name already there is a duplicate across files. */
static splash_status index_tensors(sp_checkpoint *ck) {
    size_t n = 0;
    for (size_t f = 0; f < ck->n_files; f++) n += ck->files[f].n_tensors;
    size_t slots = 16;
    while (slots < 2 * n) slots *= 2;
    ck->tensors = malloc((n ? n : 1) * sizeof *ck->tensors);
    ck->slots = calloc(slots, sizeof *ck->slots);
    if (!ck->tensors || !ck->slots) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "%s: out of memory indexing %zu tensors", ck->dir, n);
    ck->n_slots = slots;
    for (size_t f = 0; f < ck->n_files; f++) {
        for (size_t i = 0; i < ck->files[f].n_tensors; i++) {
            const sp_tensor *t = &ck->files[f].tensors[i];
            size_t s = hash(t->name) & (slots - 1);
            while (ck->slots[s]) {
                if (strcmp(ck->slots[s]->name, t->name) == 0)
                    return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s is in both %s and %s", t->name, ck->slots[s]->file, t->file);
                s = (s + 1) & (slots - 1);
            }
            ck->slots[s] = t;
            ck->tensors[ck->n_tensors++] = t;
        }
    }
    return SPLASH_OK;
}

/* The slot holding `name`, or the empty slot where it would go. */
static size_t find_slot(const sp_checkpoint *ck, const char *name) {
    size_t s = hash(name) & (ck->n_slots - 1);
    while (ck->slots[s] && strcmp(ck->slots[s]->name, name) != 0) s = (s + 1) & (ck->n_slots - 1);
    return s;
}

static splash_status open_files(sp_checkpoint *ck, char **names, size_t n) {
    ck->files = calloc(n ? n : 1, sizeof *ck->files);
    if (!ck->files) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char *path = join(ck->dir, names[i]);
        if (!path) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        splash_status st = sp_safetensors_open(path, &ck->files[i]);
        free(path);
        if (st != SPLASH_OK) return st;
        ck->n_files++;
    }
    return SPLASH_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* Shard names from the index's weight_map, distinct, in name order. */
static splash_status index_shards(const sp_checkpoint *ck, const sp_json *map, const char *index_path, char ***out, size_t *out_n) {
    char **names = malloc((map->len ? map->len : 1) * sizeof *names);
    if (!names) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0;
    for (const sp_json *e = sp_json_first(map); e; e = sp_json_next(map, e)) {
        const char *file = sp_json_string(e);
        if (!file || !file[0] || strchr(file, '/') || strchr(file, '\\') || file[0] == '.' || strlen(file) != e->len) {
            free_names(names, n);
            return SP_FAIL(SPLASH_ERR_FORMAT, "%s: weight_map entry for tensor %s is not a plain file name", index_path, e->key);
        }
        bool seen = false;
        for (size_t i = n; i-- > 0 && !seen;) seen = strcmp(names[i], file) == 0; /* shards repeat in runs */
        if (seen) continue;
        if (!(names[n] = strdup(file))) {
            free_names(names, n);
            return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        }
        n++;
    }
    qsort(names, n, sizeof *names, cmp_str);
    *out = names;
    *out_n = n;
    return SPLASH_OK;
}

/* The index's weight_map and the shards' headers must describe the same tensors in the same files. */
static splash_status check_weight_map(const sp_checkpoint *ck, const sp_json *map, const char *index_path) {
    bool *listed = calloc(ck->n_slots, sizeof *listed); /* by hash slot */
    if (!listed) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    splash_status st = SPLASH_OK;
    for (const sp_json *e = sp_json_first(map); e && st == SPLASH_OK; e = sp_json_next(map, e)) {
        size_t slot = find_slot(ck, e->key);
        const sp_tensor *t = ck->slots[slot];
        const char *file = e->v.s;
        char *path = join(ck->dir, file);
        if (!path) {
            st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        } else if (!t) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: %s lists it in %s, but that file does not contain it", e->key,
                         index_path, path);
        } else if (strcmp(t->file, path) != 0) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: %s lists it in %s, but it is in %s", e->key, index_path, path, t->file);
        } else {
            if (listed[slot]) st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: listed twice in %s", e->key, index_path);
            listed[slot] = true;
        }
        free(path);
    }
    for (size_t i = 0; i < ck->n_slots && st == SPLASH_OK; i++)
        if (ck->slots[i] && !listed[i])
            st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s is not listed in %s", ck->slots[i]->name, ck->slots[i]->file,
                         index_path);
    free(listed);
    return st;
}

static splash_status open_indexed(sp_checkpoint *ck) {
    sp_json_doc index;
    splash_status st = parse_json_file(ck->dir, index_name, &index);
    if (st != SPLASH_OK) return st;
    char *index_path = join(ck->dir, index_name);
    const sp_json *map = sp_json_get(sp_json_root(&index), "weight_map");
    char **names = NULL;
    size_t n = 0;
    if (!index_path) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    else if (!map || map->type != SP_JSON_OBJECT) st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    else if (map->len == 0) st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
    if (st == SPLASH_OK) st = index_shards(ck, map, index_path, &names, &n);
    if (st == SPLASH_OK) st = open_files(ck, names, n);
    if (st == SPLASH_OK) st = index_tensors(ck);
    if (st == SPLASH_OK) st = check_weight_map(ck, map, index_path);
    if (names) free_names(names, n);
    free(index_path);
    sp_json_free(&index);
    return st;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a > b && strcmp(s + a - b, suffix) == 0;
}

/* Every *.safetensors in the directory, in name order. */
static splash_status open_bare(sp_checkpoint *ck) {
    DIR *d = opendir(ck->dir);
    if (!d) return SP_FAIL(SPLASH_ERR_IO, "%s: cannot read the directory: %s", ck->dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    splash_status st = SPLASH_OK;
    for (struct dirent *e; (e = readdir(d)) && st == SPLASH_OK;) {
        if (e->d_name[0] == '.' || !has_suffix(e->d_name, ".safetensors")) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) {
                st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
                break;
            }
            names = grown;
        }
        if (!(names[n] = strdup(e->d_name))) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        else n++;
    }
    closedir(d);
    if (st == SPLASH_OK && n == 0)
        st = SP_FAIL(SPLASH_ERR_IO, "%s: no model.safetensors, %s or *.safetensors files", ck->dir, index_name);
    if (st == SPLASH_OK) {
        qsort(names, n, sizeof *names, cmp_str);
        st = open_files(ck, names, n);
    }
    if (st == SPLASH_OK) st = index_tensors(ck);
    free_names(names, n);
    return st;
}

splash_status sp_checkpoint_open(const char *dir, sp_checkpoint **out) {
    *out = NULL;
    struct stat s;
    if (stat(dir, &s) != 0) return SP_FAIL(SPLASH_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(s.st_mode)) return SP_FAIL(SPLASH_ERR_IO, "%s: not a directory", dir);
    sp_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck || !(ck->dir = strdup(dir))) {
        free(ck);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    splash_status st = SPLASH_OK;
    if (exists(dir, "config.json")) st = parse_json_file(dir, "config.json", &ck->config);
    if (st == SPLASH_OK) {
        if (exists(dir, SP_PACKED_FILE)) { /* `splash import` output: one packed file, its rows in kernel layout */
            char *path = join(dir, SP_PACKED_FILE);
            ck->files = calloc(1, sizeof *ck->files);
            if (!path || !ck->files) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            else if ((st = sp_packed_open(path, &ck->files[0])) == SPLASH_OK) ck->n_files = 1;
            free(path);
            if (st == SPLASH_OK) st = index_tensors(ck);
        } else if (exists(dir, index_name)) {
            st = open_indexed(ck);
        } else if (exists(dir, "model.safetensors")) {
            char name[] = "model.safetensors", *names[] = {name};
            st = open_files(ck, names, 1);
            if (st == SPLASH_OK) st = index_tensors(ck);
        } else {
            st = open_bare(ck);
        }
    }
    if (st != SPLASH_OK) {
        sp_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return SPLASH_OK;
}

void sp_checkpoint_close(sp_checkpoint *ck) {
    if (!ck) return;
    for (size_t i = 0; i < ck->n_files; i++) sp_safetensors_close(&ck->files[i]);
    free(ck->files);
    free(ck->tensors);
    free(ck->slots);
    sp_json_free(&ck->config);
    free(ck->dir);
    free(ck);
}

const char *sp_checkpoint_dir(const sp_checkpoint *ck) { return ck->dir; }
const sp_json *sp_checkpoint_config(const sp_checkpoint *ck) { return sp_json_root(&ck->config); }
size_t sp_checkpoint_count(const sp_checkpoint *ck) { return ck->n_tensors; }
const sp_tensor *sp_checkpoint_tensor(const sp_checkpoint *ck, size_t i) { return i < ck->n_tensors ? ck->tensors[i] : NULL; }

const sp_tensor *sp_checkpoint_find(const sp_checkpoint *ck, const char *name) {
    return ck->n_slots ? ck->slots[find_slot(ck, name)] : NULL;
}

static char *dtypes_string(char *buf, size_t size, uint32_t mask) {
    size_t n = 0;
    buf[0] = 0;
    for (int d = 0; d < SP_DTYPE_COUNT && n < size; d++)
        if (mask & SP_DTYPE_BIT(d)) n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " or " : "", sp_dtype_name((sp_dtype)d));
    return buf;
}

splash_status sp_checkpoint_require(const sp_checkpoint *ck, const char *name, uint32_t dtypes, int32_t ndim,
                                    const int64_t *shape, const sp_tensor **out) {
    *out = NULL;
    const sp_tensor *t = sp_checkpoint_find(ck, name);
    if (!t) return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: not found in %s (%zu tensors in %zu files)", name, ck->dir,
                           ck->n_tensors, ck->n_files);
    if (dtypes && !(dtypes & SP_DTYPE_BIT(t->dtype))) {
        char want[128];
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: expected dtype %s got %s", name, t->file,
                       dtypes_string(want, sizeof want, dtypes), sp_dtype_name(t->dtype));
    }
    bool ok = ndim < 0 || t->ndim == ndim;
    for (int32_t i = 0; ok && ndim > 0 && i < ndim; i++) ok = shape[i] < 0 || shape[i] == t->shape[i];
    if (!ok) {
        char want[160], got[160];
        if (ndim > SP_MAX_DIMS) ndim = SP_MAX_DIMS;
        return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: expected shape %s got %s", name, t->file,
                       sp_shape_string(want, sizeof want, ndim, shape), sp_shape_string(got, sizeof got, t->ndim, t->shape));
    }
    *out = t;
    return SPLASH_OK;
}
