/* regex.h — the pre-tokenizer's regular expressions: a small backtracking matcher for the Oniguruma syntax that
 * tokenizer.json Split patterns use (Hugging Face tokenizers matches them with Oniguruma).
 *
 * Supported: alternation, groups ( ), (?: ), (?i: ) for literal characters, lookahead (?= ) and (?! ), quantifiers
 * ? * + {n} {n,} {n,m} and their lazy forms, '.', classes [...] / [^...] with ranges, \p{X} / \P{X} for general
 * categories (L, Lu, M, N, Nd, P, S, Z, C and their subcategories), \s \S \d \D \w \W, escapes \r \n \t \f \v \xHH
 * \x{H..} \uHHHH. Semantics are Oniguruma's: leftmost-first alternation, greedy quantifiers with backtracking, \s is
 * Unicode White_Space, \d is Nd, \w is L|M|Nd|Pc, '.' is anything but \n. Anything else (anchors, backreferences,
 * possessive quantifiers, named groups, (?i) on classes) is refused at compile time with the construct and offset.
 */
#ifndef SP_TOKENIZER_REGEX_H
#define SP_TOKENIZER_REGEX_H

#include "splash.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sp_regex sp_regex;
/* Backtracking stack reused across matches; one per thread of use. Zero-initialize, free with sp_regex_stack_free. */
typedef struct sp_regex_stack {
    int64_t *items; /* pairs (pc, pos) */
    size_t n, cap;
} sp_regex_stack;

splash_status sp_regex_compile(const char *pattern, sp_regex **out);
void sp_regex_free(sp_regex *re);
void sp_regex_stack_free(sp_regex_stack *st);
/* True when the whole pattern can match the empty string. */
bool sp_regex_nullable(const sp_regex *re);

/* The end of the leftmost-first match that starts exactly at byte `pos` of the UTF-8 `text`: >= pos, or -1 when
 * there is none, or -2 when the backtracking stack could not grow (out of memory). */
int64_t sp_regex_match_at(const sp_regex *re, sp_regex_stack *st, const uint8_t *text, int64_t len, int64_t pos);

#endif
