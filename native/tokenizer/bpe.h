/* bpe.h — byte-level BPE over one pre-tokenized piece, exactly as Hugging Face tokenizers' BPE model does it:
 * start from one token per byte, repeatedly merge the adjacent pair with the lowest merge rank (leftmost on ties),
 * optionally take a piece that is itself a vocabulary entry whole (`ignore_merges`). Results are cached per piece. */
#ifndef SP_TOKENIZER_BPE_H
#define SP_TOKENIZER_BPE_H

#include "splash.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct sp_bpe sp_bpe;

/* Token i's bytes are bytes[offsets[i] .. offsets[i+1]); an empty entry is an id the vocabulary does not use.
 * merges holds n_merges pairs (left id, right id) in rank order; a later duplicate pair overrides an earlier one,
 * as in tokenizers. The tables are copied. */
splash_status sp_bpe_create(const uint8_t *bytes, const uint32_t *offsets, int32_t n_tokens, const int32_t *merges,
                            int32_t n_merges, bool ignore_merges, sp_bpe **out);
void sp_bpe_free(sp_bpe *b);

/* Appends the ids of one piece to out (room for n ids is enough: every token has at least one byte). Returns the
 * number of ids written, or -1 when out of memory. Bytes with no token of their own are dropped, as tokenizers does
 * without an unknown token. */
int32_t sp_bpe_encode(sp_bpe *b, const uint8_t *piece, int32_t n, int32_t *out);

#endif
