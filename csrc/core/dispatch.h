/* csrc/core/dispatch.h — how every kernel family picks the body that runs for an `isa`
 * argument, and names it for show_config.
 *
 * Design: a family keeps ONE table of its bodies, a static const array of its own body
 * struct whose first member is an lc_body_head — the name show_config prints and what the
 * body needs of `isa`: a level (LC_ISA_GENERIC, LC_ISA_AVX2, LC_ISA_AVX512) or'ed with the
 * extension bits it uses (LC_ISA_VNNI, LC_ISA_VBMI).  Entries go best first, the generic
 * body last (it needs nothing).  LC_BODY_PICK returns the first entry `isa` meets — its level
 * at least the entry's and every extension bit the entry names — so the pick never fails,
 * and the body that runs and the name printed are read from the same entry.  One pick per
 * call (or per work item): a few compares over a handful of entries, nothing per element.
 *
 * An entry exists only where its code is built: the AVX2 bodies of a family header (the
 * LC_TARGET_AVX2 attribute) under LC_X86, the bodies of a family's x86/<isa>.c files (their
 * own translation units, own flags) under LC_X86_BODIES.  LC_XBODY(simde, isa, fn) names such
 * a body: lc_<isa>_<fn>, or its SIMDe twin lc_simde_<isa>_<fn> where `simde` is 1 — a family
 * passes its LC_<FAMILY>_SIMDE macro, which setup.py sets to 1 in the test twin's build
 * (the family defaults it to 0).
 *
 *   typedef struct { lc_body_head head; void (*rows)(...); } lc_foo_body;
 *   static const lc_foo_body lc_foo_bodies[] = {
 *   #if LC_X86_BODIES
 *       {{"avx512", LC_ISA_AVX512}, LC_XBODY(LC_FOO_SIMDE, avx512, foo_rows)},
 *   #endif
 *   #if LC_X86
 *       {{"avx2", LC_ISA_AVX2}, lc_foo_rows_avx2},
 *   #endif
 *       {{"generic", LC_ISA_GENERIC}, lc_foo_rows_generic},
 *   };
 *   LC_BODY_TABLE(lc_foo_body, lc_foo, lc_foo_bodies)   -> lc_foo_pick(isa), lc_foo_body_name(isa)
 */
#ifndef LUTCORE_CORE_DISPATCH_H
#define LUTCORE_CORE_DISPATCH_H

#include "core/common.h"

/* 1 where setup.py links the per-ISA body libraries (x86-64 builds) */
#if LC_X86 && defined(LC_HAVE_X86_BODIES)
#define LC_X86_BODIES 1
#else
#define LC_X86_BODIES 0
#endif

typedef struct {
    const char *name;    /* show_config's name of the body */
    int needs;           /* level | extension bits */
} lc_body_head;

/* whether `isa` runs a body that needs `needs` */
static inline int lc_isa_meets(int isa, int needs) {
    const int ext = needs & ~LC_ISA_LEVEL;
    return (isa & LC_ISA_LEVEL) >= (needs & LC_ISA_LEVEL) && (isa & ext) == ext;
}

/* the first of n entries (size bytes each, an lc_body_head first) that isa meets; the last
 * (the generic body) when none before it does */
static inline const void *lc_body_pick(const void *table, size_t size, size_t n, int isa) {
    const char *e = (const char *)table;
    for (size_t i = 0; i + 1 < n && !lc_isa_meets(isa, ((const lc_body_head *)e)->needs); i++) e += size;
    return e;
}
#define LC_BODY_PICK(T, table, isa) \
    ((const T *)lc_body_pick((table), sizeof(T), sizeof(table) / sizeof((table)[0]), (isa)))

/* `const T *P_pick(int isa)` and `const char *P_body_name(int isa)` over the table */
#define LC_BODY_TABLE(T, P, table)                                                       \
    static inline const T *P##_pick(int isa) { return LC_BODY_PICK(T, table, isa); }      \
    static inline const char *P##_body_name(int isa) { return P##_pick(isa)->head.name; }

/* a body of a family's x86/<isa>.c: native, or (simde = 1) its SIMDe twin */
#define LC_XBODY(simde, isa, fn) LC_XBODY_(simde, isa, fn)
#define LC_XBODY_(simde, isa, fn) LC_XBODY_##simde(isa, fn)
#define LC_XBODY_0(isa, fn) lc_##isa##_##fn
#define LC_XBODY_1(isa, fn) lc_simde_##isa##_##fn

#endif /* LUTCORE_CORE_DISPATCH_H */
