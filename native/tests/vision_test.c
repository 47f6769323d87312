/* vision_test.c — the vision tower and multimodal prompts against the vision fixture's transformers goldens
 * (test/fixtures/models/README.md, "Vision fixture"):
 *
 *   build/tests/vision_test [FIXTURE_DIR]      default test/fixtures/models/qwen35-vision-tiny
 *
 * For every prompt: each image's golden pixel_values through splash's tower, compared with the tower output before
 * the merger (vision_blocks) and after it (image_embeds), max |Δ| / max |golden| ≤ 1e-4; then the whole prompt in
 * one step with those embeddings and the golden M-RoPE positions, and again in chunks of 5 (an image split across
 * steps), logits at every position within 1e-3 × std with the same argmax. */
#include "api/model.h"
#include "arch/qwen3_5_vision.h"
#include "check.h"
#include "core/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) buf = (free(buf), NULL);
    fclose(f);
    if (buf) buf[n] = 0, *len = (size_t)n;
    return buf;
}

/* golden/<entry.file> as floats; *n gets the count */
static float *golden(const char *dir, const sp_json *entry, size_t *n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/%s", dir, sp_json_string(sp_json_get(entry, "file")));
    size_t len = 0;
    float *x = (float *)read_file(path, &len);
    *n = len / sizeof(float);
    if (!x) fprintf(stderr, "cannot read %s\n", path);
    return x;
}

static int64_t ival(const sp_json *v) {
    int64_t x = 0;
    sp_json_int(v, &x);
    return x;
}

/* max |a − b| / max |b| over n */
static double rel_err(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* Runs tokens[0, n) in steps of `chunk` with the image rows and positions; returns max |Δlogit| / std and counts
 * argmax mismatches against the golden logits. */
static double run_prompt(splash_model *m, splash_cache *c, const int32_t *tokens, const int32_t *pos3, int32_t n,
                         const float *embeds, int32_t width, int32_t image_token, int32_t chunk, const float *want, int32_t vocab,
                         double std, int32_t *argmax_diff) {
    int32_t pages[64];
    for (int32_t i = 0; i < 64; i++) pages[i] = i;
    float *logits = malloc(sizeof(float) * (size_t)n * (size_t)vocab);
    int64_t used = 0;
    for (int32_t p = 0; p < n; p += chunk) {
        int32_t k = n - p < chunk ? n - p : chunk, pads = 0;
        for (int32_t j = 0; j < k; j++) pads += tokens[p + j] == image_token;
        splash_seq q = {.slot = 0, .n_past = p, .n_tokens = k, .n_logits = k, .tokens = tokens + p, .pages = pages,
                        .n_pages = 64, .logits = logits + (int64_t)p * vocab, .embeds = pads ? embeds + used * width : NULL,
                        .n_embeds = pads, .positions = pos3 + 3 * p};
        used += pads;
        if (splash_step(m, c, &q, 1)) {
            printf("step failed: %s\n", splash_last_error());
            free(logits);
            return INFINITY;
        }
    }
    double worst = 0;
    *argmax_diff = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t a = 0, b = 0;
        for (int32_t v = 0; v < vocab; v++) {
            worst = fmax(worst, fabs((double)logits[(int64_t)i * vocab + v] - want[(int64_t)i * vocab + v]) / std);
            if (logits[(int64_t)i * vocab + v] > logits[(int64_t)i * vocab + a]) a = v;
            if (want[(int64_t)i * vocab + v] > want[(int64_t)i * vocab + b]) b = v;
        }
        *argmax_diff += a != b;
    }
    free(logits);
    return worst;
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "test/fixtures/models/qwen35-vision-tiny";
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/manifest.json", dir);
    size_t len = 0;
    char *text = read_file(path, &len);
    sp_json_doc doc;
    if (!text || sp_json_parse(&doc, text, len)) {
        fprintf(stderr, "cannot read %s\n", path);
        return 2;
    }
    splash_load_options o = {sizeof o, NULL, 2, 64, SPLASH_BACKEND_CPU, 0, NULL};
    splash_model *m = NULL;
    splash_cache *c = NULL;
    if (splash_model_load(dir, &o, &m) || splash_cache_create(m, 16, 64, 1, &c)) {
        fprintf(stderr, "%s\n", splash_last_error());
        return 2;
    }
    splash_vision_info vi = {.struct_size = sizeof vi};
    splash_model_info mi = {.struct_size = sizeof mi};
    CHECK(!splash_vision_get_info(m, &vi) && !splash_model_get_info(m, &mi) && mi.has_vision, "the tower loads (has_vision)");
    const sp_json *prompts = sp_json_get(sp_json_root(&doc), "prompts");
    int64_t PD = (int64_t)vi.in_channels * vi.temporal_patch_size * vi.patch_size * vi.patch_size, D = vi.hidden_size;
    int64_t O = vi.out_hidden_size, U = (int64_t)vi.spatial_merge_size * vi.spatial_merge_size;
    for (size_t pi = 0; pi < prompts->len; pi++) {
        const sp_json *p = sp_json_at(prompts, pi);
        size_t n_pix, n_blk, n_emb, n_log;
        float *pixels = golden(dir, sp_json_get(p, "pixel_values"), &n_pix);
        float *blocks = golden(dir, sp_json_get(p, "vision_blocks_out"), &n_blk);
        float *embeds = golden(dir, sp_json_get(p, "image_embeds"), &n_emb);
        float *want = golden(dir, sp_json_get(p, "logits"), &n_log);
        if (!pixels || !blocks || !embeds || !want) return 2;
        size_t n_patches = n_pix / (size_t)PD;
        float *got_blocks = malloc(sizeof(float) * n_blk), *got_embeds = malloc(sizeof(float) * n_emb);
        const sp_json *images = sp_json_get(p, "images");
        int64_t row = 0, tok = 0;
        for (size_t ii = 0; ii < images->len; ii++) {
            const sp_json *im = sp_json_at(images, ii), *g = sp_json_get(im, "grid_thw");
            int32_t t = (int32_t)ival(sp_json_at(g, 0)), h = (int32_t)ival(sp_json_at(g, 1)), w = (int32_t)ival(sp_json_at(g, 2));
            splash_status st = sp_qwen35_vision_encode(m->vision, pixels + row * PD, t, h, w, got_blocks + row * D,
                                                       got_embeds + tok * O);
            CHECK(!st, "prompt %zu image %zu (%d×%d×%d) encodes", pi, ii, t, h, w);
            row += (int64_t)t * h * w;
            tok += (int64_t)t * h * w / U;
        }
        CHECK((size_t)row == n_patches && (size_t)(row * D) == n_blk && (size_t)(tok * O) == n_emb, "prompt %zu: %lld patches, %lld tokens", pi,
              (long long)row, (long long)tok);
        double eb = rel_err(got_blocks, blocks, n_blk), ee = rel_err(got_embeds, embeds, n_emb);
        CHECK(eb <= 1e-4, "prompt %zu tower before the merger: max |Δ| / max |golden| = %.2e (≤ 1e-4)", pi, eb);
        CHECK(ee <= 1e-4, "prompt %zu tower after the merger: max |Δ| / max |golden| = %.2e (≤ 1e-4)", pi, ee);
        /* the language model with the golden positions and splash's own embeddings */
        const sp_json *ids = sp_json_get(p, "input_ids"), *pos = sp_json_get(p, "position_ids");
        int32_t n = (int32_t)ids->len;
        int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n), *pos3 = malloc(sizeof(int32_t) * 3 * (size_t)n);
        for (int32_t i = 0; i < n; i++) {
            tokens[i] = (int32_t)ival(sp_json_at(ids, (size_t)i));
            for (int32_t k = 0; k < 3; k++) pos3[3 * i + k] = (int32_t)ival(sp_json_at(sp_json_at(pos, (size_t)k), (size_t)i));
        }
        double std = 1;
        sp_json_double(sp_json_get(p, "std_logits"), &std);
        int32_t chunks[] = {n, 5, 1};
        for (int32_t ci = 0; ci < 3; ci++) {
            int32_t diff = 0;
            double e = run_prompt(m, c, tokens, pos3, n, got_embeds, (int32_t)O, vi.image_token_id, chunks[ci], want, mi.vocab_size, std, &diff);
            CHECK(e <= 1e-3 && diff == 0, "prompt %zu logits, chunks of %d: max |Δ| / std = %.2e (≤ 1e-3), argmax differs at %d of %d",
                  pi, chunks[ci], e, diff, n);
        }
        free(tokens), free(pos3), free(pixels), free(blocks), free(embeds), free(want), free(got_blocks), free(got_embeds);
    }
    /* the ABI refuses what does not fit */
    static float one[1 << 16];
    CHECK(splash_vision_encode(m, one, 1, 2, 3, one) == SPLASH_ERR_INVALID_ARGUMENT, "a grid not a multiple of the merge is refused");
    int32_t pages[1] = {0}, toks[2] = {vi.image_token_id, 5};
    splash_seq q = {.slot = 0, .n_tokens = 2, .tokens = toks, .pages = pages, .n_pages = 1, .embeds = one, .n_embeds = 2};
    CHECK(splash_step(m, c, &q, 1) == SPLASH_ERR_INVALID_ARGUMENT, "n_embeds that is not the image-pad count is refused");
    splash_cache_free(c);
    splash_model_free(m);
    sp_json_free(&doc);
    free(text);
    return check_done("vision_test");
}
