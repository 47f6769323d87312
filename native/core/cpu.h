/* cpu.h — what the running CPU can do, detected once; per-ISA kernels are chosen from it at load. */
#ifndef SP_CPU_H
#define SP_CPU_H

#include <stdbool.h>

typedef struct sp_cpu {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avxvnni; /* x86-64 */
    bool neon, dotprod, i8mm;                                     /* arm64 */
    int n_cores;                                                  /* online logical cores */
} sp_cpu;

/* Fills *cpu from the running machine. Cheap; call at model load. */
void sp_cpu_detect(sp_cpu *cpu);

/* Whether the CPU runs the code of *_avx2.c files (built with -mavx2 -mfma -mf16c), of *_avxvnni.c files (AVX-VNNI
 * besides) and of *_avx512.c files (AVX-512 F, BW, VL and VNNI besides; scripts/build/native.ts). */
static inline bool sp_cpu_avx2(const sp_cpu *c) { return c->avx2 && c->fma && c->f16c; }
static inline bool sp_cpu_avxvnni(const sp_cpu *c) { return sp_cpu_avx2(c) && c->avxvnni; }
static inline bool sp_cpu_avx512(const sp_cpu *c) {
    return sp_cpu_avx2(c) && c->avx512f && c->avx512bw && c->avx512vl && c->avx512vnni;
}

#endif
