/* regex.c — parse a pre-tokenizer pattern into a tree, compile it to a backtracking program, run it (regex.h).
 *
 * The program is the classic backtracking VM (Thompson's instructions run depth-first, as in Pike's and Oniguruma's
 * matchers): SPLIT tries its first branch and pushes the second, so the first match found is the leftmost-first
 * one with greedy quantifiers, exactly what Oniguruma returns. Lookaheads run as nested matches (atomic, like
 * Oniguruma's). A quantified expression that can match the empty string is refused rather than guarded, so every
 * loop iteration consumes input and the matcher always terminates. */
#include "tokenizer/regex.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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

static bool grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static int32_t fail(parser *p, splash_status st, const char *what) {
    if (p->status == SPLASH_OK) {
        p->status = SP_FAIL(st, "pre-tokenizer regex: %s at offset %zu of %s", what, p->pos, p->pat);
    }
    return -1;
}

static int32_t new_node(parser *p, uint8_t kind) {
    if (!grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof(node))) return fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->first = n->next = n->cls = -1;
    return p->n_nodes++;
}

/* Decodes one UTF-8 code point; invalid bytes decode as themselves, one byte long (never read past len). */
static inline uint32_t utf8_decode(const uint8_t *s, int64_t len, int64_t pos, int *n) {
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

static bool pat_eof(parser *p) { return p->pos >= p->len; }

static uint32_t pat_next_cp(parser *p) {
    int n;
    uint32_t cp = utf8_decode((const uint8_t *)p->pat, (int64_t)p->len, (int64_t)p->pos, &n);
    p->pos += (size_t)n;
    return cp;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool parse_hex(parser *p, int digits, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        if (pat_eof(p) || hexval(p->pat[p->pos]) < 0) return false;
        v = v * 16 + (uint32_t)hexval(p->pat[p->pos++]);
    }
    *out = v;
    return true;
}

#define CATS(...) cat_mask((const int[]){__VA_ARGS__, -1})
static uint32_t cat_mask(const int *list) {
    uint32_t m = 0;
    for (; *list >= 0; list++) m |= 1u << *list;
    return m;
}

/* Category mask for a \p{NAME}; 0 if the name is unknown. */
static uint32_t category_by_name(const char *name, size_t len) {
    static const struct {
        const char *name;
        int cats[6];
    } table[] = {
        {"L", {SP_GC_LU, SP_GC_LL, SP_GC_LT, SP_GC_LM, SP_GC_LO, -1}},
        {"Letter", {SP_GC_LU, SP_GC_LL, SP_GC_LT, SP_GC_LM, SP_GC_LO, -1}},
        {"Lu", {SP_GC_LU, -1}}, {"Ll", {SP_GC_LL, -1}}, {"Lt", {SP_GC_LT, -1}}, {"Lm", {SP_GC_LM, -1}}, {"Lo", {SP_GC_LO, -1}},
        {"M", {SP_GC_MN, SP_GC_MC, SP_GC_ME, -1}},
        {"Mark", {SP_GC_MN, SP_GC_MC, SP_GC_ME, -1}},
        {"Mn", {SP_GC_MN, -1}}, {"Mc", {SP_GC_MC, -1}}, {"Me", {SP_GC_ME, -1}},
        {"N", {SP_GC_ND, SP_GC_NL, SP_GC_NO, -1}},
        {"Number", {SP_GC_ND, SP_GC_NL, SP_GC_NO, -1}},
        {"Nd", {SP_GC_ND, -1}}, {"Nl", {SP_GC_NL, -1}}, {"No", {SP_GC_NO, -1}},
        {"P", {SP_GC_PC, SP_GC_PD, SP_GC_PS, SP_GC_PE, SP_GC_PI, -1}}, /* + PF, PO below */
        {"Punctuation", {SP_GC_PC, SP_GC_PD, SP_GC_PS, SP_GC_PE, SP_GC_PI, -1}},
        {"Pc", {SP_GC_PC, -1}}, {"Pd", {SP_GC_PD, -1}}, {"Ps", {SP_GC_PS, -1}}, {"Pe", {SP_GC_PE, -1}},
        {"Pi", {SP_GC_PI, -1}}, {"Pf", {SP_GC_PF, -1}}, {"Po", {SP_GC_PO, -1}},
        {"S", {SP_GC_SM, SP_GC_SC, SP_GC_SK, SP_GC_SO, -1}},
        {"Symbol", {SP_GC_SM, SP_GC_SC, SP_GC_SK, SP_GC_SO, -1}},
        {"Sm", {SP_GC_SM, -1}}, {"Sc", {SP_GC_SC, -1}}, {"Sk", {SP_GC_SK, -1}}, {"So", {SP_GC_SO, -1}},
        {"Z", {SP_GC_ZS, SP_GC_ZL, SP_GC_ZP, -1}},
        {"Separator", {SP_GC_ZS, SP_GC_ZL, SP_GC_ZP, -1}},
        {"Zs", {SP_GC_ZS, -1}}, {"Zl", {SP_GC_ZL, -1}}, {"Zp", {SP_GC_ZP, -1}},
        {"C", {SP_GC_CC, SP_GC_CF, SP_GC_CS, SP_GC_CO, SP_GC_CN, -1}},
        {"Other", {SP_GC_CC, SP_GC_CF, SP_GC_CS, SP_GC_CO, SP_GC_CN, -1}},
        {"Cc", {SP_GC_CC, -1}}, {"Cf", {SP_GC_CF, -1}}, {"Cs", {SP_GC_CS, -1}}, {"Co", {SP_GC_CO, -1}}, {"Cn", {SP_GC_CN, -1}},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strlen(table[i].name) == len && memcmp(table[i].name, name, len) == 0) {
            uint32_t m = cat_mask(table[i].cats);
            if (table[i].name[0] == 'P' && (len == 1 || len == 11)) m |= (1u << SP_GC_PF) | (1u << SP_GC_PO);
            return m;
        }
    }
    return 0;
}

#define ALL_CATS ((1u << SP_GC_COUNT) - 1)

static bool cls_contains(const sp_regex *re, const cls *c, uint32_t cp);

static int32_t new_class(parser *p) {
    sp_regex *re = p->re;
    if (!grow((void **)&re->classes, &re->cap_classes, re->n_classes + 1, sizeof(cls))) return fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    cls *c = &re->classes[re->n_classes];
    memset(c, 0, sizeof *c);
    c->range0 = re->n_ranges;
    return re->n_classes++;
}

static bool add_range(parser *p, int32_t ci, uint32_t lo, uint32_t hi) {
    sp_regex *re = p->re;
    if (!grow((void **)&re->ranges, &re->cap_ranges, re->n_ranges + 2, sizeof(uint32_t))) return fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory") >= 0;
    re->ranges[re->n_ranges++] = lo;
    re->ranges[re->n_ranges++] = hi;
    re->classes[ci].n_ranges++;
    return true;
}

static void finish_class(sp_regex *re, int32_t ci) {
    cls *c = &re->classes[ci];
    c->ascii[0] = c->ascii[1] = 0;
    for (uint32_t cp = 0; cp < 128; cp++) {
        /* cls_contains consults the bitmap only for ASCII, so evaluate the slow path with the bitmap unset. */
        bool in = false;
        uint8_t props = sp_unicode_props(cp);
        if (c->cats & (1u << (props & 0x1F))) in = true;
        if (c->ws && (props & SP_UNICODE_WHITE_SPACE)) in = true;
        if (c->nws && !(props & SP_UNICODE_WHITE_SPACE)) in = true;
        for (int32_t i = 0; i < c->n_ranges && !in; i++) {
            if (cp >= re->ranges[c->range0 + 2 * i] && cp <= re->ranges[c->range0 + 2 * i + 1]) in = true;
        }
        if (in != c->negate) c->ascii[cp >> 6] |= 1ull << (cp & 63);
    }
}

/* Shorthand escapes usable inside and outside classes: \s \S \d \D \w \W \p{..} \P{..}. Returns 1 if `e` was one
 * (and added it to class ci), 0 if not, -1 on error. p->pos is just past the letter. */
static int shorthand(parser *p, char e, int32_t ci) {
    cls *c = &p->re->classes[ci];
    uint32_t word = cat_mask((const int[]){SP_GC_LU, SP_GC_LL, SP_GC_LT, SP_GC_LM, SP_GC_LO, SP_GC_MN, SP_GC_MC, SP_GC_ME, SP_GC_ND, SP_GC_PC, -1});
    switch (e) {
    case 's': c->ws = true; return 1;
    case 'S': c->nws = true; return 1;
    case 'd': c->cats |= 1u << SP_GC_ND; return 1;
    case 'D': c->cats |= ALL_CATS & ~(1u << SP_GC_ND); return 1;
    case 'w': c->cats |= word; return 1;
    case 'W': c->cats |= ALL_CATS & ~word; return 1;
    case 'p':
    case 'P': {
        if (pat_eof(p) || p->pat[p->pos] != '{') return fail(p, SPLASH_ERR_UNSUPPORTED, "\\p without {NAME}"), -1;
        size_t start = ++p->pos;
        bool neg = e == 'P';
        if (!pat_eof(p) && p->pat[p->pos] == '^') {
            neg = !neg;
            start = ++p->pos;
        }
        while (!pat_eof(p) && p->pat[p->pos] != '}') p->pos++;
        if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "unterminated \\p{"), -1;
        uint32_t m = category_by_name(p->pat + start, p->pos - start);
        p->pos++;
        if (!m) return fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported property name in \\p{...} (general categories only)"), -1;
        c->cats |= neg ? ALL_CATS & ~m : m;
        return 1;
    }
    default: return 0;
    }
}

/* A single literal escape (\n, \x41, \., ...): returns the code point, or UINT32_MAX after reporting an error. */
static uint32_t literal_escape(parser *p, char e) {
    uint32_t v;
    switch (e) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'f': return '\f';
    case 'v': return '\v';
    case 'a': return 7;
    case 'e': return 27;
    case 'x':
        if (!pat_eof(p) && p->pat[p->pos] == '{') {
            p->pos++;
            v = 0;
            int nd = 0;
            while (!pat_eof(p) && hexval(p->pat[p->pos]) >= 0 && nd < 8) v = v * 16 + (uint32_t)hexval(p->pat[p->pos++]), nd++;
            if (pat_eof(p) || p->pat[p->pos] != '}' || nd == 0) return fail(p, SPLASH_ERR_FORMAT, "bad \\x{...}"), UINT32_MAX;
            p->pos++;
            return v;
        }
        if (!parse_hex(p, 2, &v)) return fail(p, SPLASH_ERR_FORMAT, "bad \\xHH"), UINT32_MAX;
        return v;
    case 'u':
        if (!parse_hex(p, 4, &v)) return fail(p, SPLASH_ERR_FORMAT, "bad \\uHHHH"), UINT32_MAX;
        return v;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            return fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported escape (anchors, backreferences and \\h/\\R-style classes are not supported)"), UINT32_MAX;
        }
        return (uint32_t)(unsigned char)e;
    }
}

static int32_t parse_class(parser *p) {
    /* p->pos is just past '['. */
    int32_t ci = new_class(p);
    if (ci < 0) return -1;
    if (!pat_eof(p) && p->pat[p->pos] == '^') {
        p->re->classes[ci].negate = true;
        p->pos++;
    }
    bool first = true;
    for (;;) {
        if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "unterminated character class");
        char ch = p->pat[p->pos];
        if (ch == ']' && !first) {
            p->pos++;
            break;
        }
        first = false;
        if (ch == '[') return fail(p, SPLASH_ERR_UNSUPPORTED, "nested character classes");
        if (ch == '&' && p->pos + 1 < p->len && p->pat[p->pos + 1] == '&') return fail(p, SPLASH_ERR_UNSUPPORTED, "class intersection &&");
        uint32_t lo;
        if (ch == '\\') {
            p->pos++;
            if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
            char e = p->pat[p->pos++];
            int r = shorthand(p, e, ci);
            if (r < 0) return -1;
            if (r == 1) continue;
            lo = literal_escape(p, e);
            if (lo == UINT32_MAX) return -1;
        } else {
            lo = pat_next_cp(p);
        }
        uint32_t hi = lo;
        if (p->pos + 1 < p->len && p->pat[p->pos] == '-' && p->pat[p->pos + 1] != ']') {
            p->pos++;
            if (p->pat[p->pos] == '\\') {
                p->pos++;
                if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
                char e = p->pat[p->pos++];
                hi = literal_escape(p, e);
                if (hi == UINT32_MAX) return -1;
            } else {
                hi = pat_next_cp(p);
            }
            if (hi < lo) return fail(p, SPLASH_ERR_FORMAT, "character range out of order");
        }
        if (!add_range(p, ci, lo, hi)) return -1;
    }
    finish_class(p->re, ci);
    return ci;
}

static int32_t parse_alt(parser *p, bool icase);

static int32_t parse_atom(parser *p, bool icase) {
    char ch = p->pat[p->pos];
    if (ch == '(') {
        p->pos++;
        bool look = false, neg = false;
        bool sub_icase = icase;
        if (!pat_eof(p) && p->pat[p->pos] == '?') {
            p->pos++;
            if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "unterminated group");
            char k = p->pat[p->pos];
            if (k == ':') {
                p->pos++;
            } else if (k == '=' || k == '!') {
                look = true;
                neg = k == '!';
                p->pos++;
            } else if (k == 'i' && p->pos + 1 < p->len && p->pat[p->pos + 1] == ':') {
                sub_icase = true;
                p->pos += 2;
            } else {
                return fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported group kind (only (?:, (?i:, (?= and (?! are supported)");
            }
        }
        int32_t inner = parse_alt(p, sub_icase);
        if (inner < 0) return -1;
        if (pat_eof(p) || p->pat[p->pos] != ')') return fail(p, SPLASH_ERR_FORMAT, "missing )");
        p->pos++;
        if (!look) return inner;
        int32_t n = new_node(p, N_LOOK);
        if (n < 0) return -1;
        p->nodes[n].first = inner;
        p->nodes[n].neg = neg;
        return n;
    }
    if (ch == '[') {
        p->pos++;
        if (icase) return fail(p, SPLASH_ERR_UNSUPPORTED, "a character class inside (?i:...)");
        int32_t ci = parse_class(p);
        if (ci < 0) return -1;
        int32_t n = new_node(p, N_CLASS);
        if (n < 0) return -1;
        p->nodes[n].cls = ci;
        return n;
    }
    if (ch == '.') {
        p->pos++;
        return new_node(p, N_ANY);
    }
    if (ch == '^' || ch == '$') return fail(p, SPLASH_ERR_UNSUPPORTED, "anchors ^ and $");
    if (ch == '*' || ch == '+' || ch == '?') return fail(p, SPLASH_ERR_FORMAT, "quantifier without anything to repeat");
    uint32_t cp;
    if (ch == '\\') {
        p->pos++;
        if (pat_eof(p)) return fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
        char e = p->pat[p->pos++];
        if (strchr("sSdDwWpP", e)) {
            if (icase) return fail(p, SPLASH_ERR_UNSUPPORTED, "a character class inside (?i:...)");
            int32_t ci = new_class(p);
            if (ci < 0 || shorthand(p, e, ci) < 0) return -1;
            finish_class(p->re, ci);
            int32_t n = new_node(p, N_CLASS);
            if (n < 0) return -1;
            p->nodes[n].cls = ci;
            return n;
        }
        cp = literal_escape(p, e);
        if (cp == UINT32_MAX) return -1;
    } else {
        cp = pat_next_cp(p);
    }
    int32_t n = new_node(p, N_CHAR);
    if (n < 0) return -1;
    p->nodes[n].cp = icase ? sp_unicode_fold(cp) : cp;
    p->nodes[n].icase = icase;
    return n;
}

/* Parses {n}, {n,}, {n,m} at p->pos (on '{'); false (pos unchanged) if it is not a quantifier. */
static bool parse_braces(parser *p, int32_t *min, int32_t *max) {
    size_t save = p->pos++;
    int32_t a = 0, b;
    int nd = 0;
    while (!pat_eof(p) && p->pat[p->pos] >= '0' && p->pat[p->pos] <= '9' && a <= MAX_REPEAT) a = a * 10 + (p->pat[p->pos++] - '0'), nd++;
    if (nd == 0) goto literal;
    b = a;
    if (!pat_eof(p) && p->pat[p->pos] == ',') {
        p->pos++;
        b = -1;
        int nb = 0, v = 0;
        while (!pat_eof(p) && p->pat[p->pos] >= '0' && p->pat[p->pos] <= '9' && v <= MAX_REPEAT) v = v * 10 + (p->pat[p->pos++] - '0'), nb++;
        if (nb) b = v;
    }
    if (pat_eof(p) || p->pat[p->pos] != '}') goto literal;
    p->pos++;
    *min = a;
    *max = b;
    return true;
literal:
    p->pos = save;
    return false;
}

static int32_t parse_repeat(parser *p, bool icase) {
    int32_t atom = parse_atom(p, icase);
    if (atom < 0) return -1;
    if (pat_eof(p)) return atom;
    char q = p->pat[p->pos];
    int32_t min, max;
    if (q == '*') min = 0, max = -1, p->pos++;
    else if (q == '+') min = 1, max = -1, p->pos++;
    else if (q == '?') min = 0, max = 1, p->pos++;
    else if (q == '{' && parse_braces(p, &min, &max)) {
        if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && max < min)) return fail(p, SPLASH_ERR_UNSUPPORTED, "repeat count out of range");
    } else return atom;
    bool greedy = true;
    if (!pat_eof(p) && p->pat[p->pos] == '?') greedy = false, p->pos++;
    else if (!pat_eof(p) && p->pat[p->pos] == '+') return fail(p, SPLASH_ERR_UNSUPPORTED, "possessive quantifiers");
    if (!pat_eof(p) && strchr("*+?", p->pat[p->pos])) return fail(p, SPLASH_ERR_UNSUPPORTED, "stacked quantifiers");
    int32_t n = new_node(p, N_REPEAT);
    if (n < 0) return -1;
    p->nodes[n].first = atom;
    p->nodes[n].min = min;
    p->nodes[n].max = max;
    p->nodes[n].greedy = greedy;
    return n;
}

static int32_t parse_cat(parser *p, bool icase) {
    int32_t cat = new_node(p, N_CAT);
    if (cat < 0) return -1;
    int32_t last = -1;
    while (!pat_eof(p) && p->pat[p->pos] != '|' && p->pat[p->pos] != ')') {
        int32_t r = parse_repeat(p, icase);
        if (r < 0) return -1;
        if (last < 0) p->nodes[cat].first = r;
        else p->nodes[last].next = r;
        last = r;
    }
    return cat;
}

static int32_t parse_alt(parser *p, bool icase) {
    int32_t first = parse_cat(p, icase);
    if (first < 0) return -1;
    if (pat_eof(p) || p->pat[p->pos] != '|') return first;
    int32_t alt = new_node(p, N_ALT);
    if (alt < 0) return -1;
    p->nodes[alt].first = first;
    int32_t last = first;
    while (!pat_eof(p) && p->pat[p->pos] == '|') {
        p->pos++;
        int32_t c = parse_cat(p, icase);
        if (c < 0) return -1;
        p->nodes[last].next = c;
        last = c;
    }
    return alt;
}

/* ---- compile ------------------------------------------------------------------------------------------------- */

static bool nullable(const parser *p, int32_t i) {
    const node *n = &p->nodes[i];
    switch (n->kind) {
    case N_CHAR:
    case N_CLASS:
    case N_ANY: return false;
    case N_CAT:
        for (int32_t c = n->first; c >= 0; c = p->nodes[c].next)
            if (!nullable(p, c)) return false;
        return true;
    case N_ALT:
        for (int32_t c = n->first; c >= 0; c = p->nodes[c].next)
            if (nullable(p, c)) return true;
        return false;
    case N_REPEAT: return n->min == 0 || nullable(p, n->first);
    default: return true;
    }
}

static int32_t emit(parser *p, uint8_t op, int32_t x, int32_t y) {
    sp_regex *re = p->re;
    if (re->n_prog >= MAX_PROGRAM) return fail(p, SPLASH_ERR_UNSUPPORTED, "pattern too large once repeats are expanded");
    if (!grow((void **)&re->prog, &re->cap_prog, re->n_prog + 1, sizeof(inst))) return fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    re->prog[re->n_prog] = (inst){.op = op, .x = x, .y = y};
    return re->n_prog++;
}

static bool compile(parser *p, int32_t i) {
    const node n = p->nodes[i];
    sp_regex *re = p->re;
    switch (n.kind) {
    case N_EMPTY: return true;
    case N_CHAR: return emit(p, n.icase ? OP_CHARI : OP_CHAR, (int32_t)n.cp, 0) >= 0;
    case N_CLASS: return emit(p, OP_CLASS, n.cls, 0) >= 0;
    case N_ANY: return emit(p, OP_ANY, 0, 0) >= 0;
    case N_CAT:
        for (int32_t c = n.first; c >= 0; c = p->nodes[c].next)
            if (!compile(p, c)) return false;
        return true;
    case N_ALT: {
        /* SPLIT L1, next; L1: c1; JMP end; next: SPLIT L2, next2; ... last: ck; end: */
        int32_t jumps[256];
        int32_t nj = 0;
        for (int32_t c = n.first; c >= 0; c = p->nodes[c].next) {
            int32_t split = -1;
            if (p->nodes[c].next >= 0) {
                split = emit(p, OP_SPLIT, 0, 0);
                if (split < 0) return false;
                re->prog[split].x = re->n_prog;
            }
            if (!compile(p, c)) return false;
            if (p->nodes[c].next >= 0) {
                if (nj == 256) return fail(p, SPLASH_ERR_UNSUPPORTED, "more than 256 alternatives in one group") >= 0;
                if ((jumps[nj++] = emit(p, OP_JMP, 0, 0)) < 0) return false;
                re->prog[split].y = re->n_prog;
            }
        }
        for (int32_t j = 0; j < nj; j++) re->prog[jumps[j]].x = re->n_prog;
        return true;
    }
    case N_REPEAT: {
        for (int32_t k = 0; k < n.min; k++)
            if (!compile(p, n.first)) return false;
        if (n.max < 0 && n.greedy && p->nodes[n.first].kind == N_CLASS) {
            /* The common case (\s+, [\p{L}\p{M}]+): one instruction that takes the longest run and gives back one
             * character per backtrack, instead of a SPLIT and a stack entry per character. */
            return emit(p, OP_STAR, p->nodes[n.first].cls, 0) >= 0;
        }
        if (n.max < 0) {
            if (nullable(p, n.first)) return fail(p, SPLASH_ERR_UNSUPPORTED, "a repeated expression that can match the empty string") >= 0;
            int32_t loop = emit(p, OP_SPLIT, 0, 0);
            if (loop < 0 || !compile(p, n.first) || emit(p, OP_JMP, loop, 0) < 0) return false;
            int32_t body = loop + 1, out = re->n_prog;
            re->prog[loop].x = n.greedy ? body : out;
            re->prog[loop].y = n.greedy ? out : body;
            return true;
        }
        int32_t start = re->n_prog;
        for (int32_t k = n.min; k < n.max; k++) {
            int32_t split = emit(p, OP_SPLIT, 0, 0);
            if (split < 0 || !compile(p, n.first)) return false;
        }
        /* Every optional copy's SPLIT skips to the end. */
        int32_t end = re->n_prog;
        for (int32_t pc = start; pc < end; pc++) {
            if (re->prog[pc].op == OP_SPLIT && re->prog[pc].x == 0 && re->prog[pc].y == 0) {
                re->prog[pc].x = n.greedy ? pc + 1 : end;
                re->prog[pc].y = n.greedy ? end : pc + 1;
            }
        }
        return true;
    }
    case N_LOOK: {
        int32_t look = emit(p, OP_LOOK, 0, 0);
        if (look < 0 || !compile(p, n.first) || emit(p, OP_MATCH, 0, 0) < 0) return false;
        re->prog[look].neg = n.neg;
        re->prog[look].y = re->n_prog;
        return true;
    }
    }
    return false;
}

static void first_of(sp_regex *re, int32_t pc, bool *done, first_set *out, int depth) {
    if (depth > 64) { /* deep chains of jumps: give up pruning there */
        out->any = true;
        return;
    }
    if (done[pc]) {
        first_set *f = &re->first[pc];
        out->ascii[0] |= f->ascii[0], out->ascii[1] |= f->ascii[1], out->nonascii |= f->nonascii, out->any |= f->any;
        return;
    }
    const inst *in = &re->prog[pc];
    first_set f = {{0, 0}, false, false};
    switch (in->op) {
    case OP_CHAR:
        if (in->x < 128) f.ascii[in->x >> 6] |= 1ull << (in->x & 63);
        else f.nonascii = true;
        break;
    case OP_CHARI:
        /* x is folded: its ASCII upper case, and non-ASCII characters that fold to it (K, long s), also match. */
        if (in->x < 128) {
            f.ascii[in->x >> 6] |= 1ull << (in->x & 63);
            if (in->x >= 'a' && in->x <= 'z') f.ascii[(in->x - 32) >> 6] |= 1ull << ((in->x - 32) & 63);
        }
        f.nonascii = true;
        break;
    case OP_CLASS: f.ascii[0] = re->classes[in->x].ascii[0], f.ascii[1] = re->classes[in->x].ascii[1], f.nonascii = true; break;
    case OP_STAR:
        f.ascii[0] = re->classes[in->x].ascii[0], f.ascii[1] = re->classes[in->x].ascii[1], f.nonascii = true;
        first_of(re, pc + 1, done, &f, depth + 1);
        break;
    case OP_ANY: f.ascii[0] = f.ascii[1] = ~0ull, f.nonascii = true; break;
    case OP_SPLIT:
        first_of(re, in->x, done, &f, depth + 1);
        first_of(re, in->y, done, &f, depth + 1);
        break;
    case OP_JMP: first_of(re, in->x, done, &f, depth + 1); break;
    default: f.any = true; break; /* LOOK, MATCH */
    }
    re->first[pc] = f;
    done[pc] = true;
    out->ascii[0] |= f.ascii[0], out->ascii[1] |= f.ascii[1], out->nonascii |= f.nonascii, out->any |= f.any;
}

static bool compute_first_sets(sp_regex *re) {
    re->first = calloc((size_t)re->n_prog, sizeof *re->first);
    bool *done = calloc((size_t)re->n_prog, sizeof *done);
    if (!re->first || !done) {
        free(done);
        return false;
    }
    for (int32_t pc = re->n_prog - 1; pc >= 0; pc--) {
        first_set f = {{0, 0}, false, false};
        first_of(re, pc, done, &f, 0);
    }
    free(done);
    return true;
}

splash_status sp_regex_compile(const char *pattern, sp_regex **out) {
    *out = NULL;
    sp_regex *re = calloc(1, sizeof *re);
    if (!re) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    parser p = {.pat = pattern, .len = strlen(pattern), .re = re, .status = SPLASH_OK};
    int32_t root = parse_alt(&p, false);
    if (root >= 0 && !pat_eof(&p)) fail(&p, SPLASH_ERR_FORMAT, "unmatched )");
    if (p.status == SPLASH_OK && compile(&p, root)) emit(&p, OP_MATCH, 0, 0);
    if (p.status == SPLASH_OK) re->nullable = nullable(&p, root);
    if (p.status == SPLASH_OK && !compute_first_sets(re)) fail(&p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    free(p.nodes);
    if (p.status != SPLASH_OK) {
        sp_regex_free(re);
        return p.status;
    }
    *out = re;
    return SPLASH_OK;
}

void sp_regex_free(sp_regex *re) {
    if (!re) return;
    free(re->prog);
    free(re->first);
    free(re->classes);
    free(re->ranges);
    free(re);
}

void sp_regex_stack_free(sp_regex_stack *st) {
    free(st->items);
    st->items = NULL;
    st->n = st->cap = 0;
}

/* ---- match --------------------------------------------------------------------------------------------------- */

static bool cls_contains(const sp_regex *re, const cls *c, uint32_t cp) {
    if (cp < 128) return (c->ascii[cp >> 6] >> (cp & 63)) & 1;
    uint8_t props = sp_unicode_props(cp);
    bool in = (c->cats >> (props & 0x1F)) & 1;
    if (!in && c->ws && (props & SP_UNICODE_WHITE_SPACE)) in = true;
    if (!in && c->nws && !(props & SP_UNICODE_WHITE_SPACE)) in = true;
    for (int32_t i = 0; i < c->n_ranges && !in; i++) {
        if (cp >= re->ranges[c->range0 + 2 * i] && cp <= re->ranges[c->range0 + 2 * i + 1]) in = true;
    }
    return in != c->negate;
}

/* Simple case folding, with ASCII (nearly all text) answered inline. */
static inline uint32_t fold(uint32_t cp) {
    if (cp < 128) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return sp_unicode_fold(cp);
}

/* False when no match can start at pc with the character at pos: SPLIT then skips that branch without a stack
 * entry, which prunes most of the pattern's alternatives at each piece start. */
static inline bool may_start(const sp_regex *re, int32_t pc, const uint8_t *s, int64_t len, int64_t pos) {
    const first_set *f = &re->first[pc];
    if (f->any) return true;
    if (pos >= len) return false;
    uint8_t c = s[pos];
    return c < 128 ? (f->ascii[c >> 6] >> (c & 63)) & 1 : f->nonascii;
}

static bool push(sp_regex_stack *st, int64_t pc, int64_t pos) {
    if (st->n + 2 > st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 256;
        int64_t *items = realloc(st->items, cap * sizeof *items);
        if (!items) return false;
        st->items = items;
        st->cap = cap;
    }
    st->items[st->n++] = pc;
    st->items[st->n++] = pos;
    return true;
}

static int64_t run(const sp_regex *re, sp_regex_stack *st, const uint8_t *s, int64_t len, int32_t pc, int64_t pos) {
    const size_t base = st->n;
    for (;;) {
        const inst *in = &re->prog[pc];
        int n;
        switch (in->op) {
        case OP_CHAR:
            if (pos < len && utf8_decode(s, len, pos, &n) == (uint32_t)in->x) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_CHARI:
            if (pos < len && fold(utf8_decode(s, len, pos, &n)) == (uint32_t)in->x) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_CLASS:
            if (pos < len && cls_contains(re, &re->classes[in->x], utf8_decode(s, len, pos, &n))) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_ANY:
            if (pos < len && s[pos] != '\n') {
                utf8_decode(s, len, pos, &n);
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_STAR: {
            /* Longest run first; on failure, the stack entry (-2 - pc, end) over (-1, start) gives back one character
             * at a time down to start (see the failure path below). */
            const cls *c = &re->classes[in->x];
            int64_t start = pos;
            while (pos < len && cls_contains(re, c, utf8_decode(s, len, pos, &n))) pos += n;
            if (pos > start && (!push(st, -1, start) || !push(st, -2 - (int64_t)pc, pos))) return -2;
            pc++;
            continue;
        }
        case OP_SPLIT:
            if (!may_start(re, in->x, s, len, pos)) {
                pc = in->y;
                continue;
            }
            if (may_start(re, in->y, s, len, pos) && !push(st, in->y, pos)) return -2;
            pc = in->x;
            continue;
        case OP_JMP: pc = in->x; continue;
        case OP_LOOK: {
            int64_t r = run(re, st, s, len, pc + 1, pos);
            if (r == -2) return -2;
            if ((r >= 0) != in->neg) {
                pc = in->y;
                continue;
            }
            break;
        }
        case OP_MATCH: st->n = base; return pos;
        }
        /* This path failed: resume the most recent alternative of this (sub)match. */
        if (st->n == base) return -1;
        pos = st->items[--st->n];
        int64_t top = st->items[--st->n];
        if (top <= -2) {
            /* A STAR giving back its last character; the (-1, start) entry below stays while it can give more. */
            int64_t start = st->items[st->n - 1];
            do pos--;
            while (pos > start && (s[pos] & 0xC0) == 0x80);
            if (pos > start) st->n += 2; /* the entry is still there: rewrite its position */
            else st->n -= 2;
            if (pos > start) st->items[st->n - 1] = pos;
            pc = (int32_t)(-2 - top) + 1;
        } else {
            pc = (int32_t)top;
        }
    }
}

bool sp_regex_nullable(const sp_regex *re) { return re->nullable; }

int64_t sp_regex_match_at(const sp_regex *re, sp_regex_stack *st, const uint8_t *text, int64_t len, int64_t pos) {
    st->n = 0;
    return run(re, st, text, len, 0, pos);
}
