/* error.h — per-thread last-error message, and the macro every failing path uses to set it. */
#ifndef SP_ERROR_H
#define SP_ERROR_H

#include "splash.h"

/* Record a failure for splash_last_error() and return `status`. The message is prefixed with the C file and line
 * so a report points at the code that refused. Usage: return SP_FAIL(SPLASH_ERR_FORMAT, "tensor %s: ...", name); */
#define SP_FAIL(status, ...) sp_fail((status), __FILE__, __LINE__, __VA_ARGS__)

splash_status sp_fail(splash_status status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void sp_clear_error(void);

#endif
