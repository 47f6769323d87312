/* safetensors_test — checkpoint directories made by hand, good and bad: single file, sharded with an index, a bare
 * drafter directory, files behind symlinks, weights that are not finite; every refusal must carry the right status
 * and name the tensor and the file.
 * Run: build/debug/tests/safetensors_test */
#include "check.h"
#include "core/checkpoint.h"
#include "core/packed.h"
#include "core/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[200];

static void write_raw(const char *dir, const char *name, const void *data, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        perror(path);
        exit(2);
    }
    fclose(f);
}

/* A safetensors file with this header text (padded with spaces to `pad` bytes when larger) and data bytes. */
static void write_st(const char *dir, const char *name, const char *header, size_t pad, const void *data, size_t n) {
    size_t h = strlen(header), len = h > pad ? h : pad;
    uint8_t *buf = calloc(8 + len + n + 1, 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)len >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, ' ', len - h);
    if (n) memcpy(buf + 8 + len, data, n);
    write_raw(dir, name, buf, 8 + len + n);
    free(buf);
}

static char *make_dir(const char *name) {
    static char path[400];
    snprintf(path, sizeof path, "%s/%s", root, name);
    mkdir(path, 0755);
    return path;
}

/* Opens `dir`, expecting `status` and every one of the NULL-terminated substrings in the message. */
static void expect_open(const char *what, const char *dir, splash_status status, const char *const *want) {
    sp_checkpoint *ck = NULL;
    splash_status st = sp_checkpoint_open(dir, &ck);
    const char *msg = splash_last_error();
    bool ok = st == status && (status == SPLASH_OK) == (ck != NULL);
    for (int i = 0; ok && want && want[i]; i++) ok = strstr(msg, want[i]) != NULL;
    CHECK(ok, "%-44s -> status %d%s%s", what, st, st ? ": " : "", st ? msg : "");
    sp_checkpoint_close(ck);
}
#define WANT(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Opens a checkpoint that must open; prints the refusal if it does not. */
static bool open_ok(const char *dir, sp_checkpoint **ck) {
    if (sp_checkpoint_open(dir, ck) == SPLASH_OK) return true;
    printf("        %s\n", splash_last_error());
    return false;
}

static float f32_data[6] = {1, 2, 3, 4, 5, 6};

static void single_file(void) {
    char *dir = make_dir("single");
    const char *config = "{\"text_config\": {\"hidden_size\": 64, \"rms_norm_eps\": 1e-6}}";
    write_raw(dir, "config.json", config, strlen(config));
    /* data: a [2,3] F32 at 0..24, b [4] BF16 at 24..32, c scalar I64 at 32..40, e [0] U8 empty, f [3] F8_E4M3 */
    uint8_t data[43] = {0};
    memcpy(data, f32_data, 24);
    uint16_t bf[4] = {0x3f80, 0x4000, 0x4040, 0x4080}; /* 1 2 3 4 */
    memcpy(data + 24, bf, 8);
    int64_t c = -7;
    memcpy(data + 32, &c, 8);
    data[40] = 0x38, data[41] = 0x40, data[42] = 0x48;
    write_st(dir, "model.safetensors",
             "{\"__metadata__\": {\"format\": \"pt\"},"
             " \"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24]},"
             " \"b\": {\"dtype\": \"BF16\", \"shape\": [4], \"data_offsets\": [24, 32]},"
             " \"c\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [32, 40]},"
             " \"e\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [40, 40]},"
             " \"f\": {\"dtype\": \"F8_E4M3\", \"shape\": [3], \"data_offsets\": [40, 43], \"extra\": 1}}",
             384, data, sizeof data);
    sp_checkpoint *ck;
    CHECK(open_ok(dir, &ck), "opens a single-file checkpoint");
    if (!ck) return;
    CHECK(sp_checkpoint_count(ck) == 5, "5 tensors (%zu)", sp_checkpoint_count(ck));
    const sp_tensor *a = sp_checkpoint_find(ck, "a"), *b = sp_checkpoint_find(ck, "b"), *ct = sp_checkpoint_find(ck, "c");
    CHECK(a && a->dtype == SP_DTYPE_F32 && a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->nbytes == 24 &&
              memcmp(a->data, f32_data, 24) == 0 && (uintptr_t)a->data % 4 == 0,
          "a: F32 [2, 3], 24 bytes, values 1..6, aligned");
    CHECK(b && b->dtype == SP_DTYPE_BF16 && ((const uint16_t *)b->data)[3] == 0x4080, "b: BF16 [4] with its values");
    CHECK(ct && ct->ndim == 0 && sp_tensor_numel(ct) == 1 && *(const int64_t *)ct->data == -7, "c: a scalar I64 = -7");
    CHECK(sp_checkpoint_find(ck, "e") && sp_checkpoint_find(ck, "e")->nbytes == 0, "e: an empty tensor");
    CHECK(sp_checkpoint_find(ck, "f") && sp_checkpoint_find(ck, "f")->dtype == SP_DTYPE_F8_E4M3, "f: F8_E4M3");
    CHECK(sp_checkpoint_find(ck, "zz") == NULL && sp_checkpoint_find(ck, "__metadata__") == NULL,
          "unknown names and __metadata__ are not tensors");
    CHECK(a && strstr(a->file, "single/model.safetensors"), "a->file is the path (%s)", a ? a->file : "");
    size_t seen = 0;
    for (size_t i = 0; i < sp_checkpoint_count(ck); i++) seen += sp_checkpoint_find(ck, sp_checkpoint_tensor(ck, i)->name) != NULL;
    CHECK(seen == 5 && sp_checkpoint_tensor(ck, 5) == NULL, "iteration visits each tensor once");
    int64_t hidden = 0;
    double eps = 0;
    const sp_json *tc = sp_json_get(sp_checkpoint_config(ck), "text_config");
    CHECK(sp_json_int(sp_json_get(tc, "hidden_size"), &hidden) && hidden == 64 &&
              sp_json_double(sp_json_get(tc, "rms_norm_eps"), &eps) && eps == 1e-6,
          "config.json: text_config.hidden_size 64, rms_norm_eps 1e-6");

    const sp_tensor *t;
    CHECK(sp_checkpoint_require(ck, "a", SP_DTYPES_FLOAT, 2, (int64_t[]){2, 3}, &t) == SPLASH_OK && t == a,
          "require a as float [2, 3]");
    CHECK(sp_checkpoint_require(ck, "a", SP_DTYPE_BIT(SP_DTYPE_F32), 2, (int64_t[]){-1, 3}, &t) == SPLASH_OK,
          "require a as F32 [-1, 3] (wildcard)");
    CHECK(sp_checkpoint_require(ck, "a", SP_DTYPES_ANY, -1, NULL, &t) == SPLASH_OK, "require a with any dtype and rank");
    CHECK(sp_checkpoint_require(ck, "a", SP_DTYPES_FLOAT, 2, (int64_t[]){2, 4}, &t) == SPLASH_ERR_FORMAT && !t &&
              strstr(splash_last_error(), "tensor a in ") && strstr(splash_last_error(), "single/model.safetensors: expected shape [2, 4] got [2, 3]"),
          "wrong shape: %s", splash_last_error());
    CHECK(sp_checkpoint_require(ck, "a", SP_DTYPES_FLOAT, 1, (int64_t[]){6}, &t) == SPLASH_ERR_FORMAT &&
              strstr(splash_last_error(), "expected shape [6] got [2, 3]"),
          "wrong rank: %s", splash_last_error());
    CHECK(sp_checkpoint_require(ck, "c", SP_DTYPES_FLOAT, 0, NULL, &t) == SPLASH_ERR_FORMAT &&
              strstr(splash_last_error(), "tensor c in ") && strstr(splash_last_error(), "expected dtype F32 or F16 or BF16 got I64"),
          "wrong dtype: %s", splash_last_error());
    CHECK(sp_checkpoint_require(ck, "model.norm.weight", SP_DTYPES_ANY, 1, (int64_t[]){64}, &t) == SPLASH_ERR_FORMAT &&
              strstr(splash_last_error(), "tensor model.norm.weight: not found in ") && strstr(splash_last_error(), "single"),
          "missing: %s", splash_last_error());
    sp_checkpoint_close(ck);
}

/* A header whose length is not a multiple of 4 leaves F32 data misaligned in the map; the loader copies it. */
static void misaligned(void) {
    char *dir = make_dir("misaligned");
    write_st(dir, "model.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[6],\"data_offsets\":[0,24]}}", 0, f32_data, 24);
    sp_checkpoint *ck;
    CHECK(open_ok(dir, &ck), "opens a file with misaligned data");
    if (!ck) return;
    const sp_tensor *a = sp_checkpoint_find(ck, "a");
    CHECK(a && (uintptr_t)a->data % 4 == 0 && memcmp(a->data, f32_data, 24) == 0, "the F32 tensor is aligned and intact");
    CHECK(sp_checkpoint_config(ck) == NULL, "no config.json: config is NULL");
    sp_checkpoint_close(ck);
}

static void sharded(void) {
    char *dir = make_dir("sharded");
    const char *h1 = "{\"x.w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
                     " \"x.v\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}";
    const char *h2 = "{\"y.w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 12]}}";
    write_st(dir, "model-00001-of-00002.safetensors", h1, 128, f32_data, 12);
    write_st(dir, "model-00002-of-00002.safetensors", h2, 128, f32_data + 3, 12);
    const char *index = "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\","
                        " \"x.v\": \"model-00001-of-00002.safetensors\", \"y.w\": \"model-00002-of-00002.safetensors\"}}";
    write_raw(dir, "model.safetensors.index.json", index, strlen(index));
    write_raw(dir, "config.json", "{}", 2);
    sp_checkpoint *ck;
    CHECK(open_ok(dir, &ck), "opens a sharded checkpoint");
    if (!ck) return;
    const sp_tensor *y = sp_checkpoint_find(ck, "y.w");
    CHECK(sp_checkpoint_count(ck) == 3 && y && ((const float *)y->data)[2] == 6 && strstr(y->file, "model-00002-of-00002"),
          "3 tensors; y.w from shard 2 holds 4 5 6");
    sp_checkpoint_close(ck);

    /* Each broken variant is a fresh copy of the good one with one thing changed. */
    struct {
        const char *what, *index;
        splash_status st;
        const char *w1, *w2;
    } bad[] = {
        {"index: tensor listed in the wrong shard",
         "{\"weight_map\": {\"x.w\": \"model-00002-of-00002.safetensors\", \"x.v\": \"model-00001-of-00002.safetensors\","
         " \"y.w\": \"model-00002-of-00002.safetensors\"}}",
         SPLASH_ERR_FORMAT, "tensor x.w: ", "but it is in"},
        {"index: a shard tensor is not listed",
         "{\"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\", \"y.w\": \"model-00002-of-00002.safetensors\"}}",
         SPLASH_ERR_FORMAT, "tensor x.v in ", "is not listed in"},
        {"index: lists a tensor no shard has",
         "{\"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\", \"x.v\": \"model-00001-of-00002.safetensors\","
         " \"z\": \"model-00002-of-00002.safetensors\", \"y.w\": \"model-00002-of-00002.safetensors\"}}",
         SPLASH_ERR_FORMAT, "tensor z: ", "does not contain it"},
        {"index: names a missing shard",
         "{\"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\", \"x.v\": \"model-00001-of-00002.safetensors\","
         " \"y.w\": \"model-00003-of-00003.safetensors\"}}",
         SPLASH_ERR_IO, "model-00003-of-00003.safetensors is missing", "the weight_map entry for tensor y.w names it"},
        {"index: a path outside the directory",
         "{\"weight_map\": {\"x.w\": \"../model-00001-of-00002.safetensors\"}}", SPLASH_ERR_FORMAT, "tensor x.w",
         "not a plain file name"},
        {"index: a path to /etc/passwd",
         "{\"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\", \"x.v\": \"../../../etc/passwd\"}}",
         SPLASH_ERR_FORMAT, "weight_map entry for tensor x.v names \"../../../etc/passwd\"", "not a plain file name"},
        {"index: an absolute path", "{\"weight_map\": {\"x.w\": \"/etc/passwd\"}}", SPLASH_ERR_FORMAT, "tensor x.w",
         "\"/etc/passwd\", not a plain file name"},
        {"index: lists a tensor twice",
         "{\"weight_map\": {\"x.w\": \"model-00001-of-00002.safetensors\", \"x.w\": \"model-00001-of-00002.safetensors\","
         " \"y.w\": \"model-00002-of-00002.safetensors\"}}",
         SPLASH_ERR_FORMAT, "tensor x.w: listed twice", "index.json"},
        {"index: no weight_map", "{\"metadata\": {}}", SPLASH_ERR_FORMAT, "model.safetensors.index.json", "weight_map"},
        {"index: invalid JSON", "{\"weight_map\": {", SPLASH_ERR_FORMAT, "model.safetensors.index.json", "invalid JSON at byte 16"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "sharded-bad%zu", i);
        char *d = make_dir(name);
        write_st(d, "model-00001-of-00002.safetensors", h1, 128, f32_data, 12);
        write_st(d, "model-00002-of-00002.safetensors", h2, 128, f32_data + 3, 12);
        write_raw(d, "model.safetensors.index.json", bad[i].index, strlen(bad[i].index));
        expect_open(bad[i].what, d, bad[i].st, WANT(bad[i].w1, bad[i].w2));
    }
}

static void bare(void) {
    char *dir = make_dir("drafter");
    write_st(dir, "b.safetensors", "{\"fc.weight\": {\"dtype\": \"BF16\", \"shape\": [2, 2], \"data_offsets\": [0, 8]}}", 0,
             f32_data, 8);
    write_st(dir, "a.safetensors", "{\"norm.weight\": {\"dtype\": \"BF16\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 0,
             f32_data, 4);
    write_raw(dir, "notes.txt", "x", 1);
    sp_checkpoint *ck;
    CHECK(open_ok(dir, &ck), "opens a bare directory of safetensors");
    if (!ck) return;
    CHECK(sp_checkpoint_count(ck) == 2 && strcmp(sp_checkpoint_tensor(ck, 0)->name, "norm.weight") == 0 &&
              sp_checkpoint_config(ck) == NULL,
          "2 tensors, files in name order, no config");
    sp_checkpoint_close(ck);

    dir = make_dir("dup-across");
    write_st(dir, "a.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 0, f32_data, 4);
    write_st(dir, "b.safetensors", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 0, f32_data, 4);
    expect_open("the same name in two files", dir, SPLASH_ERR_FORMAT, WANT("tensor w is in both", "a.safetensors", "b.safetensors"));
    expect_open("an empty directory", make_dir("empty"), SPLASH_ERR_IO, WANT("empty", "no model.safetensors"));
    char missing[512];
    snprintf(missing, sizeof missing, "%s/nope", root);
    expect_open("a missing directory", missing, SPLASH_ERR_IO, WANT("nope"));
    dir = make_dir("badconfig");
    write_raw(dir, "config.json", "{\"a\": 1,}", 9);
    write_st(dir, "model.safetensors", "{}", 0, NULL, 0);
    expect_open("invalid config.json", dir, SPLASH_ERR_FORMAT, WANT("badconfig/config.json: invalid JSON at byte 8"));
}

static void link_to(const char *target, const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (symlink(target, path) != 0) {
        perror(path);
        exit(2);
    }
}

/* Links are followed, and their targets must stay in the directory (or be hub cache blobs). */
static void symlinks(void) {
    const char *h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    char outside[500];
    snprintf(outside, sizeof outside, "%s", make_dir("outside")); /* make_dir's buffer is reused */
    write_st(outside, "secret.safetensors", h, 0, f32_data, 8);
    char secret[600];
    snprintf(secret, sizeof secret, "%s/secret.safetensors", outside);

    char *dir = make_dir("link-inside");
    write_st(dir, "real.safetensors", h, 0, f32_data, 8);
    link_to("real.safetensors", dir, "model.safetensors");
    expect_open("a link to a file in the directory", dir, SPLASH_OK, NULL);

    dir = make_dir("link-out-index");
    link_to(secret, dir, "model-00001-of-00001.safetensors");
    const char *index = "{\"weight_map\": {\"w\": \"model-00001-of-00001.safetensors\"}}";
    write_raw(dir, "model.safetensors.index.json", index, strlen(index));
    expect_open("index: a shard linked outside the directory", dir, SPLASH_ERR_FORMAT,
                WANT("link-out-index/model-00001-of-00001.safetensors is a link to ", "outside/secret.safetensors, outside the checkpoint directory",
                     "weight_map entry for tensor w"));

    dir = make_dir("link-out-single");
    link_to(secret, dir, "model.safetensors");
    expect_open("model.safetensors linked outside", dir, SPLASH_ERR_FORMAT, WANT("link-out-single/model.safetensors is a link to", "outside the checkpoint directory"));

    dir = make_dir("link-out-bare");
    link_to(secret, dir, "drafter.safetensors");
    expect_open("a bare directory's file linked outside", dir, SPLASH_ERR_FORMAT, WANT("drafter.safetensors is a link to", "outside"));

    dir = make_dir("link-out-config");
    write_st(dir, "model.safetensors", h, 0, f32_data, 8);
    write_raw(outside, "config.json", "{}", 2);
    char config[600];
    snprintf(config, sizeof config, "%s/config.json", outside);
    link_to(config, dir, "config.json");
    expect_open("config.json linked outside", dir, SPLASH_ERR_FORMAT, WANT("link-out-config/config.json is a link to", "outside"));

    dir = make_dir("link-dangling");
    link_to("nowhere.safetensors", dir, "model.safetensors");
    expect_open("a dangling link", dir, SPLASH_ERR_IO, WANT("link-dangling/model.safetensors: cannot open"));

    /* the hub cache: snapshots/<commit>/ links into ../../blobs/<sha256>, and a --local-dir checkout links there too */
    make_dir("models--org--name");
    char blobs[500];
    snprintf(blobs, sizeof blobs, "%s", make_dir("models--org--name/blobs"));
    const char *sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    write_st(blobs, sha, h, 0, f32_data, 8);
    make_dir("models--org--name/snapshots");
    dir = make_dir("models--org--name/snapshots/c0ffee");
    char target[600];
    snprintf(target, sizeof target, "../../blobs/%s", sha);
    link_to(target, dir, "model.safetensors");
    expect_open("a hub snapshot's link into blobs/", dir, SPLASH_OK, NULL);
    dir = make_dir("local-dir");
    snprintf(target, sizeof target, "%s/models--org--name/blobs/%s", root, sha);
    link_to(target, dir, "model.safetensors");
    expect_open("a local directory linking into a hub cache's blobs/", dir, SPLASH_OK, NULL);
    dir = make_dir("not-a-blob");
    write_st(blobs, "notes.safetensors", h, 0, f32_data, 8);
    snprintf(target, sizeof target, "%s/models--org--name/blobs/notes.safetensors", root);
    link_to(target, dir, "model.safetensors");
    expect_open("a link into blobs/ to a name that is not a hash", dir, SPLASH_ERR_FORMAT, WANT("outside the checkpoint directory"));
}

/* A checkpoint whose one tensor `w` has `n` elements of `dtype` (elem bytes each) from `data`. */
static char *one_tensor(const char *name, const char *dtype, int64_t n, size_t elem, const void *data) {
    char *dir = make_dir(name), header[200];
    snprintf(header, sizeof header, "{\"w\": {\"dtype\": \"%s\", \"shape\": [%lld], \"data_offsets\": [0, %lld]}}", dtype,
             (long long)n, (long long)(n * (int64_t)elem));
    write_st(dir, "model.safetensors", header, 128, data, (size_t)n * elem);
    return dir;
}

/* Non-finite values: refused naming the tensor in every stored float dtype; sampled, so the header-only open and
 * integer dtypes never look. */
static void nonfinite(void) {
    float f[3] = {1, NAN, 2};
    expect_open("F32 with a NaN", one_tensor("nan-f32", "F32", 3, 4, f), SPLASH_ERR_FORMAT,
                WANT("tensor w in ", "nan-f32/model.safetensors: element 1 is not a finite number"));
    f[1] = -INFINITY;
    expect_open("F32 with -inf", one_tensor("inf-f32", "F32", 3, 4, f), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 1"));
    uint16_t bf[2] = {0x3f80, 0x7f80}; /* 1, +inf */
    expect_open("BF16 with +inf", one_tensor("inf-bf16", "BF16", 2, 2, bf), SPLASH_ERR_FORMAT, WANT("tensor w in ", "inf-bf16", "element 1"));
    uint16_t h[2] = {0xfe00, 0x3c00}; /* NaN, 1 */
    expect_open("F16 with a NaN", one_tensor("nan-f16", "F16", 2, 2, h), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 0"));
    double d[2] = {1, INFINITY};
    expect_open("F64 with inf", one_tensor("inf-f64", "F64", 2, 8, d), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 1"));
    uint8_t e4[2] = {0x38, 0xff}, e5[2] = {0x7c, 0x38}, e8[2] = {0x7f, 0xff};
    expect_open("F8_E4M3 with a NaN", one_tensor("nan-e4m3", "F8_E4M3", 2, 1, e4), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 1"));
    expect_open("F8_E5M2 with inf", one_tensor("inf-e5m2", "F8_E5M2", 2, 1, e5), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 0"));
    expect_open("F8_E8M0 with a NaN", one_tensor("nan-e8m0", "F8_E8M0", 2, 1, e8), SPLASH_ERR_FORMAT, WANT("tensor w in ", "element 1"));
    uint8_t u[2] = {0xff, 0xff};
    expect_open("U8 0xff is a number", one_tensor("u8", "U8", 2, 1, u), SPLASH_OK, NULL);

    /* a large tensor, all NaN from the middle on (a run that diverged partway through a write): a sampled run finds it */
    enum { N = 1 << 20 };
    uint16_t *big = malloc(N * sizeof *big);
    for (int i = 0; i < N; i++) big[i] = i < N / 2 ? 0x3f80 : 0x7fc0;
    char *dir = one_tensor("nan-big", "BF16", N, 2, big);
    expect_open("a 1M-element BF16 tensor, NaN from the middle", dir, SPLASH_ERR_FORMAT, WANT("tensor w in ", "nan-big"));
    sp_checkpoint *ck = NULL;
    CHECK(sp_checkpoint_open_headers(dir, &ck) == SPLASH_OK && ck, "the header-only open reads no values");
    sp_checkpoint_close(ck);
    free(big);

    /* a packed file whose first Q8 row scale is NaN: the rows are read as floats, scales included */
    const char *hw = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 64], \"data_offsets\": [0, 512]}}";
    float rows[128];
    for (int i = 0; i < 128; i++) rows[i] = (float)(i % 7) - 3;
    char src[500];
    snprintf(src, sizeof src, "%s", make_dir("pack-src"));
    write_st(src, "model.safetensors", hw, 0, rows, sizeof rows);
    dir = make_dir("pack-nan");
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, SP_PACKED_FILE);
    splash_status st = sp_packed_write(NULL, src, path, "{\"w\": {\"type\": \"q8\", \"kind\": \"mlp\"}}", "{}");
    CHECK(st == SPLASH_OK, "packs a q8 checkpoint: %s", st ? splash_last_error() : "ok");
    expect_open("the packed checkpoint as written", dir, SPLASH_OK, NULL);
    char nan_dir[500], nan_path[600];
    snprintf(nan_dir, sizeof nan_dir, "%s/nan-f32", root);
    snprintf(nan_path, sizeof nan_path, "%s/" SP_PACKED_FILE, nan_dir);
    st = sp_packed_write(NULL, nan_dir, nan_path, "{}", "{}");
    CHECK(st == SPLASH_ERR_FORMAT && strstr(splash_last_error(), "tensor w in ") && access(nan_path, F_OK) != 0,
          "import refuses a source with a NaN, writing nothing: %s", splash_last_error());
    sp_safetensors packed;
    if (sp_packed_open(path, &packed) == SPLASH_OK) {
        /* row 0: 64 int8, then f16 d[2] */
        uint64_t scale = (uint64_t)((const uint8_t *)packed.tensors[0].data - packed.buf) + 64;
        sp_safetensors_close(&packed);
        FILE *fp = fopen(path, "r+b");
        uint16_t nan = 0x7e00;
        CHECK(fp && fseek(fp, (long)scale, SEEK_SET) == 0 && fwrite(&nan, 2, 1, fp) == 1, "pokes a NaN into row 0's scale");
        if (fp) fclose(fp);
        expect_open("a packed Q8 row with a NaN scale", dir, SPLASH_ERR_FORMAT, WANT("tensor w in ", "pack-nan/model.splash: element 0"));
    }
}

/* One model.safetensors per case; `header` NULL means write `raw` bytes as the whole file. */
static void bad_files(void) {
    static const uint8_t zeros[64];
    struct {
        const char *what, *header;
        size_t data;
        splash_status st;
        const char *w1, *w2;
    } cases[] = {
        {"unknown dtype", "{\"w\": {\"dtype\": \"F4\", \"shape\": [2], \"data_offsets\": [0, 1]}}", 1, SPLASH_ERR_UNSUPPORTED,
         "tensor w in ", "dtype \"F4\" is not supported"},
        {"shape x dtype != byte range", "{\"w\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 20,
         SPLASH_ERR_FORMAT, "tensor w in ", "shape [2, 3] of F32 needs 24 bytes but data_offsets [0, 20] hold 20"},
        {"data past the end (truncated)", "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}", 12,
         SPLASH_ERR_FORMAT, "tensor w in ", "run past the end of the data (12 bytes)"},
        {"overlapping ranges",
         "{\"u\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, \"v\": {\"dtype\": \"F32\", \"shape\": [2], "
         "\"data_offsets\": [4, 12]}}",
         12, SPLASH_ERR_FORMAT, "tensors u and v in ", "overlap"},
        {"a range inside another",
         "{\"u\": {\"dtype\": \"U8\", \"shape\": [16], \"data_offsets\": [0, 16]}, \"v\": {\"dtype\": \"U8\", \"shape\": [2], "
         "\"data_offsets\": [4, 6]}, \"x\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [8, 10]}}",
         16, SPLASH_ERR_FORMAT, "tensors u and v in ", "overlap"},
        {"9 dimensions", "{\"w\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1,
         SPLASH_ERR_UNSUPPORTED, "tensor w in ", "9 dimensions"},
        {"negative dim", "{\"w\": {\"dtype\": \"U8\", \"shape\": [-1], \"data_offsets\": [0, 1]}}", 1, SPLASH_ERR_FORMAT,
         "tensor w in ", "shape[0] is not a non-negative integer"},
        {"fractional dim", "{\"w\": {\"dtype\": \"U8\", \"shape\": [1.5], \"data_offsets\": [0, 1]}}", 1, SPLASH_ERR_FORMAT,
         "tensor w in ", "shape[0]"},
        {"shape overflows 64 bits",
         "{\"w\": {\"dtype\": \"F32\", \"shape\": [4294967296, 4294967296], \"data_offsets\": [0, 0]}}", 0, SPLASH_ERR_FORMAT,
         "tensor w in ", "needs more than"},
        {"end before begin", "{\"w\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [4, 2]}}", 4, SPLASH_ERR_FORMAT,
         "tensor w in ", "begin <= end"},
        {"data_offsets of three", "{\"w\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1, 2]}}", 1,
         SPLASH_ERR_FORMAT, "tensor w in ", "[begin, end]"},
        {"missing dtype", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 1]}}", 1, SPLASH_ERR_FORMAT, "tensor w in ", "dtype"},
        {"entry not an object", "{\"w\": [1, 2]}", 0, SPLASH_ERR_FORMAT, "tensor w in ", "not an object"},
        {"duplicate name in one header",
         "{\"w\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1]}, \"w\": {\"dtype\": \"U8\", \"shape\": [1], "
         "\"data_offsets\": [1, 2]}}",
         2, SPLASH_ERR_FORMAT, "tensor w in ", "appears twice"},
        {"non-string metadata", "{\"__metadata__\": {\"n\": 1}}", 0, SPLASH_ERR_FORMAT, "model.safetensors", "__metadata__"},
        {"header JSON syntax error", "{\"w\": {\"dtype\": \"U8\",, }}", 0, SPLASH_ERR_FORMAT, "model.safetensors: bad header JSON",
         "header byte 21"},
        {"header is an array", "[1, 2]", 0, SPLASH_ERR_FORMAT, "model.safetensors", "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "bad%zu", i);
        char *dir = make_dir(name);
        write_st(dir, "model.safetensors", cases[i].header, 0, zeros, cases[i].data);
        expect_open(cases[i].what, dir, cases[i].st, WANT(cases[i].w1, cases[i].w2, name));
    }

    char *dir = make_dir("short");
    write_raw(dir, "model.safetensors", "\x10\0\0", 3);
    expect_open("a 3-byte file", dir, SPLASH_ERR_FORMAT, WANT("short/model.safetensors", "too short"));
    dir = make_dir("hugeheader");
    write_raw(dir, "model.safetensors", "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
    expect_open("header length 2^63", dir, SPLASH_ERR_FORMAT, WANT("hugeheader/model.safetensors", "exceeds the file size"));
    dir = make_dir("cuthead");
    write_raw(dir, "model.safetensors", "\x40\0\0\0\0\0\0\0{\"w\": {\"dtype\"", 22);
    expect_open("header cut short", dir, SPLASH_ERR_FORMAT, WANT("cuthead/model.safetensors", "header length 64 exceeds"));
}

int main(void) {
    snprintf(root, sizeof root, "%s/splash-st-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    single_file();
    misaligned();
    sharded();
    bare();
    bad_files();
    symlinks();
    nonfinite();
    int rc = check_done("safetensors_test");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) return 2;
    return rc;
}
