#include "cpu.h"

#include "splash.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

void sp_cpu_detect(sp_cpu *cpu) {
    memset(cpu, 0, sizeof *cpu);
#if defined(__x86_64__)
    __builtin_cpu_init();
    cpu->avx2 = __builtin_cpu_supports("avx2");
    cpu->fma = __builtin_cpu_supports("fma");
    cpu->f16c = __builtin_cpu_supports("f16c");
    cpu->avx512f = __builtin_cpu_supports("avx512f");
    cpu->avx512bw = __builtin_cpu_supports("avx512bw");
    cpu->avx512vl = __builtin_cpu_supports("avx512vl");
    cpu->avx512vnni = __builtin_cpu_supports("avx512vnni");
    cpu->avxvnni = __builtin_cpu_supports("avxvnni");
#elif defined(__aarch64__)
    cpu->neon = true; /* mandatory on arm64 */
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    cpu->dotprod = (hw & HWCAP_ASIMDDP) != 0;
    cpu->i8mm = (hw2 & HWCAP2_I8MM) != 0;
#elif defined(__APPLE__)
    cpu->dotprod = true; /* every Apple Silicon chip has it */
    cpu->i8mm = false;
#endif
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu->n_cores = n > 0 ? (int)n : 1;
}

const char *splash_cpu_features(void) {
    static _Thread_local char buf[128];
    sp_cpu c;
    sp_cpu_detect(&c);
    buf[0] = 0;
    const struct { bool on; const char *name; } f[] = {
        {c.avx2, "avx2"}, {c.fma, "fma"}, {c.f16c, "f16c"}, {c.avx512f, "avx512f"}, {c.avx512bw, "avx512bw"},
        {c.avx512vl, "avx512vl"}, {c.avx512vnni, "avx512vnni"}, {c.avxvnni, "avxvnni"}, {c.neon, "neon"},
        {c.dotprod, "dotprod"}, {c.i8mm, "i8mm"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!f[i].on) continue;
        if (buf[0]) strncat(buf, " ", sizeof buf - strlen(buf) - 1);
        strncat(buf, f[i].name, sizeof buf - strlen(buf) - 1);
    }
    return buf;
}
