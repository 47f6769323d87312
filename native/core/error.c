#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Thread-local so concurrent callers (server threads, tests) never read each other's messages. */
static _Thread_local char last_error[1024];

splash_status sp_fail(splash_status status, const char *file, int line, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    int n = snprintf(last_error, sizeof last_error, "%s:%d: ", base ? base + 1 : file, line);
    if (n < 0 || (size_t)n >= sizeof last_error) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

void sp_clear_error(void) { last_error[0] = 0; }

const char *splash_last_error(void) { return last_error; }
