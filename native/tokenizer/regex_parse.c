/* regex_parse.c — the pre-tokenizer pattern parsed into a tree (regex_program.h): Oniguruma's syntax as regex.h lists
 * it, character classes resolved against the Unicode tables, everything else refused with the construct and offset. */
#include "tokenizer/regex_program.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <stdlib.h>
#include <string.h>

bool sp_regex_grow(void **p, int32_t *cap, int32_t need, size_t elem) {
    if (need <= *cap) return true;
    int32_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

int32_t sp_regex_fail(parser *p, splash_status st, const char *what) {
    if (p->status == SPLASH_OK) {
        p->status = SP_FAIL(st, "pre-tokenizer regex: %s at offset %zu of %s", what, p->pos, p->pat);
    }
    return -1;
}

static int32_t new_node(parser *p, uint8_t kind) {
    if (!sp_regex_grow((void **)&p->nodes, &p->cap_nodes, p->n_nodes + 1, sizeof(node))) return sp_regex_fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    node *n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->first = n->next = n->cls = -1;
    return p->n_nodes++;
}

static bool pat_eof(parser *p) { return p->pos >= p->len; }

static uint32_t pat_next_cp(parser *p) {
    int n;
    uint32_t cp = sp_utf8_decode((const uint8_t *)p->pat, (int64_t)p->len, (int64_t)p->pos, &n);
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

static int32_t new_class(parser *p) {
    sp_regex *re = p->re;
    if (!sp_regex_grow((void **)&re->classes, &re->cap_classes, re->n_classes + 1, sizeof(cls))) return sp_regex_fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    cls *c = &re->classes[re->n_classes];
    memset(c, 0, sizeof *c);
    c->range0 = re->n_ranges;
    return re->n_classes++;
}

static bool add_range(parser *p, int32_t ci, uint32_t lo, uint32_t hi) {
    sp_regex *re = p->re;
    if (!sp_regex_grow((void **)&re->ranges, &re->cap_ranges, re->n_ranges + 2, sizeof(uint32_t))) return sp_regex_fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory") >= 0;
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
        if (pat_eof(p) || p->pat[p->pos] != '{') return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "\\p without {NAME}"), -1;
        size_t start = ++p->pos;
        bool neg = e == 'P';
        if (!pat_eof(p) && p->pat[p->pos] == '^') {
            neg = !neg;
            start = ++p->pos;
        }
        while (!pat_eof(p) && p->pat[p->pos] != '}') p->pos++;
        if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "unterminated \\p{"), -1;
        uint32_t m = category_by_name(p->pat + start, p->pos - start);
        p->pos++;
        if (!m) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported property name in \\p{...} (general categories only)"), -1;
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
            if (pat_eof(p) || p->pat[p->pos] != '}' || nd == 0) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "bad \\x{...}"), UINT32_MAX;
            p->pos++;
            return v;
        }
        if (!parse_hex(p, 2, &v)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "bad \\xHH"), UINT32_MAX;
        return v;
    case 'u':
        if (!parse_hex(p, 4, &v)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "bad \\uHHHH"), UINT32_MAX;
        return v;
    default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported escape (anchors, backreferences and \\h/\\R-style classes are not supported)"), UINT32_MAX;
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
        if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "unterminated character class");
        char ch = p->pat[p->pos];
        if (ch == ']' && !first) {
            p->pos++;
            break;
        }
        first = false;
        if (ch == '[') return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "nested character classes");
        if (ch == '&' && p->pos + 1 < p->len && p->pat[p->pos + 1] == '&') return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "class intersection &&");
        uint32_t lo;
        if (ch == '\\') {
            p->pos++;
            if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
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
                if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
                char e = p->pat[p->pos++];
                hi = literal_escape(p, e);
                if (hi == UINT32_MAX) return -1;
            } else {
                hi = pat_next_cp(p);
            }
            if (hi < lo) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "character range out of order");
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
            if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "unterminated group");
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
                return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "unsupported group kind (only (?:, (?i:, (?= and (?! are supported)");
            }
        }
        int32_t inner = parse_alt(p, sub_icase);
        if (inner < 0) return -1;
        if (pat_eof(p) || p->pat[p->pos] != ')') return sp_regex_fail(p, SPLASH_ERR_FORMAT, "missing )");
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
        if (icase) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "a character class inside (?i:...)");
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
    if (ch == '^' || ch == '$') return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "anchors ^ and $");
    if (ch == '*' || ch == '+' || ch == '?') return sp_regex_fail(p, SPLASH_ERR_FORMAT, "quantifier without anything to repeat");
    uint32_t cp;
    if (ch == '\\') {
        p->pos++;
        if (pat_eof(p)) return sp_regex_fail(p, SPLASH_ERR_FORMAT, "trailing backslash");
        char e = p->pat[p->pos++];
        if (strchr("sSdDwWpP", e)) {
            if (icase) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "a character class inside (?i:...)");
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
        if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && max < min)) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "repeat count out of range");
    } else return atom;
    bool greedy = true;
    if (!pat_eof(p) && p->pat[p->pos] == '?') greedy = false, p->pos++;
    else if (!pat_eof(p) && p->pat[p->pos] == '+') return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "possessive quantifiers");
    if (!pat_eof(p) && strchr("*+?", p->pat[p->pos])) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "stacked quantifiers");
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

int32_t sp_regex_parse(parser *p) {
    int32_t root = parse_alt(p, false);
    if (root >= 0 && !pat_eof(p)) sp_regex_fail(p, SPLASH_ERR_FORMAT, "unmatched )");
    return root;
}
