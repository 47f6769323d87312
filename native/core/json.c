#include "json.h"

#include "error.h"

#include <langinfo.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *text;
    size_t len, pos;
    sp_json_doc *doc;
    char *out; /* next free byte of doc->strings */
    bool oom;
} parser;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
    sp_json_doc *d = p->doc;
    d->error_offset = p->pos;
    int n = snprintf(d->error, sizeof d->error, "byte %zu: ", p->pos);
    if (n < 0 || (size_t)n >= sizeof d->error) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->error + n, sizeof d->error - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

/* What is at the current position, for messages: a printable character, or "end of input", or a byte value. */
static const char *here(const parser *p, char buf[24]) {
    if (p->pos >= p->len) return "end of input";
    unsigned char c = (unsigned char)p->text[p->pos];
    if (c >= 0x20 && c < 0x7f) snprintf(buf, 24, "'%c'", c);
    else snprintf(buf, 24, "byte 0x%02x", c);
    return buf;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

/* Appends a node and returns its index, or SIZE_MAX when out of memory. */
static size_t new_node(parser *p, sp_json_type type) {
    sp_json_doc *d = p->doc;
    if (d->n_nodes == d->cap_nodes) {
        size_t cap = d->cap_nodes ? d->cap_nodes * 2 : 64;
        sp_json *n = realloc(d->nodes, cap * sizeof *n);
        if (!n) {
            p->oom = true;
            return SIZE_MAX;
        }
        d->nodes = n;
        d->cap_nodes = cap;
    }
    sp_json *n = &d->nodes[d->n_nodes];
    memset(n, 0, sizeof *n);
    n->type = type;
    n->span = 1;
    return d->n_nodes++;
}

static bool literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0) {
        char buf[24];
        return fail(p, "expected a value, found %s", here(p, buf));
    }
    p->pos += n;
    return true;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static char *put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        *o++ = (char)cp;
    } else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

/* Length of the valid UTF-8 sequence starting at s (lead byte >= 0x80), or 0 if invalid (overlong, surrogate,
 * above U+10FFFF, truncated). */
static size_t utf8_seq(const unsigned char *s, size_t avail) {
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c == 0xe0) n = 3, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) n = 3;
    else if (c == 0xed) n = 3, hi = 0x9f;
    else if (c == 0xf0) n = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) n = 4;
    else if (c == 0xf4) n = 4, hi = 0x8f;
    else return 0;
    if (avail < n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* Parses a string at p->pos (on the opening quote); writes it unescaped to the string buffer. */
static bool string(parser *p, const char **out, size_t *out_len) {
    p->pos++; /* opening quote */
    char *start = p->out, *o = p->out;
    for (;;) {
        if (p->pos >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->text[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return fail(p, "control character 0x%02x in string (must be escaped)", c);
        if (c == '\\') {
            if (p->pos + 1 >= p->len) return fail(p, "unterminated escape");
            char e = p->text[p->pos + 1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                *o++ = map[simple - "\"\\/bfnrt"];
                p->pos += 2;
                continue;
            }
            if (e != 'u') return fail(p, "invalid escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
            if (p->len - p->pos < 6) return fail(p, "truncated \\u escape");
            int u = hex4(p->text + p->pos + 2);
            if (u < 0) return fail(p, "invalid hex digits in \\u escape");
            uint32_t cp = (uint32_t)u;
            if (cp >= 0xdc00 && cp <= 0xdfff) return fail(p, "lone low surrogate \\u%04x", cp);
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->len - p->pos < 12 || p->text[p->pos + 6] != '\\' || p->text[p->pos + 7] != 'u')
                    return fail(p, "high surrogate \\u%04x not followed by a low surrogate", cp);
                int lo = hex4(p->text + p->pos + 8);
                if (lo < 0xdc00 || lo > 0xdfff)
                    return fail(p, "high surrogate \\u%04x not followed by a low surrogate", cp);
                cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                p->pos += 6;
            }
            p->pos += 6;
            o = put_utf8(o, cp);
            continue;
        }
        if (c < 0x80) {
            *o++ = (char)c;
            p->pos++;
            continue;
        }
        size_t n = utf8_seq((const unsigned char *)p->text + p->pos, p->len - p->pos);
        if (!n) return fail(p, "invalid UTF-8 in string");
        memcpy(o, p->text + p->pos, n);
        o += n;
        p->pos += n;
    }
    *o++ = 0;
    p->out = o;
    *out = start;
    *out_len = (size_t)(o - start - 1);
    return true;
}

/* Converts a validated decimal literal with the C library, with '.' replaced by the locale's radix character so
 * the result does not depend on setlocale() calls elsewhere in the process. */
static bool to_double(parser *p, const char *s, size_t n, double *out) {
    char buf[SP_JSON_MAX_NUMBER + 16];
    const char *radix = nl_langinfo(RADIXCHAR);
    if (!radix || !radix[0] || strlen(radix) > 8) radix = ".";
    size_t rl = strlen(radix), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.') {
            memcpy(buf + k, radix, rl);
            k += rl;
        } else {
            buf[k++] = s[i];
        }
    }
    buf[k] = 0;
    char *end;
    double v = strtod(buf, &end);
    if (end != buf + k) return fail(p, "number not understood");
    if (isinf(v)) return fail(p, "number out of range");
    *out = v;
    return true;
}

static bool number(parser *p, sp_json *node) {
    size_t start = p->pos;
    const char *t = p->text;
    size_t i = p->pos, n = p->len;
    bool neg = false, integral = true;
    if (i < n && t[i] == '-') neg = true, i++;
    if (i >= n || t[i] < '0' || t[i] > '9') {
        p->pos = i;
        return fail(p, "expected a digit");
    }
    if (t[i] == '0') {
        i++;
        if (i < n && t[i] >= '0' && t[i] <= '9') {
            p->pos = i;
            return fail(p, "leading zero in number");
        }
    } else {
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    }
    if (i < n && t[i] == '.') {
        integral = false;
        i++;
        if (i >= n || t[i] < '0' || t[i] > '9') {
            p->pos = i;
            return fail(p, "expected a digit after '.'");
        }
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        integral = false;
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        if (i >= n || t[i] < '0' || t[i] > '9') {
            p->pos = i;
            return fail(p, "expected a digit in exponent");
        }
        while (i < n && t[i] >= '0' && t[i] <= '9') i++;
    }
    if (i - start > SP_JSON_MAX_NUMBER) return fail(p, "number literal longer than %d bytes", SP_JSON_MAX_NUMBER);
    p->pos = i;
    if (integral) {
        /* Accumulate negatively so INT64_MIN is representable. */
        int64_t v = 0;
        bool fits = true;
        for (size_t k = start + (neg ? 1 : 0); k < i; k++) {
            int d = t[k] - '0';
            if (v < (INT64_MIN + d) / 10) {
                fits = false;
                break;
            }
            v = v * 10 - d;
        }
        if (fits && (neg || v != INT64_MIN)) {
            node->type = SP_JSON_INT;
            node->v.i = neg ? v : -v;
            return true;
        }
    }
    node->type = SP_JSON_DOUBLE;
    size_t save = p->pos;
    p->pos = start;
    if (!to_double(p, t + start, i - start, &node->v.d)) return false;
    p->pos = save;
    return true;
}

static bool value(parser *p, int depth);

static bool container(parser *p, int depth, bool object) {
    if (depth >= SP_JSON_MAX_DEPTH) return fail(p, "nesting deeper than %d", SP_JSON_MAX_DEPTH);
    size_t idx = new_node(p, object ? SP_JSON_OBJECT : SP_JSON_ARRAY);
    if (idx == SIZE_MAX) return false;
    char close = object ? '}' : ']';
    size_t count = 0;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
    } else {
        for (;;) {
            const char *key = NULL;
            size_t key_len = 0;
            if (object) {
                skip_ws(p);
                if (p->pos >= p->len || p->text[p->pos] != '"') {
                    char buf[24];
                    return fail(p, "expected a string key, found %s", here(p, buf));
                }
                if (!string(p, &key, &key_len)) return false;
                skip_ws(p);
                if (p->pos >= p->len || p->text[p->pos] != ':') {
                    char buf[24];
                    return fail(p, "expected ':' after key, found %s", here(p, buf));
                }
                p->pos++;
            }
            size_t child = p->doc->n_nodes;
            if (!value(p, depth + 1)) return false;
            p->doc->nodes[child].key = key;
            p->doc->nodes[child].key_len = key_len;
            count++;
            skip_ws(p);
            if (p->pos < p->len && p->text[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->text[p->pos] == close) {
                p->pos++;
                break;
            }
            char buf[24];
            return fail(p, "expected ',' or '%c', found %s", close, here(p, buf));
        }
    }
    sp_json *node = &p->doc->nodes[idx];
    node->len = count;
    node->span = p->doc->n_nodes - idx;
    return true;
}

static bool value(parser *p, int depth) {
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, "expected a value, found end of input");
    char c = p->text[p->pos];
    if (c == '{' || c == '[') return container(p, depth, c == '{');
    size_t idx = new_node(p, SP_JSON_NULL);
    if (idx == SIZE_MAX) return false;
    sp_json *node = &p->doc->nodes[idx];
    switch (c) {
    case '"':
        node->type = SP_JSON_STRING;
        return string(p, &node->v.s, &node->len);
    case 't':
        node->type = SP_JSON_BOOL;
        node->v.b = true;
        return literal(p, "true");
    case 'f':
        node->type = SP_JSON_BOOL;
        return literal(p, "false");
    case 'n':
        return literal(p, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(p, node);
        char buf[24];
        return fail(p, "expected a value, found %s", here(p, buf));
    }
}

splash_status sp_json_parse(sp_json_doc *doc, const char *text, size_t len) {
    memset(doc, 0, sizeof *doc);
    /* Unescaping never grows a string, and each string's NUL fits in the space of its two quotes. */
    doc->strings = malloc(len + 1);
    if (!doc->strings) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "JSON: cannot allocate %zu bytes", len + 1);
    parser p = {.text = text, .len = len, .doc = doc, .out = doc->strings};
    bool ok = value(&p, 0);
    if (ok) {
        skip_ws(&p);
        if (p.pos != len) ok = fail(&p, "unexpected data after the JSON value");
    }
    if (ok) return SPLASH_OK;
    size_t offset = doc->error_offset;
    char msg[sizeof doc->error];
    memcpy(msg, doc->error, sizeof msg);
    sp_json_free(doc);
    doc->error_offset = offset;
    if (p.oom) {
        snprintf(doc->error, sizeof doc->error, "out of memory");
        return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "JSON: out of memory parsing %zu bytes", len);
    }
    memcpy(doc->error, msg, sizeof msg);
    return SP_FAIL(SPLASH_ERR_FORMAT, "JSON: %s", msg);
}

void sp_json_free(sp_json_doc *doc) {
    free(doc->nodes);
    free(doc->strings);
    memset(doc, 0, sizeof *doc);
}

const sp_json *sp_json_first(const sp_json *c) {
    if (!c || (c->type != SP_JSON_ARRAY && c->type != SP_JSON_OBJECT) || c->len == 0) return NULL;
    return c + 1;
}

const sp_json *sp_json_next(const sp_json *c, const sp_json *child) {
    const sp_json *n = child + child->span;
    return n < c + c->span ? n : NULL;
}

const sp_json *sp_json_get(const sp_json *obj, const char *key) {
    if (!obj || obj->type != SP_JSON_OBJECT) return NULL;
    size_t kl = strlen(key);
    for (const sp_json *e = sp_json_first(obj); e; e = sp_json_next(obj, e))
        if (e->key_len == kl && memcmp(e->key, key, kl) == 0) return e;
    return NULL;
}

const sp_json *sp_json_at(const sp_json *arr, size_t i) {
    if (!arr || arr->type != SP_JSON_ARRAY || i >= arr->len) return NULL;
    const sp_json *e = arr + 1;
    while (i--) e += e->span;
    return e;
}

bool sp_json_int(const sp_json *v, int64_t *out) {
    if (!v || v->type != SP_JSON_INT) return false;
    *out = v->v.i;
    return true;
}

bool sp_json_double(const sp_json *v, double *out) {
    if (!v) return false;
    if (v->type == SP_JSON_INT) *out = (double)v->v.i;
    else if (v->type == SP_JSON_DOUBLE) *out = v->v.d;
    else return false;
    return true;
}

bool sp_json_bool(const sp_json *v, bool *out) {
    if (!v || v->type != SP_JSON_BOOL) return false;
    *out = v->v.b;
    return true;
}

const char *sp_json_string(const sp_json *v) { return v && v->type == SP_JSON_STRING ? v->v.s : NULL; }

const char *sp_json_type_name(sp_json_type t) {
    switch (t) {
    case SP_JSON_NULL: return "null";
    case SP_JSON_BOOL: return "bool";
    case SP_JSON_INT: return "integer";
    case SP_JSON_DOUBLE: return "number";
    case SP_JSON_STRING: return "string";
    case SP_JSON_ARRAY: return "array";
    case SP_JSON_OBJECT: return "object";
    }
    return "?";
}
