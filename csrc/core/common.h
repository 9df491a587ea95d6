/* csrc/core/common.h — what every kernel family shares: the ISA enum and the
 * CPU feature probe, the OpenMP helpers, the inline/restrict macros, aligned
 * allocation.  (csrc/core/simd.h adds the intrinsics/SIMDe switch for the
 * per-ISA body files; csrc/core/alloc.h is the caching array allocator.)
 *
 * Design: kernels are `static` C functions in headers, one header per family,
 * included by exactly one Cython module each.  Per-ISA bodies carry a
 * `LC_TARGET_*` attribute so the translation unit itself is built for the
 * baseline ISA; the caller (Python) passes the ISA to use as an argument, so
 * no kernel reads global state and tests can force every path.
 *
 * Threading: every parallel loop is core/team.h's lc_team_for / lc_team_range (lutcore's own
 * thread team; OpenMP only gives the default thread count, and the loop where there are no
 * POSIX threads).  No kernel splits a floating-point reduction differently per thread count.
 */
#ifndef LUTCORE_COMMON_H
#define LUTCORE_COMMON_H

#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if defined(_OPENMP)
#include <omp.h>
#define LC_HAVE_OMP 1
#else
#define LC_HAVE_OMP 0
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif

/* LC_AI: force inlining (small vector helpers of the per-ISA bodies);
 * LC_RESTRICT: C99 restrict, spelled so a C++ or MSVC compiler accepts it. */
#if defined(__GNUC__) || defined(__clang__)
#define LC_AI static inline __attribute__((always_inline))
#else
#define LC_AI static inline
#endif
#if defined(__cplusplus) || defined(_MSC_VER)
#define LC_RESTRICT __restrict
#else
#define LC_RESTRICT restrict
#endif

#define LC_STR_(x) #x
#define LC_STR(x) LC_STR_(x)
#if LC_HAVE_OMP
#define LC_PRAGMA(x) _Pragma(LC_STR(x))
#else
#define LC_PRAGMA(x)
#endif

/* ISA identifiers, ordered: a higher level implies every lower one.  With
 * LC_ISA_AVX512 the caller may add the extensions' bits (LC_ISA_VNNI,
 * LC_ISA_VBMI, LC_ISA_VPOPCNT: AVX512_VPOPCNTDQ): a family picks its body from
 * level and bits (its body table, core/dispatch.h: the level is isa & LC_ISA_LEVEL),
 * so a body that needs VNNI never runs on an AVX-512 CPU without it. */
enum { LC_ISA_GENERIC = 0, LC_ISA_AVX2 = 1, LC_ISA_AVX512 = 2, LC_ISA_VNNI = 4, LC_ISA_VBMI = 8, LC_ISA_VPOPCNT = 16 };
#define LC_ISA_LEVEL 3   /* the level bits of isa (the rest: extension bits) */

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define LC_X86 1
#include <immintrin.h>
#define LC_TARGET_AVX2 __attribute__((target("avx2,fma,f16c,bmi2")))
#define LC_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi2")))
#else
#define LC_X86 0
#endif

/* Detected ISA bits: bit0 avx2(+fma,f16c), bit1 avx512 f/bw/vl/dq,
 * bit2 avx512-vnni, bit3 avx512-vbmi, bit4 avx512-vpopcntdq. */
static int lc_cpu_features(void) {
    int f = 0;
#if LC_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= 1;
    if ((f & 1) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        f |= 2;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 11)
    if ((f & 2) && __builtin_cpu_supports("avx512vnni")) f |= 4;
    if ((f & 2) && __builtin_cpu_supports("avx512vbmi")) f |= 8;
    if ((f & 2) && __builtin_cpu_supports("avx512vpopcntdq")) f |= 16;
#endif
#endif
    return f;
}

static inline size_t lc_round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* 64-byte aligned allocation (NULL on failure), per platform */
#if defined(_WIN32)
#include <malloc.h>
static inline void *lc_aligned_alloc(size_t n) { return _aligned_malloc(n, 64); }
static inline void lc_aligned_free(void *p) { _aligned_free(p); }
#else
static inline void *lc_aligned_alloc(size_t n) { void *p = NULL; return posix_memalign(&p, 64, n) == 0 ? p : NULL; }
static inline void lc_aligned_free(void *p) { free(p); }
#endif

/* The parallel loop every family uses (lutcore's own team). */
#include "core/team.h"

#endif /* LUTCORE_COMMON_H */
