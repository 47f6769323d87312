/* json_test — the strict JSON parser: what it accepts (with exact values), what it refuses (with the byte offset
 * of the refusal), lookups, and independence from the process locale. Run: build/debug/tests/json_test */
#include "check.h"
#include "core/json.h"

#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static int parse(sp_json_doc *d, const char *s) { return sp_json_parse(d, s, strlen(s)); }

/* A document that must be refused, at the given byte offset (-1: any), with a message containing `want`. */
static void refuse(const char *text, size_t len, long offset, const char *want) {
    sp_json_doc d;
    int st = sp_json_parse(&d, text, len);
    bool ok = st == SPLASH_ERR_FORMAT && (offset < 0 || d.error_offset == (size_t)offset) && strstr(d.error, want) &&
              strstr(splash_last_error(), want) && d.nodes == NULL;
    char shown[48];
    size_t n = len < 40 ? len : 40;
    for (size_t i = 0; i < n; i++) shown[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    shown[n] = 0;
    CHECK(ok, "refuses %-42s -> status %d, \"%s\"", shown, st, d.error);
}
#define REFUSE(s, off, want) refuse(s, sizeof(s) - 1, off, want)

static void accepts(void) {
    sp_json_doc d;
    const char *text = " {\"a\": [1, -2, 3.5, 1e-6, true, false, null, \"x\"],\n \"b\": {\"c\": {}, \"d\": []},"
                       " \"big\": 9223372036854775807, \"small\": -9223372036854775808, \"over\": 9223372036854775808,"
                       " \"neg0\": -0, \"exp\": 1E+2, \"esc\": \"q\\\"b\\\\s\\/\\b\\f\\n\\r\\t\\u00e9\\u20ac\\ud83d\\ude00\","
                       " \"utf8\": \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\", \"nul\": \"a\\u0000b\", \"dup\": 1, \"dup\": 2 } ";
    CHECK(parse(&d, text) == SPLASH_OK, "parses a document with every kind of value (%s)", splash_last_error());
    const sp_json *r = sp_json_root(&d);
    CHECK(r && r->type == SP_JSON_OBJECT && r->len == 12, "root is an object with 12 members (len %zu)", r ? r->len : 0);

    const sp_json *a = sp_json_get(r, "a");
    CHECK(a && a->type == SP_JSON_ARRAY && a->len == 8, "a is an array of 8");
    int64_t i = 0;
    double x = 0;
    bool b = false;
    CHECK(sp_json_int(sp_json_at(a, 0), &i) && i == 1, "a[0] == 1");
    CHECK(sp_json_int(sp_json_at(a, 1), &i) && i == -2, "a[1] == -2");
    CHECK(!sp_json_int(sp_json_at(a, 2), &i) && sp_json_double(sp_json_at(a, 2), &x) && x == 3.5, "a[2] == 3.5, not an integer");
    CHECK(sp_json_double(sp_json_at(a, 3), &x) && x == 1e-6, "a[3] == 1e-6 exactly (%.17g)", x);
    CHECK(sp_json_bool(sp_json_at(a, 4), &b) && b, "a[4] == true");
    CHECK(sp_json_bool(sp_json_at(a, 5), &b) && !b, "a[5] == false");
    CHECK(sp_json_at(a, 6)->type == SP_JSON_NULL, "a[6] is null");
    CHECK(sp_json_string(sp_json_at(a, 7)) && strcmp(sp_json_string(sp_json_at(a, 7)), "x") == 0, "a[7] == \"x\"");
    CHECK(sp_json_at(a, 8) == NULL, "a[8] is out of range");
    CHECK(sp_json_double(sp_json_at(a, 0), &x) && x == 1.0, "an integer reads as a double too");

    const sp_json *bb = sp_json_get(r, "b");
    CHECK(bb && sp_json_get(bb, "c")->type == SP_JSON_OBJECT && sp_json_get(bb, "c")->len == 0, "b.c is {}");
    CHECK(sp_json_first(sp_json_get(bb, "d")) == NULL, "b.d is [] with no first child");
    CHECK(sp_json_get(r, "missing") == NULL && sp_json_get(a, "x") == NULL && sp_json_get(NULL, "x") == NULL,
          "lookups of missing keys, on arrays and on NULL give NULL");

    CHECK(sp_json_int(sp_json_get(r, "big"), &i) && i == INT64_MAX, "INT64_MAX exact (%lld)", (long long)i);
    CHECK(sp_json_int(sp_json_get(r, "small"), &i) && i == INT64_MIN, "INT64_MIN exact (%lld)", (long long)i);
    CHECK(sp_json_get(r, "over")->type == SP_JSON_DOUBLE && sp_json_get(r, "over")->v.d == 9223372036854775808.0,
          "INT64_MAX + 1 becomes a double");
    CHECK(sp_json_int(sp_json_get(r, "neg0"), &i) && i == 0, "-0 is integer 0");
    CHECK(sp_json_double(sp_json_get(r, "exp"), &x) && x == 100.0 && sp_json_get(r, "exp")->type == SP_JSON_DOUBLE,
          "1E+2 is the double 100");
    const char *want = "q\"b\\s/\b\f\n\r\t\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    const char *esc = sp_json_string(sp_json_get(r, "esc"));
    CHECK(esc && strcmp(esc, want) == 0 && sp_json_get(r, "esc")->len == strlen(want),
          "escapes and surrogate pairs unescape to UTF-8 (%zu bytes)", esc ? strlen(esc) : 0);
    CHECK(strcmp(sp_json_string(sp_json_get(r, "utf8")), "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80") == 0,
          "raw UTF-8 passes through");
    const sp_json *nul = sp_json_get(r, "nul");
    CHECK(nul->len == 3 && memcmp(nul->v.s, "a\0b", 3) == 0, "\\u0000 is kept, len counts it");
    CHECK(sp_json_int(sp_json_get(r, "dup"), &i) && i == 1, "a duplicate key: get returns the first");

    size_t n = 0;
    for (const sp_json *e = sp_json_first(r); e; e = sp_json_next(r, e)) n++;
    CHECK(n == 12, "iteration visits 12 members");
    n = 0;
    for (const sp_json *e = sp_json_first(a); e; e = sp_json_next(a, e)) n++;
    CHECK(n == 8 && sp_json_first(a)->key == NULL, "iteration over the array visits 8 elements without keys");
    sp_json_free(&d);

    CHECK(parse(&d, "42") == SPLASH_OK && sp_json_root(&d)->type == SP_JSON_INT, "a bare number is a document");
    sp_json_free(&d);
    /* The buffer need not be NUL-terminated: parse a prefix of a longer string. */
    CHECK(sp_json_parse(&d, "[1,2]xyz", 5) == SPLASH_OK && sp_json_root(&d)->len == 2, "parses exactly len bytes");
    sp_json_free(&d);
    char deep[2 * SP_JSON_MAX_DEPTH + 1];
    for (int k = 0; k < SP_JSON_MAX_DEPTH; k++) deep[k] = '[', deep[2 * SP_JSON_MAX_DEPTH - 1 - k] = ']';
    CHECK(sp_json_parse(&d, deep, 2 * SP_JSON_MAX_DEPTH) == SPLASH_OK, "nesting of exactly %d levels is accepted",
          SP_JSON_MAX_DEPTH);
    sp_json_free(&d);
}

static void refuses(void) {
    REFUSE("", 0, "end of input");
    REFUSE("   ", 3, "end of input");
    REFUSE("{\"a\":1,}", 7, "expected a string key");
    REFUSE("[1,2,]", 5, "expected a value");
    REFUSE("{\"a\" 1}", 5, "expected ':'");
    REFUSE("{\"a\":1 \"b\":2}", 7, "expected ',' or '}'");
    REFUSE("[1 2]", 3, "expected ',' or ']'");
    REFUSE("{a:1}", 1, "expected a string key");
    REFUSE("['x']", 1, "expected a value");
    REFUSE("// c\n{}", 0, "expected a value");
    REFUSE("{} x", 3, "unexpected data");
    REFUSE("{}{}", 2, "unexpected data");
    REFUSE("01", 1, "leading zero");
    REFUSE("-", 1, "expected a digit");
    REFUSE("1.", 2, "after '.'");
    REFUSE(".5", 0, "expected a value");
    REFUSE("1e", 2, "exponent");
    REFUSE("+1", 0, "expected a value");
    REFUSE("NaN", 0, "expected a value");
    REFUSE("Infinity", 0, "expected a value");
    REFUSE("1e999", 0, "out of range");
    REFUSE("tru", 0, "expected a value");
    REFUSE("nul", 0, "expected a value");
    REFUSE("\"abc", 4, "unterminated string");
    REFUSE("\"a\tb\"", 2, "control character 0x09");
    REFUSE("\"\\x\"", 1, "invalid escape");
    REFUSE("\"\\u12\"", 1, "\\u");
    REFUSE("\"\\u12g4\"", 1, "invalid hex");
    REFUSE("\"\\udc00\"", 1, "lone low surrogate");
    REFUSE("\"\\ud800\"", 1, "not followed by a low surrogate");
    REFUSE("\"\\ud800\\u0041\"", 1, "not followed by a low surrogate");
    REFUSE("\"\xc0\x80\"", 1, "invalid UTF-8");         /* overlong NUL */
    REFUSE("\"\xed\xa0\x80\"", 1, "invalid UTF-8");     /* encoded surrogate */
    REFUSE("\"\xf4\x90\x80\x80\"", 1, "invalid UTF-8"); /* above U+10FFFF */
    REFUSE("\"\xe2\x82\"", 1, "invalid UTF-8");         /* truncated sequence */
    REFUSE("\"\xff\"", 1, "invalid UTF-8");
    REFUSE("[\"a\0b\"]", 3, "control character 0x00");

    char deep[2 * SP_JSON_MAX_DEPTH + 3];
    for (int k = 0; k <= SP_JSON_MAX_DEPTH; k++) deep[k] = '[', deep[2 * SP_JSON_MAX_DEPTH + 1 - k] = ']';
    refuse(deep, 2 * SP_JSON_MAX_DEPTH + 2, SP_JSON_MAX_DEPTH, "nesting deeper than");
    char longnum[SP_JSON_MAX_NUMBER + 2];
    memset(longnum, '1', sizeof longnum);
    refuse(longnum, sizeof longnum, 0, "longer than");
}

/* A process that switched LC_NUMERIC to a comma locale must still read 1.5 as 1.5. */
static void locale_independent(void) {
    const char *names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "C.UTF-8"};
    const char *used = NULL;
    for (size_t k = 0; k < sizeof names / sizeof names[0] && !used; k++)
        if (setlocale(LC_NUMERIC, names[k])) used = names[k];
    sp_json_doc d;
    double x = 0;
    CHECK(parse(&d, "[1.5, 2.25e1]") == SPLASH_OK && sp_json_double(sp_json_at(sp_json_root(&d), 0), &x) && x == 1.5 &&
              sp_json_double(sp_json_at(sp_json_root(&d), 1), &x) && x == 22.5,
          "decimals read the same under LC_NUMERIC=%s", used ? used : "C (no other locale installed)");
    sp_json_free(&d);
    setlocale(LC_NUMERIC, "C");
}

int main(void) {
    accepts();
    refuses();
    locale_independent();
    return check_done("json_test");
}
