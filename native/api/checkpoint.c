/* checkpoint.c — splash_checkpoint_*: a checkpoint directory's files, checked as the loader checks them, for the
 * binding's listing and download checks (one definition of which files a checkpoint is and where they may be). */
#include "splash.h"

#include "core/checkpoint.h"
#include "core/error.h"

#include <stdlib.h>

struct splash_checkpoint {
    sp_checkpoint *ck;
};

splash_status splash_checkpoint_open(const char *dir, splash_checkpoint **out) {
    if (!out) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_checkpoint_open: out is NULL");
    *out = NULL;
    if (!dir) return SP_FAIL(SPLASH_ERR_INVALID_ARGUMENT, "splash_checkpoint_open: dir is NULL");
    splash_checkpoint *c = calloc(1, sizeof *c);
    if (!c) return SP_FAIL(SPLASH_ERR_OUT_OF_MEMORY, "out of memory");
    splash_status st = sp_checkpoint_open_headers(dir, &c->ck);
    if (st) {
        free(c);
        return st;
    }
    *out = c;
    return SPLASH_OK;
}

void splash_checkpoint_close(splash_checkpoint *c) {
    if (!c) return;
    sp_checkpoint_close(c->ck);
    free(c);
}

int64_t splash_checkpoint_tensor_count(const splash_checkpoint *c) { return c ? (int64_t)sp_checkpoint_count(c->ck) : 0; }

const char *splash_checkpoint_file(const splash_checkpoint *c, int32_t i, uint64_t *bytes) {
    if (bytes) *bytes = 0;
    if (!c || i < 0 || (size_t)i >= sp_checkpoint_file_count(c->ck)) return NULL;
    if (bytes) *bytes = sp_checkpoint_file_bytes(c->ck, (size_t)i);
    return sp_checkpoint_file_name(c->ck, (size_t)i);
}
