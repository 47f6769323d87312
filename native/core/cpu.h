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

#endif
