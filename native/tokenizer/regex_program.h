/* regex_program.h — what the pre-tokenizer regex's parser (regex_parse.c) hands its compiler and matcher (regex.c):
 * the parse tree, the program it compiles to, and the helpers both sides use. Private to native/tokenizer/. */
#ifndef SP_TOKENIZER_REGEX_PROGRAM_H
#define SP_TOKENIZER_REGEX_PROGRAM_H

#include "tokenizer/regex.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- program ------------------------------------------------------------------------------------------------- */

enum { OP_CHAR, OP_CHARI, OP_CLASS, OP_ANY, OP_STAR, OP_SPLIT, OP_JMP, OP_LOOK, OP_MATCH };
typedef struct {
    uint8_t op, neg; /* neg: OP_LOOK is a negative lookahead */
    int32_t x, y;    /* CHAR: code point; CLASS, STAR: class index; SPLIT: preferred, other; JMP: target; LOOK: y = after */
} inst;

/* A character class: membership of ASCII precomputed, the rest by category, White_Space and explicit ranges. */
typedef struct {
    uint64_t ascii[2];
    uint32_t cats; /* bit per SP_GC_* */
    bool ws, nws, negate;
    int32_t range0, n_ranges; /* into sp_regex.ranges, pairs lo, hi */
} cls;

/* The characters an instruction can start a match with: ASCII ones exactly, any non-ASCII one as a flag; `any` when
 * it may match without consuming (so it must never be skipped). SPLIT consults its branches' sets. */
typedef struct {
    uint64_t ascii[2];
    bool nonascii, any;
} first_set;

struct sp_regex {
    inst *prog;
    first_set *first; /* [n_prog] */
    int32_t n_prog, cap_prog;
    cls *classes;
    int32_t n_classes, cap_classes;
    uint32_t *ranges;
    int32_t n_ranges, cap_ranges;
    bool nullable; /* the whole pattern can match the empty string */
};

/* ---- parse tree ---------------------------------------------------------------------------------------------- */

enum { N_EMPTY, N_CHAR, N_CLASS, N_ANY, N_CAT, N_ALT, N_REPEAT, N_LOOK };
typedef struct {
    uint8_t kind;
    bool icase, greedy, neg;
    uint32_t cp;
    int32_t cls, first, next; /* CAT/ALT/REPEAT/LOOK: first child; siblings linked by next */
    int32_t min, max;         /* REPEAT; max -1 = unbounded */
} node;

typedef struct {
    const char *pat;
    size_t pos, len;
    node *nodes;
    int32_t n_nodes, cap_nodes;
    sp_regex *re;
    splash_status status;
} parser;

#define MAX_PROGRAM 65536
#define MAX_REPEAT 1000

/* Grows *p (of *cap elements of elem bytes) to hold `need`; false when out of memory. */
bool sp_regex_grow(void **p, int32_t *cap, int32_t need, size_t elem);
/* Records the first failure of a parse or compile (with the offset and pattern) and returns -1. */
int32_t sp_regex_fail(parser *p, splash_status st, const char *what);
/* Parses the whole pattern into p->nodes (classes into p->re); returns the root node, or -1 with p->status set. */
int32_t sp_regex_parse(parser *p);

/* Decodes one UTF-8 code point; invalid bytes decode as themselves, one byte long (never read past len). */
static inline uint32_t sp_utf8_decode(const uint8_t *s, int64_t len, int64_t pos, int *n) {
    uint8_t c = s[pos];
    if (c < 0x80) {
        *n = 1;
        return c;
    }
    int need = c >= 0xF8 ? 0 : c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (need == 0 || pos + need >= len) {
        *n = 1;
        return c;
    }
    uint32_t cp = c & (0x3F >> need);
    for (int i = 1; i <= need; i++) {
        uint8_t b = s[pos + i];
        if ((b & 0xC0) != 0x80) {
            *n = 1;
            return c;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    *n = need + 1;
    return cp;
}

#endif
