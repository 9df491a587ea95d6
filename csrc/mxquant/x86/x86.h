/* csrc/mxquant/x86/x86.h — the MX quantizer's vector bodies, each in its own translation unit
 * (csrc/mxquant/x86/<isa>.c, compiled alone with that ISA's flags: avx2.c 8 lanes, avx512.c 16
 * lanes, AVX-512 F/BW/VL; their SIMDe copies -- avx512.c built with AVX2+FMA flags, avx2.c with the
 * baseline ones -- back the test-only extension lutcore._native._simde_mxquant).  Included by mxquant.h, whose generic
 * bodies of the same names give the contract and the bits (one thread each):
 *   mxq_rows  the blocks i0..i1-1 of a rows job, row-major (row i / nb, block i % nb): a block's
 *             elements along the lanes, its maximum reduced across them
 *   mxq_cols  block b of a cols job, columns n0..n1-1 (n1 - n0 <= LC_MXQ_CW): the columns
 *             along the lanes, each lane its own block
 */
#ifndef LUTCORE_MXQUANT_X86_H
#define LUTCORE_MXQUANT_X86_H

#include <stdint.h>
#include "mxquant/job.h"

#define LC_MXQ_CW 64              /* columns of a cols item: 4 zmm / 8 ymm of float32 */

#define LC_MXQ_X86_DECLARE(P)                                                         \
    void P##mxq_rows(const lc_mxq_job *j, int64_t i0, int64_t i1);                    \
    void P##mxq_cols(const lc_mxq_job *j, int64_t b, int64_t n0, int64_t n1);

LC_MXQ_X86_DECLARE(lc_avx2_)
LC_MXQ_X86_DECLARE(lc_simde_avx2_)
LC_MXQ_X86_DECLARE(lc_avx512_)
LC_MXQ_X86_DECLARE(lc_simde_avx512_)

#endif /* LUTCORE_MXQUANT_X86_H */
