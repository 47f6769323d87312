/* check.h — the few macros the C test programs share: each check prints OK/NOT OK with evidence, and the program
 * exits non-zero if any failed (test_gpt2.c style; STYLE.md §6). */
#ifndef SP_TEST_CHECK_H
#define SP_TEST_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_count;

/* CHECK(cond, fmt, ...): one named check; the message says what was compared. */
#define CHECK(cond, ...)                                                                                            \
    do {                                                                                                            \
        check_count++;                                                                                              \
        if (cond) {                                                                                                 \
            printf("OK      ");                                                                                     \
        } else {                                                                                                    \
            check_failures++;                                                                                       \
            printf("NOT OK  %s:%d: ", __FILE__, __LINE__);                                                          \
        }                                                                                                           \
        printf(__VA_ARGS__);                                                                                        \
        printf("\n");                                                                                               \
    } while (0)

/* Prints the summary line the TS tests look for and returns the exit status. */
static inline int check_done(const char *name) {
    printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
    return check_failures ? 1 : 0;
}

#endif
