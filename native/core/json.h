/* json.h — a small strict JSON parser (RFC 8259) for safetensors headers and config.json.
 *
 * One call parses a whole text into a flat array of nodes in document order; lookups walk that array and never
 * allocate. Strict: no comments, no trailing commas, no NaN/Infinity, no leading zeros, no control characters or
 * invalid UTF-8 in strings, no lone surrogates, nothing but whitespace after the value. Duplicate object keys are
 * kept (sp_json_get returns the first); callers that need unique keys (tensor names) check them.
 *
 * Numbers: an integral literal (no fraction, no exponent) that fits int64 is SP_JSON_INT, exact; any other number
 * is SP_JSON_DOUBLE (correctly rounded by the C library, independent of the process locale). Number literals
 * longer than SP_JSON_MAX_NUMBER bytes are refused.
 *
 * Strings are unescaped (\uXXXX including surrogate pairs become UTF-8) into one buffer the document owns, each
 * NUL-terminated; `len` counts bytes and may include an escaped \u0000.
 *
 * Nesting deeper than SP_JSON_MAX_DEPTH is refused, so hostile input cannot exhaust the stack.
 *
 *   sp_json_doc doc;
 *   if (sp_json_parse(&doc, text, len) != SPLASH_OK) return ...;   // splash_last_error() / doc.error say where
 *   const sp_json *tc = sp_json_get(sp_json_root(&doc), "text_config");
 *   int64_t hidden;
 *   if (!sp_json_int(sp_json_get(tc, "hidden_size"), &hidden)) ...;
 *   for (const sp_json *e = sp_json_first(obj); e; e = sp_json_next(obj, e)) use(e->key, e);
 *   sp_json_free(&doc);
 */
#ifndef SP_JSON_H
#define SP_JSON_H

#include "splash.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_JSON_MAX_DEPTH 64
#define SP_JSON_MAX_NUMBER 400

typedef enum sp_json_type {
    SP_JSON_NULL,
    SP_JSON_BOOL,
    SP_JSON_INT,    /* integral literal that fits int64: `i` is exact */
    SP_JSON_DOUBLE, /* any other number: `d` */
    SP_JSON_STRING, /* `s`, `len` bytes plus a NUL */
    SP_JSON_ARRAY,  /* `len` elements */
    SP_JSON_OBJECT, /* `len` members; each member value carries its `key` */
} sp_json_type;

typedef struct sp_json {
    sp_json_type type;
    const char *key; /* member of an object: its unescaped key, NUL-terminated; else NULL */
    size_t key_len;
    size_t len;      /* string bytes, or number of children of an array/object */
    size_t span;     /* nodes in this subtree including itself: the next sibling is this + span */
    union {
        bool b;
        int64_t i;
        double d;
        const char *s;
    } v;
} sp_json;

typedef struct sp_json_doc {
    sp_json *nodes; /* nodes[0] is the root; document order */
    size_t n_nodes, cap_nodes;
    char *strings;  /* every unescaped key and string, NUL-terminated */
    size_t error_offset; /* on failure: byte offset into the text where parsing stopped */
    char error[160];     /* on failure: "byte N: what was expected" */
} sp_json_doc;

/* Parses text[0..len) (need not be NUL-terminated). On failure returns SPLASH_ERR_FORMAT (or OUT_OF_MEMORY), sets the
 * thread's last error to "JSON: byte N: ...", fills doc->error / error_offset, and leaves nothing to free. */
splash_status sp_json_parse(sp_json_doc *doc, const char *text, size_t len);
void sp_json_free(sp_json_doc *doc);

static inline const sp_json *sp_json_root(const sp_json_doc *doc) { return doc->n_nodes ? &doc->nodes[0] : NULL; }

/* Object member by key (first match), or NULL when `obj` is NULL, not an object, or lacks the key. */
const sp_json *sp_json_get(const sp_json *obj, const char *key);
/* Array element i, or NULL when out of range or `arr` is not an array. O(i). */
const sp_json *sp_json_at(const sp_json *arr, size_t i);
/* Children of an array or object in order: first child (NULL if none), then the one after `child`. */
const sp_json *sp_json_first(const sp_json *container);
const sp_json *sp_json_next(const sp_json *container, const sp_json *child);

/* Typed reads: true and *out set when `v` is non-NULL and of a fitting type, else false and *out untouched.
 * sp_json_int accepts SP_JSON_INT only; sp_json_double accepts INT and DOUBLE. */
bool sp_json_int(const sp_json *v, int64_t *out);
bool sp_json_double(const sp_json *v, double *out);
bool sp_json_bool(const sp_json *v, bool *out);
/* NUL-terminated string or NULL when `v` is not a string. */
const char *sp_json_string(const sp_json *v);
/* Name of a type for messages: "null", "bool", "integer", "number", "string", "array", "object". */
const char *sp_json_type_name(sp_json_type t);

#endif
