#include "checkpoint.h"

#include "error.h"
#include "packed.h"
#include "quant.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char index_name[] = "model.safetensors.index.json";

struct sp_checkpoint {
    char *dir;
    char *real_dir;     /* dir with every symlink resolved: the files must be under it */
    sp_json_doc config; /* empty when there is no config.json */
    sp_safetensors *files;
    char **names;       /* files[i] as the checkpoint names it, relative to dir: n_names of them */
    size_t n_files, n_names;
    const sp_tensor **tensors; /* all tensors, file by file */
    size_t n_tensors;
    const sp_tensor **slots; /* open-addressing hash table by name, n_slots a power of two */
    size_t n_slots;
    struct declared *declared; /* sp_checkpoint_declare's: what the loaders asked for; NULL for a directory */
};

/* A declared checkpoint's tensors, made as the loaders require them, and the zero pages their data reads from. */
struct declared {
    const char *const *present;  /* what the layout has besides what was required (sp_checkpoint_declare) */
    sp_tensor presence;          /* what sp_checkpoint_find returns for a present name not yet required */
    sp_tensor **tensors;         /* required so far, in order */
    int32_t *uses;               /* what the loader took each as (sp_checkpoint_note_use; -1: not said) */
    size_t n, cap;
    void *zeros[64];             /* read-only zero mappings, each twice the last; tensors read the largest */
    uint64_t zero_bytes[64];
    size_t n_zeros;
};

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
    bool ok = p && lstat(p, &s) == 0;
    free(p);
    return ok;
}

/* `real` is `dir` or a path below it (both resolved). */
static bool under(const char *real, const char *dir) {
    size_t n = strlen(dir);
    return strncmp(real, dir, n) == 0 && (real[n] == '/' || real[n] == 0 || (n == 1 && dir[0] == '/'));
}

/* A Hugging Face cache blob: <cache>/models--<org>--<name>/blobs/<sha1 or sha256>. A snapshot's files link there, and
 * so do the files of a directory `huggingface-cli download --local-dir` filled with links. */
static bool hub_blob(const char *real) {
    const char *name = strrchr(real, '/');
    if (!name || name - real < 7 || strncmp(name - 6, "/blobs", 6) != 0) return false;
    size_t n = strlen(++name);
    if (n != 40 && n != 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
    const char *repo = name - 7; /* the '/' before "blobs" */
    while (repo > real && repo[-1] != '/') repo--;
    return strncmp(repo, "models--", 8) == 0;
}

/* The path of file `name` of the checkpoint, checked: a plain name inside the directory whose target, after every
 * symlink, is inside the directory too (or a hub cache blob). A checkpoint's index is data from wherever the model
 * came from, and so are the links of a cloned repository or an unpacked archive: neither may make the loader read
 * another file of this machine. `tensor`: the weight_map entry that names the file, for the message, or NULL. */
static splash_status checkpoint_path(const sp_checkpoint *ck, const char *name, const char *tensor, char **out) {
    *out = NULL;
    if (!name[0] || strchr(name, '/') || strchr(name, '\\') || name[0] == '.') {
        if (tensor)
            return SP_FAIL(SPLASH_ERR_FORMAT, "%s/%s: the weight_map entry for tensor %s names \"%s\", not a plain file name in the directory",
                           ck->dir, index_name, tensor, name);
        return SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"%s\" is not a plain file name in the directory", ck->dir, name);
    }
    char *path = join(ck->dir, name);
    if (!path) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    char real[PATH_MAX];
    splash_status st = SPLASH_OK;
    if (!realpath(path, real)) {
        if (errno == ENOENT && tensor)
            st = SP_FAIL(SPLASH_ERR_IO, "%s is missing (the weight_map entry for tensor %s names it)", path, tensor);
        else st = SP_FAIL(SPLASH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    } else if (!under(real, ck->real_dir) && !hub_blob(real)) {
        st = SP_FAIL(SPLASH_ERR_FORMAT, "%s is a link to %s, outside the checkpoint directory%s%s%s", path, real,
                     tensor ? " (the weight_map entry for tensor " : "", tensor ? tensor : "", tensor ? " names it)" : "");
    }
    if (st) free(path);
    else *out = path;
    return st;
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

static splash_status parse_json_file(const sp_checkpoint *ck, const char *name, sp_json_doc *doc) {
    char *path;
    splash_status st = checkpoint_path(ck, name, NULL, &path);
    if (st) return st;
    char *text = NULL;
    size_t len = 0;
    st = read_file(path, &text, &len);
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

static void free_names(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

/* Opens the safetensors files `names` (the checkpoint takes the array and its strings, also on failure). tensors[i]:
 * the index entry that names file i, for messages; NULL when no index names them. */
static splash_status open_files(sp_checkpoint *ck, char **names, const char *const *tensors, size_t n) {
    ck->names = names;
    ck->n_names = n;
    ck->files = calloc(n ? n : 1, sizeof *ck->files);
    if (!ck->files) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char *path;
        splash_status st = checkpoint_path(ck, names[i], tensors ? tensors[i] : NULL, &path);
        if (!st) st = sp_safetensors_open(path, &ck->files[i]);
        free(path);
        if (st != SPLASH_OK) return st;
        ck->n_files++;
    }
    return SPLASH_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct shard {
    const char *file, *tensor; /* the name, and the first weight_map entry naming it */
} shard;

static int cmp_shard(const void *a, const void *b) { return strcmp(((const shard *)a)->file, ((const shard *)b)->file); }

/* Opens the shards the index's weight_map names, distinct, in name order. */
static splash_status open_shards(sp_checkpoint *ck, const sp_json *map, const char *index_path) {
    shard *shards = malloc((map->len ? map->len : 1) * sizeof *shards);
    if (!shards) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    size_t n = 0;
    splash_status st = SPLASH_OK;
    for (const sp_json *e = sp_json_first(map); e && !st; e = sp_json_next(map, e)) {
        const char *file = sp_json_string(e);
        if (!file || strlen(file) != e->len) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: the weight_map entry for tensor %s is not a file name", index_path, e->key);
            break;
        }
        bool seen = false;
        for (size_t i = n; i-- > 0 && !seen;) seen = strcmp(shards[i].file, file) == 0; /* shards repeat in runs */
        if (!seen) shards[n++] = (shard){file, e->key};
    }
    qsort(shards, n, sizeof *shards, cmp_shard);
    char **names = st ? NULL : calloc(n, sizeof *names);
    const char **tensors = st ? NULL : calloc(n, sizeof *tensors);
    if (!st && (!names || !tensors)) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < n && !st; i++) {
        tensors[i] = shards[i].tensor;
        if (!(names[i] = strdup(shards[i].file))) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (!st) st = open_files(ck, names, tensors, n);
    else free_names(names, n);
    free(tensors);
    free(shards);
    return st;
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
        size_t f = 0;
        while (t && f < ck->n_files && ck->files[f].path != t->file) f++;
        if (!t) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: %s lists it in %s/%s, but that file does not contain it", e->key,
                         index_path, ck->dir, file);
        } else if (strcmp(ck->names[f], file) != 0) {
            st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: %s lists it in %s/%s, but it is in %s", e->key, index_path, ck->dir,
                         file, t->file);
        } else {
            if (listed[slot]) st = SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: listed twice in %s", e->key, index_path);
            listed[slot] = true;
        }
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
    splash_status st = parse_json_file(ck, index_name, &index);
    if (st != SPLASH_OK) return st;
    char *index_path = join(ck->dir, index_name);
    const sp_json *map = sp_json_get(sp_json_root(&index), "weight_map");
    if (!index_path) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    else if (!map || map->type != SP_JSON_OBJECT) st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    else if (map->len == 0) st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
    if (st == SPLASH_OK) st = open_shards(ck, map, index_path);
    if (st == SPLASH_OK) st = index_tensors(ck);
    if (st == SPLASH_OK) st = check_weight_map(ck, map, index_path);
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
    if (st) {
        free_names(names, n);
        return st;
    }
    qsort(names, n, sizeof *names, cmp_str);
    st = open_files(ck, names, NULL, n);
    if (st == SPLASH_OK) st = index_tensors(ck);
    return st;
}

/* A NaN or infinity among `n` elements of dtype d at p: its index, or -1. Integer dtypes hold neither. */
static int64_t first_nonfinite(sp_dtype d, const uint8_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool bad;
        switch (d) {
        case SP_DTYPE_F32: {
            uint32_t u;
            memcpy(&u, p + 4 * i, 4);
            bad = (u & 0x7f800000u) == 0x7f800000u;
            break;
        }
        case SP_DTYPE_F64: {
            uint64_t u;
            memcpy(&u, p + 8 * i, 8);
            bad = (u & 0x7ff0000000000000ull) == 0x7ff0000000000000ull;
            break;
        }
        case SP_DTYPE_BF16: bad = (((const uint16_t *)p)[i] & 0x7f80) == 0x7f80; break;
        case SP_DTYPE_F16: bad = (((const uint16_t *)p)[i] & 0x7c00) == 0x7c00; break;
        case SP_DTYPE_F8_E4M3: bad = (p[i] & 0x7f) == 0x7f; break; /* no infinity; S.1111.111 is NaN */
        case SP_DTYPE_F8_E5M2: bad = (p[i] & 0x7c) == 0x7c; break;
        case SP_DTYPE_F8_E8M0: bad = p[i] == 0xff; break;
        default: return -1;
        }
        if (bad) return i;
    }
    return -1;
}

enum { SAMPLE_RUNS = 16, SAMPLE_RUN = 64, SAMPLE_ROWS = 8 };

/* A sample of tensor t's values must be finite: SAMPLE_RUNS runs of SAMPLE_RUN elements spread evenly over it (all
 * of a small tensor), or, for rows in a kernel layout, SAMPLE_ROWS rows read as floats (their scales and minimums
 * included). Weights a run wrote after its loss diverged are NaN throughout, and a model loaded from them answers
 * nothing at all; a sample finds that at the cost of a few pages per tensor. */
static splash_status check_values(const sp_tensor *t) {
    int64_t numel = sp_tensor_numel(t), bad = -1;
    if (numel == 0) return SPLASH_OK;
    if (!t->layout) {
        size_t size = sp_dtype_size(t->dtype);
        if (numel <= SAMPLE_RUNS * SAMPLE_RUN) bad = first_nonfinite(t->dtype, t->data, numel);
        for (int64_t r = 0; numel > SAMPLE_RUNS * SAMPLE_RUN && r < SAMPLE_RUNS && bad < 0; r++) {
            int64_t at = r * (numel - SAMPLE_RUN) / (SAMPLE_RUNS - 1);
            int64_t i = first_nonfinite(t->dtype, (const uint8_t *)t->data + (size_t)at * size, SAMPLE_RUN);
            if (i >= 0) bad = at + i;
        }
    } else {
        sp_matrix m;
        void *owned;
        splash_status st = sp_matrix_from_tensor(NULL, t, SP_QUANT_NONE, &m, &owned);
        if (st) return st;
        float *row = malloc((size_t)m.cols * sizeof *row);
        if (!row) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
        int64_t n = m.rows < SAMPLE_ROWS ? m.rows : SAMPLE_ROWS;
        for (int64_t k = 0; k < n && bad < 0; k++) {
            int64_t r = n > 1 ? k * (m.rows - 1) / (n - 1) : 0;
            sp_matrix_row_f32(&m, r, row);
            for (int64_t c = 0; c < m.cols && bad < 0; c++)
                if (!isfinite(row[c])) bad = r * m.cols + c;
        }
        free(row);
    }
    if (bad < 0) return SPLASH_OK;
    return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s in %s: element %lld is not a finite number (NaN or infinity): the weights are damaged or were saved after training diverged",
                   t->name, t->file, (long long)bad);
}

/* One name of our own (model.splash, model.safetensors) as the checkpoint's file list. */
static char **one_name(const char *name) {
    char **names = malloc(sizeof *names);
    if (names && !(names[0] = strdup(name))) {
        free(names);
        return NULL;
    }
    return names;
}

static splash_status open_checkpoint(const char *dir, bool values, sp_checkpoint **out) {
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
    if (!(ck->real_dir = realpath(dir, NULL))) st = SP_FAIL(SPLASH_ERR_IO, "%s: %s", dir, strerror(errno));
    if (!st && exists(dir, "config.json")) st = parse_json_file(ck, "config.json", &ck->config);
    if (st == SPLASH_OK) {
        if (exists(dir, SP_PACKED_FILE)) { /* `splash import` output: one packed file, its rows in kernel layout */
            char *path = NULL;
            ck->files = calloc(1, sizeof *ck->files);
            if (!ck->files || !(ck->names = one_name(SP_PACKED_FILE))) st = SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            else ck->n_names = 1;
            if (!st) st = checkpoint_path(ck, SP_PACKED_FILE, NULL, &path);
            if (!st && (st = sp_packed_open(path, &ck->files[0])) == SPLASH_OK) ck->n_files = 1;
            free(path);
            if (st == SPLASH_OK) st = index_tensors(ck);
        } else if (exists(dir, index_name)) {
            st = open_indexed(ck);
        } else if (exists(dir, "model.safetensors")) {
            char **names = one_name("model.safetensors");
            st = names ? open_files(ck, names, NULL, 1) : SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
            if (st == SPLASH_OK) st = index_tensors(ck);
        } else {
            st = open_bare(ck);
        }
    }
    for (size_t i = 0; values && i < ck->n_tensors && !st; i++) st = check_values(ck->tensors[i]);
    if (st != SPLASH_OK) {
        sp_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return SPLASH_OK;
}

splash_status sp_checkpoint_open(const char *dir, sp_checkpoint **out) { return open_checkpoint(dir, true, out); }
splash_status sp_checkpoint_open_headers(const char *dir, sp_checkpoint **out) { return open_checkpoint(dir, false, out); }

void sp_checkpoint_close(sp_checkpoint *ck) {
    if (!ck) return;
    if (ck->declared) {
        struct declared *d = ck->declared;
        for (size_t i = 0; i < d->n; i++) free((char *)d->tensors[i]->name), free(d->tensors[i]);
        for (size_t i = 0; i < d->n_zeros; i++) munmap(d->zeros[i], d->zero_bytes[i]);
        free(d->tensors), free(d->uses);
        free(d);
    }
    for (size_t i = 0; i < ck->n_files; i++) sp_safetensors_close(&ck->files[i]);
    free(ck->files);
    free_names(ck->names, ck->n_names);
    free(ck->tensors);
    free(ck->slots);
    sp_json_free(&ck->config);
    free(ck->real_dir);
    free(ck->dir);
    free(ck);
}

size_t sp_checkpoint_file_count(const sp_checkpoint *ck) { return ck->n_files; }
const char *sp_checkpoint_file_name(const sp_checkpoint *ck, size_t i) { return i < ck->n_files ? ck->names[i] : NULL; }
uint64_t sp_checkpoint_file_bytes(const sp_checkpoint *ck, size_t i) { return i < ck->n_files ? ck->files[i].size : 0; }

const char *sp_checkpoint_dir(const sp_checkpoint *ck) { return ck->dir; }
const sp_json *sp_checkpoint_config(const sp_checkpoint *ck) { return sp_json_root(&ck->config); }
void sp_checkpoint_note_use(const sp_checkpoint *ck, const sp_tensor *t, int32_t use) {
    struct declared *d = ck->declared;
    for (size_t i = d ? d->n : 0; i-- > 0;) /* the one just required, as a rule */
        if (d->tensors[i] == t) {
            d->uses[i] = use;
            return;
        }
}

int32_t sp_checkpoint_use(const sp_checkpoint *ck, size_t i) {
    return ck->declared && i < ck->declared->n ? ck->declared->uses[i] : -1;
}

size_t sp_checkpoint_count(const sp_checkpoint *ck) { return ck->declared ? ck->declared->n : ck->n_tensors; }
const sp_tensor *sp_checkpoint_tensor(const sp_checkpoint *ck, size_t i) {
    if (ck->declared) return i < ck->declared->n ? ck->declared->tensors[i] : NULL;
    return i < ck->n_tensors ? ck->tensors[i] : NULL;
}

/* Whether a declared checkpoint's layout has `name`: an entry of `present` names it, or ends it ("*suffix"). */
static bool present(const struct declared *d, const char *name) {
    size_t n = strlen(name);
    for (const char *const *p = d->present; p && *p; p++) {
        size_t k = strlen(*p + 1);
        if ((**p == '*' && n >= k && !strcmp(name + n - k, *p + 1)) || !strcmp(name, *p)) return true;
    }
    return false;
}

const sp_tensor *sp_checkpoint_find(const sp_checkpoint *ck, const char *name) {
    if (ck->declared) {
        for (size_t i = 0; i < ck->declared->n; i++)
            if (!strcmp(ck->declared->tensors[i]->name, name)) return ck->declared->tensors[i];
        return present(ck->declared, name) ? &ck->declared->presence : NULL;
    }
    return ck->n_slots ? ck->slots[find_slot(ck, name)] : NULL;
}

splash_status sp_checkpoint_declare(const char *label, const char *config_json, const char *const *present_names,
                                    sp_checkpoint **out) {
    *out = NULL;
    sp_checkpoint *ck = calloc(1, sizeof *ck);
    struct declared *d = calloc(1, sizeof *d);
    if (!ck || !d || !(ck->dir = strdup(label))) {
        free(ck), free(d);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    ck->declared = d;
    d->present = present_names;
    d->presence = (sp_tensor){.name = "(present in the layout)", .dtype = SP_DTYPE_BF16, .ndim = -1, .file = ck->dir};
    if (sp_json_parse(&ck->config, config_json, strlen(config_json)) != SPLASH_OK) {
        splash_status st = SP_FAIL(SPLASH_ERR_FORMAT, "%s: invalid JSON at %s", label, ck->config.error);
        sp_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return SPLASH_OK;
}

/* Adds `name` of shape[ndim] in BF16 to a declared checkpoint, its data zeros. */
static splash_status declare(const sp_checkpoint *ck, const char *name, int32_t ndim, const int64_t *shape, const sp_tensor **out) {
    struct declared *d = ck->declared;
    char buf[160];
    bool known = ndim >= 0 && ndim <= SP_MAX_DIMS;
    for (int32_t i = 0; known && i < ndim; i++) known = shape[i] >= 0;
    if (!known)
        return SP_FAIL(SPLASH_ERR_INTERNAL, "tensor %s: a load asked for shape %s, which a declared checkpoint cannot make", name,
                       ndim < 0 ? "(any)" : sp_shape_string(buf, sizeof buf, ndim > SP_MAX_DIMS ? SP_MAX_DIMS : ndim, shape));
    sp_tensor *t = calloc(1, sizeof *t);
    if (d->n == d->cap) {
        sp_tensor **tensors = realloc(d->tensors, (2 * d->cap + 64) * sizeof *tensors);
        if (tensors) d->tensors = tensors;
        int32_t *uses = realloc(d->uses, (2 * d->cap + 64) * sizeof *uses);
        if (uses) d->uses = uses;
        if (tensors && uses) d->cap = 2 * d->cap + 64;
    }
    if (!t || !(t->name = strdup(name)) || d->n == d->cap) {
        if (t) free((char *)t->name);
        free(t);
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory declaring tensor %s", name);
    }
    t->dtype = SP_DTYPE_BF16, t->ndim = ndim, t->file = ck->dir;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    t->nbytes = 2 * (uint64_t)sp_tensor_numel(t);
    d->uses[d->n] = -1;
    d->tensors[d->n++] = t;
    /* the data reads as zeros (a vector's value at load, never a result), from a read-only mapping nothing backs */
    uint64_t have = d->n_zeros ? d->zero_bytes[d->n_zeros - 1] : 0;
    if (t->nbytes > have) {
        uint64_t want = have ? 2 * have : 1 << 20;
        while (want < t->nbytes) want *= 2;
        void *z = d->n_zeros < 64 ? mmap(NULL, want, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
        if (z == MAP_FAILED) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "no address space for tensor %s (%llu bytes)", name,
                                            (unsigned long long)t->nbytes);
        d->zeros[d->n_zeros] = z, d->zero_bytes[d->n_zeros++] = want;
    }
    t->data = d->zeros[d->n_zeros - 1];
    *out = t;
    return SPLASH_OK;
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
    if (ck->declared && (!t || t == &ck->declared->presence)) return declare(ck, name, ndim, shape, out);
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
