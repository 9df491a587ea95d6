/* csrc/gemm/body.h — the gemm family's two body tables (core/dispatch.h), one per path:
 *   exact     the exact table (products a*b): the micro-kernels here (kernels.h) and the x86
 *             bodies' units and whole calls (gemm/x86/x86.h)
 *   any table the row tables here (table_rows.h) and the x86 bodies' wide units
 * Every driver (drivers.h, table.h, table_packed.h, the decode layer) asks lc_gemm_exact_pick or
 * lc_gemm_table_pick and nothing else; show_config's names are the same entries' (lc_gemm_body_name).
 * Part of the gemm family (gemm.h includes every part; a part includes the parts it uses).
 *
 * An x86 entry's fields that are NULL run its fallback fields: the AVX2 micro-kernels or row
 * tables (also what runs when an x86 unit's scratch allocation fails): same bits.  The x86
 * bodies live in their own translation units (csrc/gemm/x86/); LC_GEMM_SIMDE (setup.py: 1 in
 * the test twins' builds) binds their SIMDe copies.
 */
#ifndef LUTCORE_GEMM_BODY_H
#define LUTCORE_GEMM_BODY_H

#include "core/common.h"
#include "core/dispatch.h"
#include "gemm/x86/x86.h"
#include "gemm/kernels.h"
#include "gemm/table_rows.h"

#ifndef LC_GEMM_SIMDE
#define LC_GEMM_SIMDE 0
#endif
#define LC_GEMM_X(isa, fn) LC_XBODY(LC_GEMM_SIMDE, isa, fn)

/* ------------------------------------------------------------ the exact path */
typedef struct {
    lc_body_head head;
    /* the register tile here, R <= LC_MR rows x one panel, k-pairs [p0, p1) (every entry) */
    void (*mk_exact)(int32_t *, const int16_t *, int64_t, const int8_t *, int64_t, int64_t, int);
    /* the block-scaled tile here (NULL: mk_exact per block + lc_fold_generic) */
    void (*qmk_exact)(float *, const int16_t *, int64_t, const int8_t *, const float *, int64_t, const float *,
                      int64_t, int64_t, int);
    /* an x86 body's work units (gemm/x86/x86.h; NULL: the tiles above) */
    int (*gemm_exact_unit)(int32_t *, int64_t, const int16_t *, int64_t, const int8_t *, int64_t, int64_t);
    int (*qmatmul_exact_unit)(float *, int64_t, const int16_t *, int64_t, const float *, const int8_t *,
                              const float *, int64_t, int64_t, int64_t, int64_t);
    /* exact and block-scaled whole calls (NULL: per unit) */
    int (*x_begin)(lc_gemm_x_call *);
    void (*x_conv)(const lc_gemm_x_call *, int64_t);
    void (*x_unit)(const lc_gemm_x_call *, int64_t, int);
    void (*x_end)(lc_gemm_x_call *);
    /* B's form for the exact whole calls, made once per packed B (NULL: the body has none) */
    size_t (*x_bform_bytes)(int64_t, int64_t);
    void (*x_bform)(uint8_t *, const int8_t *, int64_t, int64_t, int64_t);
} lc_gemm_ebody;

static const lc_gemm_ebody lc_gemm_exact_bodies[] = {
#if LC_X86_BODIES
    {.head = {"avx512vnni (vpdpbusd)", LC_ISA_AVX512 | LC_ISA_VNNI},
     .mk_exact = lc_mk_exact_avx2, .qmk_exact = lc_qmk_exact_avx2,
     .gemm_exact_unit = LC_GEMM_X(avx512vnni, gemm_exact_unit),
     .qmatmul_exact_unit = LC_GEMM_X(avx512vnni, qmatmul_exact_unit),
     .x_begin = LC_GEMM_X(avx512vnni, x_begin), .x_conv = LC_GEMM_X(avx512vnni, x_conv),
     .x_unit = LC_GEMM_X(avx512vnni, x_unit), .x_end = LC_GEMM_X(avx512vnni, x_end),
     .x_bform_bytes = LC_GEMM_X(avx512vnni, x_bform_bytes), .x_bform = LC_GEMM_X(avx512vnni, x_bform)},
    {.head = {"avx512bw (vpmaddwd)", LC_ISA_AVX512},
     .mk_exact = lc_mk_exact_avx2, .qmk_exact = lc_qmk_exact_avx2,
     .gemm_exact_unit = LC_GEMM_X(avx512, gemm_exact_unit),
     .qmatmul_exact_unit = LC_GEMM_X(avx512, qmatmul_exact_unit)},
#endif
#if LC_X86
    {.head = {"avx2", LC_ISA_AVX2}, .mk_exact = lc_mk_exact_avx2, .qmk_exact = lc_qmk_exact_avx2},
#endif
    {.head = {"generic", LC_ISA_GENERIC}, .mk_exact = lc_mk_exact_generic},
};
static inline const lc_gemm_ebody *lc_gemm_exact_pick(int isa) {
    return LC_BODY_PICK(lc_gemm_ebody, lc_gemm_exact_bodies, isa);
}

/* ------------------------------------------------------------ the any-table path */
typedef struct {
    lc_body_head head;
    /* the row tables here, acc += one column block (every entry) */
    void (*accum)(int32_t *, int32_t *, const int8_t *, int64_t, const int8_t *, int64_t, const int32_t *,
                  const int32_t *, int64_t, int64_t, int, int64_t, int64_t);
    /* an x86 body's wide unit (<= LC_TABLE_WNB columns; NULL: the row tables above), reading the
     * table in the form lc_table16_rows(planes) makes: 0 int16 rows, 1 byte planes */
    int (*table_unit)(int32_t *, int64_t, const int8_t *, int64_t, const int8_t *, int64_t, const int16_t *,
                      int64_t, int64_t, int, int64_t, int64_t);
    int planes;
    /* the unit's staged B (a packed B holds it per weight: table_packed.h) */
    size_t (*table_stage_bytes)(int64_t, int);
    void (*table_stage)(uint8_t *, const int8_t *, int64_t, int64_t, int, int64_t, int64_t);
    int (*table_unit_staged)(int32_t *, int64_t, const int8_t *, int64_t, const uint8_t *, const int16_t *, int64_t,
                             int, int64_t);
} lc_gemm_tbody;

#define LC_GEMM_X_TABLE(isa) .table_unit = LC_GEMM_X(isa, table_unit), \
    .table_stage_bytes = LC_GEMM_X(isa, table_stage_bytes), .table_stage = LC_GEMM_X(isa, table_stage), \
    .table_unit_staged = LC_GEMM_X(isa, table_unit_staged)
static const lc_gemm_tbody lc_gemm_table_bodies[] = {
#if LC_X86_BODIES
    /* VBMI (+ VNNI): over the table's byte planes */
    {.head = {"avx512vbmi (vpermi2b)", LC_ISA_AVX512 | LC_ISA_VNNI | LC_ISA_VBMI}, .accum = lc_table_accum_avx2,
     .planes = 1, LC_GEMM_X_TABLE(avx512vbmi)},
    /* AVX-512 BW (with or without VNNI: the table path needs none) */
    {.head = {"avx512bw (vpermi2w)", LC_ISA_AVX512}, .accum = lc_table_accum_avx2, .planes = 0,
     LC_GEMM_X_TABLE(avx512)},
#endif
#if LC_X86
    {.head = {"avx2", LC_ISA_AVX2}, .accum = lc_table_accum_avx2},
#endif
    {.head = {"generic", LC_ISA_GENERIC}, .accum = lc_table_accum_generic},
};
static inline const lc_gemm_tbody *lc_gemm_table_pick(int isa) {
    return LC_BODY_PICK(lc_gemm_tbody, lc_gemm_table_bodies, isa);
}

/* Names of the bodies `isa` runs, for show_config: which = 0 exact, 1 block-scaled, 2 any table. */
static const char *lc_gemm_body_name(int isa, int which) {
    return which == 2 ? lc_gemm_table_pick(isa)->head.name : lc_gemm_exact_pick(isa)->head.name;
}

#endif /* LUTCORE_GEMM_BODY_H */
