/* csrc/netlist/x86/x86.h — the netlist family's AVX-512 bodies, each in its own translation unit
 * (csrc/netlist/x86/avx512.c: AVX-512 F/BW; avx512_vpopcnt.c: the same source with vpopcntq,
 * AVX512_VPOPCNTDQ), compiled alone with their flags; their SIMDe copies back the test-only
 * extension lutcore._native._simde_netlist.  Included by netlist.h, whose generic bodies of the
 * same names give the contract (and the bits):
 *   nl_run     one pass of LC_NL_X86_WORDS words: the plan's gates, then the masked weighted
 *              popcounts per word (acc) or the product bit planes (outp)
 *   nl_planes  operand codes into bit planes
 *   nl_values  product bit planes into int64 values
 *   nl_gather  a table row's product patterns at a run of codes (the accumulator, accum.h)
 *   nl_acc_post  an adder pass's outputs into the register planes and the overflow counts
 */
#ifndef LUTCORE_NETLIST_X86_H
#define LUTCORE_NETLIST_X86_H

#include <stdint.h>
#include "netlist/plan.h"

#ifndef LC_ACC_CNT_BITS
#define LC_ACC_CNT_BITS 40                     /* the accumulator's overflow counters: bit planes */
#endif
#define LC_NL_X86_U 8                          /* zmm a slot */
#define LC_NL_X86_WORDS (8 * LC_NL_X86_U)      /* words a pass */

#define LC_NL_X86_DECLARE(P)                                                                          \
    void P##nl_run(const lc_nl_plan *Pl, uint64_t *nets, const uint64_t *a, int64_t as, const uint64_t *b, \
                   int64_t bs, const uint64_t *mask, int64_t *acc, uint64_t *outp, int64_t os);        \
    void P##nl_planes(uint64_t *out, int64_t os, const uint16_t *x, int64_t n, int bits);               \
    void P##nl_values(int64_t *out, const uint64_t *pl, int64_t ps, int64_t n, int p_bits, int psigned);   \
    void P##nl_gather(uint16_t *x, const uint16_t *row, const uint16_t *b, int64_t n, uint16_t bm);      \
    void P##nl_acc_post(const uint64_t *O, uint64_t *R, const uint64_t *D, uint64_t *CP, int64_t TW, int W, \
                        int ob, int sgn, int sat, int count);

LC_NL_X86_DECLARE(lc_avx512_)
LC_NL_X86_DECLARE(lc_simde_avx512_)
LC_NL_X86_DECLARE(lc_avx512vpopcnt_)
LC_NL_X86_DECLARE(lc_simde_avx512vpopcnt_)

#endif /* LUTCORE_NETLIST_X86_H */
