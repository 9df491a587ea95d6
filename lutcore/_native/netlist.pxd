# The C interface of csrc/netlist/netlist.h: declarations only (the paired netlist.pyx sees them;
# a SIMDe twin includes this file before netlist.pyx).
from libc.stdint cimport uint16_t, int32_t, int64_t

cdef extern from "netlist/netlist.h" nogil:
    int lc_nl_check(const int32_t *gates, int64_t G, const int32_t *outputs, int a_bits, int b_bits, int p_bits)
    int lc_nl_gemm(int64_t *C, const uint16_t *A, const uint16_t *B, int64_t M, int64_t N, int64_t K,
                   const int32_t *gates, int64_t G, const int32_t *outputs, int a_bits, int b_bits, int p_bits,
                   int psigned, int isa, int nthreads)
    int lc_nl_products(int64_t *out, const uint16_t *a, const uint16_t *b, int64_t n, const int32_t *gates,
                       int64_t G, const int32_t *outputs, int a_bits, int b_bits, int p_bits, int psigned,
                       int isa, int nthreads)
    const char *lc_nl_body_name(int isa)

cdef extern from "netlist/netlist.h" nogil:
    ctypedef struct lc_acc_spec:
        int W, sgn, sat
        int64_t chunk
        int out_bits
    ctypedef struct lc_acc_src:
        const int64_t *P
        const uint16_t *A
        const uint16_t *B
        const int32_t *tab
        int64_t N
        int bb
        uint16_t am, bm
    int lc_acc_run(int64_t *out, int64_t *cnt, const lc_acc_src *S, int64_t L, int64_t K, const lc_acc_spec *sp,
                   const int32_t *gates, int64_t G, const int32_t *outputs, int isa, int nthreads)
