/* regex.c — a parsed pre-tokenizer pattern (regex_parse.c) compiled to a backtracking program, and run (regex.h).
 *
 * The program is the classic backtracking VM (Thompson's instructions run depth-first, as in Pike's and Oniguruma's
 * matchers): SPLIT tries its first branch and pushes the second, so the first match found is the leftmost-first
 * one with greedy quantifiers, exactly what Oniguruma returns. Lookaheads run as nested matches (atomic, like
 * Oniguruma's). A quantified expression that can match the empty string is refused rather than guarded, so every
 * loop iteration consumes input and the matcher always terminates. */
#include "tokenizer/regex_program.h"

#include "core/error.h"
#include "tokenizer/unicode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

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
    if (re->n_prog >= MAX_PROGRAM) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "pattern too large once repeats are expanded");
    if (!sp_regex_grow((void **)&re->prog, &re->cap_prog, re->n_prog + 1, sizeof(inst))) return sp_regex_fail(p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
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
                if (nj == 256) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "more than 256 alternatives in one group") >= 0;
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
            if (nullable(p, n.first)) return sp_regex_fail(p, SPLASH_ERR_UNSUPPORTED, "a repeated expression that can match the empty string") >= 0;
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
    int32_t root = sp_regex_parse(&p);
    if (p.status == SPLASH_OK && compile(&p, root)) emit(&p, OP_MATCH, 0, 0);
    if (p.status == SPLASH_OK) re->nullable = nullable(&p, root);
    if (p.status == SPLASH_OK && !compute_first_sets(re)) sp_regex_fail(&p, SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
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
            if (pos < len && sp_utf8_decode(s, len, pos, &n) == (uint32_t)in->x) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_CHARI:
            if (pos < len && fold(sp_utf8_decode(s, len, pos, &n)) == (uint32_t)in->x) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_CLASS:
            if (pos < len && cls_contains(re, &re->classes[in->x], sp_utf8_decode(s, len, pos, &n))) {
                pos += n;
                pc++;
                continue;
            }
            break;
        case OP_ANY:
            if (pos < len && s[pos] != '\n') {
                sp_utf8_decode(s, len, pos, &n);
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
            while (pos < len && cls_contains(re, c, sp_utf8_decode(s, len, pos, &n))) pos += n;
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
