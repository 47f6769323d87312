/* tokenizer.c — the tokenizer's ABI (splash.h, tokenizer section): split a text with the pre-tokenizer regex, BPE
 * each piece. Normalization (NFC) and added tokens are handled by the caller (src/tokenizer/), which passes the
 * plain-text segments between added tokens here one at a time, as tokenizers does.
 *
 * Why C: the long prompts agents resend every turn must encode well within a step's time on a small machine; the
 * pure-JS tokenizers were several times slower than that under Bun (bun-stack.md; `splash bench tokenize` measures
 * this path), and the regex alone is a large share of it. This path does the split and the merges without allocating
 * per piece. */
#include "splash.h"

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/regex.h"

#include <stdlib.h>

struct splash_tokenizer {
    sp_regex *split; /* NULL = the whole segment is one piece */
    sp_regex_stack stack;
    sp_bpe *bpe;
};

splash_status splash_tokenizer_create(const char *pattern, const uint8_t *token_bytes, const uint32_t *token_offsets,
                                      int32_t n_tokens, const int32_t *merges, int32_t n_merges, int32_t ignore_merges,
                                      splash_tokenizer **out) {
    if (!out || !token_bytes || !token_offsets || (n_merges > 0 && !merges)) {
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_tokenizer_create: a required pointer is NULL");
    }
    *out = NULL;
    splash_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    splash_status st = SPLASH_OK;
    if (pattern && pattern[0]) {
        st = sp_regex_compile(pattern, &t->split);
        if (st == SPLASH_OK && sp_regex_nullable(t->split)) {
            st = SP_FAIL(SPLASH_ERR_UNSUPPORTED, "pre-tokenizer regex %s can match the empty string", pattern);
        }
    }
    if (st == SPLASH_OK) st = sp_bpe_create(token_bytes, token_offsets, n_tokens, merges, n_merges, ignore_merges != 0, &t->bpe);
    if (st != SPLASH_OK) {
        splash_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SPLASH_OK;
}

void splash_tokenizer_free(splash_tokenizer *t) {
    if (!t) return;
    sp_regex_free(t->split);
    sp_regex_stack_free(&t->stack);
    sp_bpe_free(t->bpe);
    free(t);
}

static splash_status piece(splash_tokenizer *t, const uint8_t *s, int64_t n, int32_t *ids, int64_t *n_ids) {
    if (n > INT32_MAX) return SP_FAIL(SPLASH_ERR_UNSUPPORTED, "a pre-tokenized piece of %lld bytes", (long long)n);
    int32_t k = sp_bpe_encode(t->bpe, s, (int32_t)n, ids + *n_ids);
    if (k < 0) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory encoding a %lld-byte piece", (long long)n);
    *n_ids += k;
    return SPLASH_OK;
}

/* Isolated split, as tokenizers' Split pre-tokenizer: every match is a piece, and so is the text between matches. */
splash_status splash_tokenizer_encode(splash_tokenizer *t, const uint8_t *text, int64_t n_bytes, int32_t *ids, int64_t max_ids,
                                      int64_t *n_ids) {
    if (!t || (!text && n_bytes > 0) || !ids || !n_ids || n_bytes < 0) {
        return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_tokenizer_encode: a required pointer is NULL");
    }
    if (max_ids < n_bytes) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_tokenizer_encode: room for %lld ids, need %lld (one per byte)", (long long)max_ids, (long long)n_bytes);
    *n_ids = 0;
    if (!t->split) return piece(t, text, n_bytes, ids, n_ids);
    int64_t pos = 0;
    while (pos < n_bytes) {
        int64_t start = pos, end = -1;
        for (; start < n_bytes; start++) {
            if ((text[start] & 0xC0) == 0x80) continue; /* matches start on character boundaries */
            end = sp_regex_match_at(t->split, &t->stack, text, n_bytes, start);
            if (end == -2) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory in the pre-tokenizer regex");
            if (end > start) break;
        }
        splash_status st;
        if (start > pos && (st = piece(t, text + pos, start - pos, ids, n_ids)) != SPLASH_OK) return st;
        if (start >= n_bytes) break;
        if ((st = piece(t, text + start, end - start, ids, n_ids)) != SPLASH_OK) return st;
        pos = end;
    }
    return SPLASH_OK;
}
