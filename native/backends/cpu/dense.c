/* dense.c — matmul and embedding lookup over sp_matrix weights (kernels in core/quant + backends/cpu/matmul). */
#include "ops.h"

#include "backends/cpu/matmul.h"
#include "core/quant.h"

void sp_cpu_matmul(const sp_backend *be, float *y, const sp_matrix *W, const float *x, int64_t n) {
    splash_status st = sp_matmul(be->pool, y, W, x, n);
    if (st && *be->status == SPLASH_OK) *be->status = st;
}

void sp_cpu_embed(const sp_backend *be, float *x, const sp_matrix *table, const int32_t *tokens, int64_t n) {
    for (int64_t i = 0; i < n; i++) sp_matrix_row_f32(table, tokens[i], x + i * table->cols);
}
