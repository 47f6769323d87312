#version 460
// vulkan_coopmat_lab.comp — the probes of native/tools/vulkan_coopmat_lab.c: what bounds a KHR cooperative-matrix GEMM on a device,
// one stage at a time. Every probe computes C = A · Bᵀ-style products of 16 × 16 × K fragments in one subgroup of 32.
//   MODE 0  PEAK    products only: FM × FN accumulators per subgroup, FM + FN fragments loaded once from shared
//                   memory, then `iters` rounds of FM·FN coopMatMulAdd on registers (TY: 0 f16→f32, 1 f16→f16,
//                   2 s8→s32)
//   MODE 1  SHMEM   the GEMM's inner loop with its tiles loaded once: a BM × BN workgroup tile in shared memory, each
//                   subgroup WM × WN of it, `k` columns in steps of BK, fragments loaded from shared memory each step
//   MODE 2  STAGED  the whole f16 GEMM (A: [m][k] f16, B: [n][k] f16, C: [n][m] f32): every step the BM × BK and
//                   BN × BK tiles go global → shared (16-byte loads), then MODE 1's products; DB=1 double-buffers
//                   the tiles (the next step's global loads issued before the products, stored after them)
// SH: the shared arrays' element type (0 uvec4, 1 uint, 2 float16_t). UNROLLED=1 names every accumulator instead of
// indexing an array (PEAK only), to see whether array indexing costs.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x_id = 0) in;
layout(push_constant) uniform P {
    uint64_t a, b, c;
    uint iters, m, n, k;
} p;

layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Uvec4s { uvec4 v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Floats { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Uints { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Ints { int v[]; };

#ifndef SH
#define SH 0
#endif
#if SH == 0
#define SHT uvec4
#define PER 8u  // halves per element
#elif SH == 1
#define SHT uint
#define PER 2u
#else
#define SHT float16_t
#define PER 1u
#endif

#ifndef TY
#define TY 0
#endif
#if TY == 2
#define TA int8_t
#define TC int
#define KK 32
#define CBUF Ints
#else
#define TA float16_t
#define KK 16
#if TY == 1
#define TC float16_t
#define CBUF Uints
#else
#define TC float
#define CBUF Floats
#endif
#endif
#define MatA coopmat<TA, gl_ScopeSubgroup, 16, KK, gl_MatrixUseA>
#define MatB coopmat<TA, gl_ScopeSubgroup, KK, 16, gl_MatrixUseB>
#define MatC coopmat<TC, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Stores a uvec4 of 8 halves (or 16 bytes) at element e8 (in 8-half units) of a shared array of SHT.
#if SH == 0
#define PUT(arr, e8, u) arr[e8] = u
#elif SH == 1
#define PUT(arr, e8, u) { arr[(e8) * 4u] = u.x; arr[(e8) * 4u + 1u] = u.y; arr[(e8) * 4u + 2u] = u.z; arr[(e8) * 4u + 3u] = u.w; }
#else
#define PUT(arr, e8, u) [[unroll]] for (uint q_ = 0u; q_ < 4u; q_++) { f16vec2 h_ = unpackFloat2x16(u[q_]); arr[(e8) * 8u + 2u * q_] = h_.x; arr[(e8) * 8u + 2u * q_ + 1u] = h_.y; }
#endif

#if MODE == 0
#ifndef FM
#define FM 2
#define FN 2
#endif
#define WGS (gl_WorkGroupSize.x / 32u)
// each subgroup's FM + FN fragments: 16 rows of KK elements, padded by 16 bytes
#define FROW (KK * (TY == 2 ? 1u : 2u) / 16u + 1u)  // a fragment row in uvec4
shared uvec4 frag[(FM + FN) * 16 * (KK * (TY == 2 ? 1 : 2) / 16 + 1)];  // one set, every subgroup multiplies it

void main() {
    uint sg = gl_SubgroupID;
    uint words = (FM + FN) * 16u * FROW;
    for (uint i = gl_LocalInvocationID.x; i < words; i += gl_WorkGroupSize.x) frag[i] = Uvec4s(p.a).v[i];
    barrier();
    MatA a[FM];
    MatB b[FN];
    [[unroll]] for (uint i = 0u; i < FM; i++) coopMatLoad(a[i], frag, i * 16u * FROW, FROW, gl_CooperativeMatrixLayoutRowMajor);
    [[unroll]] for (uint j = 0u; j < FN; j++) coopMatLoad(b[j], frag, (FM + j) * 16u * FROW, FROW, gl_CooperativeMatrixLayoutColumnMajor);
#if UNROLLED && FM == 2 && FN == 2
    MatC c00 = MatC(TC(0));
    MatC c01 = MatC(TC(0));
    MatC c10 = MatC(TC(0));
    MatC c11 = MatC(TC(0));
    for (uint it = 0u; it < p.iters; it++) {
        c00 = coopMatMulAdd(a[0], b[0], c00);
        c01 = coopMatMulAdd(a[0], b[1], c01);
        c10 = coopMatMulAdd(a[1], b[0], c10);
        c11 = coopMatMulAdd(a[1], b[1], c11);
    }
    MatC s = c00 + c01 + c10 + c11;
#else
    MatC acc[FM][FN];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = MatC(TC(0));
    for (uint it = 0u; it < p.iters; it++)
        [[unroll]] for (uint i = 0u; i < FM; i++)
            [[unroll]] for (uint j = 0u; j < FN; j++) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
    MatC s = acc[0][0];
    [[unroll]] for (uint i = 0u; i < FM; i++)
        [[unroll]] for (uint j = 0u; j < FN; j++)
            if (i + j > 0u) s = s + acc[i][j];
#endif
    uint g = gl_WorkGroupID.x * WGS + sg;
    coopMatStore(s, CBUF(p.c).v, g * 256u / (TY == 1 ? 2u : 1u), 16u / (TY == 1 ? 2u : 1u), gl_CooperativeMatrixLayoutRowMajor);
}

#else  // MODE 1, 2

#ifndef BM
#define BM 128
#define BN 128
#define BK 32
#define WM 64
#define WN 32
#endif
#ifndef DB
#define DB 0
#endif
#define THREADS ((BM / WM) * (BN / WN) * 32)
#define ROW8 (BK / 8 + 1)            // a tile row in 8-half units: BK halves and 16 bytes of padding
#define STR (ROW8 * 8u / PER)        // the same in SHT elements
#define A_LOADS (BM * BK / 8 / THREADS)
#define B_LOADS (BN * BK / 8 / THREADS)
#if A_LOADS * THREADS * 8 != BM * BK || B_LOADS * THREADS * 8 != BN * BK
#error "tile loads must divide evenly"
#endif
#define NBUF (DB + 1)
shared SHT As[NBUF][BM * ROW8 * 8 / PER];
shared SHT Bs[NBUF][BN * ROW8 * 8 / PER];

uint m0, n0;
uvec4 ar[A_LOADS], br[B_LOADS];

void fetch(uint k0) {
    uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < A_LOADS; i++) {
        uint t = tid + i * THREADS, r = t / (BK / 8u), c = k0 + (t % (BK / 8u)) * 8u;
        ar[i] = Uvec4s(p.a + (uint64_t(m0 + r) * p.k + c) * 2ul).v[0];
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; i++) {
        uint t = tid + i * THREADS, r = t / (BK / 8u), c = k0 + (t % (BK / 8u)) * 8u;
        br[i] = Uvec4s(p.b + (uint64_t(n0 + r) * p.k + c) * 2ul).v[0];
    }
}

void stash(uint buf) {
    uint tid = gl_LocalInvocationID.x;
    [[unroll]] for (uint i = 0u; i < A_LOADS; i++) {
        uint t = tid + i * THREADS, r = t / (BK / 8u), q = t % (BK / 8u);
        PUT(As[buf], r * ROW8 + q, ar[i]);
    }
    [[unroll]] for (uint i = 0u; i < B_LOADS; i++) {
        uint t = tid + i * THREADS, r = t / (BK / 8u), q = t % (BK / 8u);
        PUT(Bs[buf], r * ROW8 + q, br[i]);
    }
}

void main() {
    m0 = gl_WorkGroupID.x * BM;
    n0 = gl_WorkGroupID.y * BN;
    uint warp = gl_SubgroupID, wm = (warp % (BM / WM)) * WM, wn = (warp / (BM / WM)) * WN;
    MatC acc[WM / 16][WN / 16];
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) acc[i][j] = MatC(TC(0));

#if MODE == 1
    fetch(0u);
    stash(0u);
    for (uint k0 = 0u; k0 < p.k; k0 += BK) {
        barrier();
        uint buf = 0u;
#else
    fetch(0u);
#if DB
    stash(0u);
#endif
    for (uint k0 = 0u; k0 < p.k; k0 += BK) {
#if DB
        uint buf = (k0 / BK) & 1u;
        barrier();  // the step before last is done with buffer buf ^ 1; buf was stored before that barrier
        if (k0 + BK < p.k) fetch(k0 + BK);
#else
        uint buf = 0u;
        barrier();
        stash(0u);
        barrier();
        if (k0 + BK < p.k) fetch(k0 + BK);
#endif
#endif
        [[unroll]] for (uint k = 0u; k < BK / 16u; k++) {
            MatA a[WM / 16];
            [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
                coopMatLoad(a[i], As[buf], ((wm + i * 16u) * ROW8 + 2u * k) * 8u / PER, STR, gl_CooperativeMatrixLayoutRowMajor);
            [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
                MatB b;
                coopMatLoad(b, Bs[buf], ((wn + j * 16u) * ROW8 + 2u * k) * 8u / PER, STR, gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (uint i = 0u; i < WM / 16u; i++) acc[i][j] = coopMatMulAdd(a[i], b, acc[i][j]);
            }
        }
#if MODE == 2 && DB
        if (k0 + BK < p.k) stash(buf ^ 1u);
#endif
    }
    [[unroll]] for (uint i = 0u; i < WM / 16u; i++)
        [[unroll]] for (uint j = 0u; j < WN / 16u; j++) {
            uint off = (n0 + wn + j * 16u) * p.m + m0 + wm + i * 16u;
            coopMatStore(acc[i][j], Floats(p.c).v, off, p.m, gl_CooperativeMatrixLayoutColumnMajor);
        }
}
#endif
