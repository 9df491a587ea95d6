/* csrc/netlist/netlist.h — GEMM (and elementwise products) through a multiplier given as a
 * gate netlist, evaluated bit-sliced: every net a row of 64-bit words, one lane a product.
 *
 * Contract (lutcore/ops/netlist.py, docs/DESIGN.md): the IR of csrc/netlist/plan.h; with
 * value(P) = sum_p bit_p 2^p, minus 2^P bit_{P-1} when psigned, and P(a, b) the netlist's
 * output on the low A bits of code a and the low B bits of code b:
 *   lc_nl_gemm      C[m, n] = sum_k value(P(A[m, k], B[k, n]))     A (M, K), B (K, N) uint16
 *                   -> C (M, N) int64 (exact: the room bounds K 2^P < 2^62)
 *   lc_nl_products  out[i] = value(P(a[i], b[i]))                  a, b (n,) uint16 -> (n,) int64
 * Both return 0, -1 for a netlist lc_nl_check refuses, -2 when an allocation failed.
 *
 * Layout.  Operands go into bit planes once per call (the body's `planes`): lanes along k,
 * 64 to a word.  B column n's planes sit at items n KW .. n KW + KW - 1 (KW = ceil(K / 64)) of
 * one row per bit, NI = N KW items, plus a row of lane masks (the lanes k < K, 0 past NI).
 * A row m's planes are KW words a bit, extended circularly by `words` more (word t = word
 * t mod KW), so the items s0 .. s0 + words - 1 of any run, whatever n they cross, find their
 * A words at s0 mod KW onwards: a pass is `words` consecutive items, no padding per column.
 * A pass (the body's `run`) loads the operand bits into their slots, runs the program, and
 * sums per word sum_p w_p popcount(out_p & mask) (w_p = 2^p; -2^(P-1) for a signed top bit)
 * -- padded lanes are masked out, since an approximate circuit's P(0, 0) need not be 0; the
 * driver adds word t's sum into C[m, n(t)].  products: a and b in planes per chunk, the
 * output planes turned back into values (the body's `values`).
 *
 * Threads: gemm over tasks (row m, a block of columns: the block size depends on K and the
 * body, never on the thread count), products over fixed chunks, dealt dynamically (a thread
 * the machine delays takes fewer); every C[m, n] and out[i] is made by one task, and integer
 * sums are exact: the same bits at any thread count and on every body.
 *
 * Bodies: generic C (16 uint64 words a pass, the plan's ops), AVX2 (the same ops on 8 ymm a
 * slot, a nibble-table popcount), AVX-512 (csrc/netlist/x86/avx512.c: 8 zmm a slot, one
 * vpternlogq a gate and zmm; the F/BW popcount, or vpopcntq in avx512_vpopcnt.c where the CPU
 * has VPOPCNTDQ).  A pass of many words amortises the per-gate dispatch and lets the loads of
 * one gate's zmm overlap; the plan's scheduling keeps a gate's readers a few gates away.
 */
#ifndef LUTCORE_NETLIST_H
#define LUTCORE_NETLIST_H

#include "core/common.h"
#include "core/dispatch.h"
#include "netlist/plan.h"

/* ------------------------------------------------------------ the gates, for any word type
 * One function per word type T (uint64_t; __m256i, whose &, |, ^, ~ GCC and clang define):
 * the plan's instructions over slots of U words of T at V. */
/* op over (A, B, C), one macro an op */
#define LC_NL_E_LC_NL_CONST(A, B, C) ((A) ^ (A))
#define LC_NL_E_LC_NL_BUF(A, B, C) (A)
#define LC_NL_E_LC_NL_AND2(A, B, C) ((A) & (B))
#define LC_NL_E_LC_NL_XOR2(A, B, C) ((A) ^ (B))
#define LC_NL_E_LC_NL_OR2(A, B, C) ((A) | (B))
#define LC_NL_E_LC_NL_AND3(A, B, C) ((A) & (B) & (C))
#define LC_NL_E_LC_NL_OR3(A, B, C) ((A) | (B) | (C))
#define LC_NL_E_LC_NL_XOR3(A, B, C) ((A) ^ (B) ^ (C))
#define LC_NL_E_LC_NL_MAJ(A, B, C) (((A) & (B)) | ((C) & ((A) | (B))))
#define LC_NL_E_LC_NL_MUX(A, B, C) ((C) ^ ((A) & ((B) ^ (C))))
#define LC_NL_E_LC_NL_AXOR(A, B, C) ((A) ^ ((B) & (C)))
#define LC_NL_E_LC_NL_ANDOR(A, B, C) ((A) | ((B) & (C)))
#define LC_NL_E_LC_NL_ORAND(A, B, C) ((A) & ((B) | (C)))
#define LC_NL_E_LC_NL_AOX(A, B, C) ((A) & ((B) ^ (C)))
/* the ops' cases: E(OP) the statement for op OP */
#define LC_NL_CASES(E)                                                                          \
    E(LC_NL_CONST) E(LC_NL_BUF) E(LC_NL_AND2) E(LC_NL_XOR2) E(LC_NL_OR2) E(LC_NL_AND3) E(LC_NL_OR3) \
    E(LC_NL_XOR3) E(LC_NL_MAJ) E(LC_NL_MUX) E(LC_NL_AXOR) E(LC_NL_ANDOR) E(LC_NL_ORAND) E(LC_NL_AOX)
#define LC_NL_PLAIN(OP)                                                                         \
    case OP:                                                                                    \
        for (int u = 0; u < U_; u++) d[u] = LC_NL_E_##OP(a[u], b[u], c[u]);                     \
        break;
#define LC_NL_NEG(OP)                                                                           \
    case OP:                                                                                    \
        for (int u = 0; u < U_; u++) {                                                          \
            const T_ A = a[u] ^ na, B = b[u] ^ nb, C = c[u] ^ nc;                               \
            (void)B, (void)C;                                                                   \
            d[u] = LC_NL_E_##OP(A, B, C) ^ no;                                                  \
        }                                                                                       \
        break;
#define LC_NL_GATES(ATTR, NAME, T, U, ZERO, ONES)                                               \
    ATTR static void NAME(const lc_nl_plan *P, T *V) {                                          \
        typedef T T_;                                                                           \
        enum { U_ = (U) };                                                                      \
        const T zo[2] = {(ZERO), (ONES)};          /* zeros, ones (vector types take no ?:) */  \
        for (int64_t i = 0; i < P->nins; i++) {                                                 \
            const lc_nl_ins *ins = P->ins + i;                                                  \
            T *d = V + (int64_t)ins->d * (U);                                                   \
            const T *a = V + (int64_t)ins->a * (U), *b = V + (int64_t)ins->b * (U);            \
            const T *c = V + (int64_t)ins->c * (U);                                             \
            if (ins->op == LC_NL_ANF) {                                                         \
                const T *x = V + (int64_t)ins->x * (U), *y = V + (int64_t)ins->y * (U);        \
                const T *z = V + (int64_t)ins->z * (U);                                         \
                const int f = ins->anf;                                                         \
                for (int u = 0; u < (U); u++) {                                                 \
                    const T X = x[u], Y = y[u], Z = z[u], XY = X & Y;                           \
                    T r = zo[f & 1];                                                            \
                    if (f & 2) r ^= Z;                                                          \
                    if (f & 4) r ^= Y;                                                          \
                    if (f & 8) r ^= Y & Z;                                                      \
                    if (f & 16) r ^= X;                                                         \
                    if (f & 32) r ^= X & Z;                                                     \
                    if (f & 64) r ^= XY;                                                        \
                    if (f & 128) r ^= XY & Z;                                                   \
                    d[u] = r;                                                                   \
                }                                                                               \
            } else if (ins->neg == 0) {                                                         \
                switch (ins->op) { LC_NL_CASES(LC_NL_PLAIN) }                                   \
            } else {                                                                            \
                const T na = zo[ins->neg & 1], nb = zo[(ins->neg >> 1) & 1];                    \
                const T nc = zo[(ins->neg >> 2) & 1], no = zo[(ins->neg >> 3) & 1];             \
                switch (ins->op) { LC_NL_CASES(LC_NL_NEG) }                                     \
            }                                                                                   \
        }                                                                                       \
    }

/* a pass's operand bits into their slots (words apart: L words a slot) */
static inline void lc_nl_load(const lc_nl_plan *P, uint64_t *nets, int64_t L, const uint64_t *a, int64_t as,
                              const uint64_t *b, int64_t bs) {
    for (int i = 0; i < P->a_bits; i++) memcpy(nets + (2 + i) * L, a + i * as, sizeof(uint64_t) * (size_t)L);
    for (int j = 0; j < P->b_bits; j++)
        memcpy(nets + (2 + P->a_bits + j) * L, b + j * bs, sizeof(uint64_t) * (size_t)L);
}

/* the output planes of a pass: word w of bit p at outp[p * os + w] */
static inline void lc_nl_store(const lc_nl_plan *P, const uint64_t *nets, int64_t L, uint64_t *outp, int64_t os) {
    for (int p = 0; p < P->p_bits; p++)
        memcpy(outp + p * os, nets + P->out_slot[p] * L, sizeof(uint64_t) * (size_t)L);
}

/* ------------------------------------------------------------ the generic body (8 words a pass) */
#define LC_NL_GEN_WORDS 16
LC_NL_GATES(, lc_nl_gates_generic, uint64_t, LC_NL_GEN_WORDS, (uint64_t)0, ~(uint64_t)0)

/* portable popcount (the baseline build has no popcnt instruction) */
static inline uint64_t lc_nl_popcount(uint64_t x) {
    x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
    x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
    x = (x + (x >> 4)) & UINT64_C(0x0F0F0F0F0F0F0F0F);
    return (x * UINT64_C(0x0101010101010101)) >> 56;
}

/* One pass of L words (the body's `words`):
 *   a     the operand a bits: word w of bit i at a[i * as + w]              IN
 *   b     the operand b bits: b[j * bs + w]                                  IN
 *   mask  the lanes counted (acc only)                                       IN
 *   acc   word w: sum_p w_p popcount(out_p[w] & mask[w]), or NULL            OUT
 *   outp  (acc NULL) word w of product bit p at outp[p * os + w]             OUT
 * nets: the plan's slots, L words each, slots 0 and 1 set to zeros and ones. */
static void lc_nl_run_generic(const lc_nl_plan *P, uint64_t *nets, const uint64_t *a, int64_t as, const uint64_t *b,
                              int64_t bs, const uint64_t *mask, int64_t *acc, uint64_t *outp, int64_t os) {
    const int64_t L = LC_NL_GEN_WORDS;
    lc_nl_load(P, nets, L, a, as, b, bs);
    lc_nl_gates_generic(P, nets);
    if (!acc) {
        lc_nl_store(P, nets, L, outp, os);
        return;
    }
    const int top = P->p_bits - 1;
    for (int64_t w = 0; w < L; w++) {
        const int64_t ct = (int64_t)lc_nl_popcount(nets[P->out_slot[top] * L + w] & mask[w]);
        int64_t s = P->psigned ? -ct : ct;            /* Horner from the top bit: s = 2 s + c_p */
        for (int p = top - 1; p >= 0; p--)
            s = 2 * s + (int64_t)lc_nl_popcount(nets[P->out_slot[p] * L + w] & mask[w]);
        acc[w] = s;
    }
}

/* bit planes: bit i of x[64 w + l] at bit l of out[i * os + w], w < ceil(n / 64); lanes >= n 0 */
static void lc_nl_planes_generic(uint64_t *out, int64_t os, const uint16_t *x, int64_t n, int bits) {
    for (int64_t w = 0; w * 64 < n; w++) {
        uint64_t pl[LC_NL_MAX_BITS] = {0};
        const int64_t l1 = n - w * 64 < 64 ? n - w * 64 : 64;
        for (int64_t l = 0; l < l1; l++) {
            const uint64_t v = x[w * 64 + l];
            for (int i = 0; i < bits; i++) pl[i] |= ((v >> i) & 1) << l;
        }
        for (int i = 0; i < bits; i++) out[i * os + w] = pl[i];
    }
}

/* values: out[64 w + l] = value of bits l of planes[p * ps + w], p < p_bits (n of them) */
static void lc_nl_values_generic(int64_t *out, const uint64_t *pl, int64_t ps, int64_t n, int p_bits, int psigned) {
    const int sh = 64 - p_bits;
    for (int64_t w = 0; w * 64 < n; w++) {
        const int64_t l1 = n - w * 64 < 64 ? n - w * 64 : 64;
        uint64_t v[64] = {0};
        for (int p = 0; p < p_bits; p++) {
            const uint64_t word = pl[p * ps + w];
            for (int64_t l = 0; l < l1; l++) v[l] |= ((word >> l) & 1) << p;
        }
        for (int64_t l = 0; l < l1; l++)
            out[w * 64 + l] = psigned ? (int64_t)(v[l] << sh) >> sh : (int64_t)v[l];
    }
}

/* ------------------------------------------------------------ the AVX2 body (16 words a pass) */
#if LC_X86
#define LC_NL_AVX2_U 8
LC_NL_GATES(LC_TARGET_AVX2, lc_nl_gates_avx2, __m256i, LC_NL_AVX2_U, _mm256_setzero_si256(),
            _mm256_set1_epi64x(-1))

/* per 64-bit lane: popcount (nibble table, byte sums) */
LC_TARGET_AVX2 static inline __m256i lc_nl_popcnt_avx2(__m256i v) {
    const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2, 1, 2, 2, 3, 1,
                                         2, 2, 3, 2, 3, 3, 4);
    const __m256i lo = _mm256_set1_epi8(0x0F);
    const __m256i c = _mm256_add_epi8(_mm256_shuffle_epi8(lut, _mm256_and_si256(v, lo)),
                                      _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), lo)));
    return _mm256_sad_epu8(c, _mm256_setzero_si256());
}

LC_TARGET_AVX2 static void lc_nl_run_avx2(const lc_nl_plan *P, uint64_t *nets, const uint64_t *a, int64_t as,
                                          const uint64_t *b, int64_t bs, const uint64_t *mask, int64_t *acc,
                                          uint64_t *outp, int64_t os) {
    const int64_t L = 4 * LC_NL_AVX2_U;
    __m256i *V = (__m256i *)nets;
    lc_nl_load(P, nets, L, a, as, b, bs);
    lc_nl_gates_avx2(P, V);
    if (!acc) {
        lc_nl_store(P, nets, L, outp, os);
        return;
    }
    const int top = P->p_bits - 1;
    for (int u = 0; u < LC_NL_AVX2_U; u++) {
        const __m256i mk = _mm256_loadu_si256((const __m256i *)(mask + 4 * u));
        const __m256i ct = lc_nl_popcnt_avx2(_mm256_and_si256(V[P->out_slot[top] * LC_NL_AVX2_U + u], mk));
        __m256i s = P->psigned ? _mm256_sub_epi64(_mm256_setzero_si256(), ct) : ct;
        for (int p = top - 1; p >= 0; p--)
            s = _mm256_add_epi64(_mm256_slli_epi64(s, 1),
                                 lc_nl_popcnt_avx2(_mm256_and_si256(V[P->out_slot[p] * LC_NL_AVX2_U + u], mk)));
        _mm256_storeu_si256((__m256i *)(acc + 4 * u), s);
    }
}

/* bit planes as lc_nl_planes_generic: 32 codes a step, bit i to the sign, packed to bytes */
LC_TARGET_AVX2 static void lc_nl_planes_avx2(uint64_t *out, int64_t os, const uint16_t *x, int64_t n, int bits) {
    for (int64_t w = 0; w * 64 < n; w++) {
        uint16_t t[64];
        const uint16_t *src = x + w * 64;
        if (n - w * 64 < 64) {
            memset(t, 0, sizeof(t));
            memcpy(t, src, sizeof(uint16_t) * (size_t)(n - w * 64));
            src = t;
        }
        __m256i v[4];
        for (int q = 0; q < 4; q++) v[q] = _mm256_loadu_si256((const __m256i *)(src + 16 * q));
        for (int i = 0; i < bits; i++) {
            const __m128i sh = _mm_cvtsi32_si128(15 - i);
            uint64_t word = 0;
            for (int h = 0; h < 2; h++) {
                const __m256i p = _mm256_packs_epi16(_mm256_sll_epi16(v[2 * h], sh), _mm256_sll_epi16(v[2 * h + 1], sh));
                const uint32_t m = (uint32_t)_mm256_movemask_epi8(_mm256_permute4x64_epi64(p, 0xD8));
                word |= (uint64_t)m << (32 * h);
            }
            out[i * os + w] = word;
        }
    }
}
#endif

/* ------------------------------------------------------------ the accumulator's steps (accum.h)
 * gather  x[i] = row[b[i] & bm], i < n: a table row's W-bit product patterns at a run's codes
 * post    one adder pass's outputs O (ob planes) -> the register planes R, given the addend
 *         planes D: per word the overflow mask ov (W + 1 outputs: the top bit, or top ^ bit W-1
 *         signed; W outputs: the two's-complement overflow flag), R = O's low W planes where no
 *         overflow or wrap, else the bound on the sum's side; counts (CP, 40 planes) += ov */
static void lc_nl_gather_generic(uint16_t *x, const uint16_t *row, const uint16_t *b, int64_t n, uint16_t bm) {
    for (int64_t i = 0; i < n; i++) x[i] = row[b[i] & bm];
}

#ifndef LC_ACC_CNT_BITS
#define LC_ACC_CNT_BITS 40          /* the accumulator's overflow counters: bit planes */
#endif

/* the overflow counters' planes c[b * TW + w] += bit l of ov, per lane (a bit-sliced increment) */
static inline void lc_acc_count(uint64_t *c, int64_t TW, int64_t w, uint64_t ov) {
    for (int b = 0; ov && b < LC_ACC_CNT_BITS; b++) {
        const uint64_t t = c[b * TW + w] & ov;
        c[b * TW + w] ^= ov;
        ov = t;
    }
}

static void lc_nl_acc_post_generic(const uint64_t *O, uint64_t *R, const uint64_t *D, uint64_t *CP, int64_t TW,
                                   int W, int ob, int sgn, int sat, int count) {
    const uint64_t *Ot = O + (int64_t)(ob - 1) * TW;
    for (int64_t w = 0; w < TW; w++) {
        uint64_t ov, pos;
        if (ob == W + 1) {
            ov = sgn ? Ot[w] ^ O[(W - 1) * TW + w] : Ot[w];
            pos = sgn ? ov & ~Ot[w] : ov;
        } else {
            const uint64_t rs = R[(W - 1) * TW + w], ds = D[(W - 1) * TW + w], ss = Ot[w];
            ov = ~(rs ^ ds) & (ss ^ rs);
            pos = ov & ~rs;
        }
        if (count) lc_acc_count(CP, TW, w, ov);
        if (!sat || !ov) {
            for (int i = 0; i < W; i++) R[i * TW + w] = O[i * TW + w];
        } else {
            const uint64_t neg = ov & ~pos;
            for (int i = 0; i < W - 1; i++) R[i * TW + w] = (O[i * TW + w] & ~ov) | pos;
            R[(W - 1) * TW + w] = (O[(W - 1) * TW + w] & ~ov) | (sgn ? neg : pos);
        }
    }
}

/* ------------------------------------------------------------ the body table
 * The AVX-512 bodies (csrc/netlist/x86/avx512.c; avx512_vpopcnt.c: the same with vpopcntq)
 * live in their own translation units; LC_NL_SIMDE (setup.py: 1 in the test twin's build)
 * binds their SIMDe copies. */
#include "netlist/x86/x86.h"
#ifndef LC_NL_SIMDE
#define LC_NL_SIMDE 0
#endif
typedef struct {
    lc_body_head head;
    int64_t words;          /* words (64 lanes each) a pass */
    void (*run)(const lc_nl_plan *, uint64_t *, const uint64_t *, int64_t, const uint64_t *, int64_t,
                const uint64_t *, int64_t *, uint64_t *, int64_t);
    void (*planes)(uint64_t *, int64_t, const uint16_t *, int64_t, int);
    void (*values)(int64_t *, const uint64_t *, int64_t, int64_t, int, int);
    void (*gather)(uint16_t *, const uint16_t *, const uint16_t *, int64_t, uint16_t);
    void (*post)(const uint64_t *, uint64_t *, const uint64_t *, uint64_t *, int64_t, int, int, int, int, int);
} lc_nl_body;
static const lc_nl_body lc_nl_bodies[] = {
#if LC_X86_BODIES
    {{"avx512-vpopcntdq", LC_ISA_AVX512 | LC_ISA_VPOPCNT}, LC_NL_X86_WORDS,
     LC_XBODY(LC_NL_SIMDE, avx512vpopcnt, nl_run), LC_XBODY(LC_NL_SIMDE, avx512vpopcnt, nl_planes),
     LC_XBODY(LC_NL_SIMDE, avx512vpopcnt, nl_values), LC_XBODY(LC_NL_SIMDE, avx512vpopcnt, nl_gather),
     LC_XBODY(LC_NL_SIMDE, avx512vpopcnt, nl_acc_post)},
    {{"avx512", LC_ISA_AVX512}, LC_NL_X86_WORDS, LC_XBODY(LC_NL_SIMDE, avx512, nl_run),
     LC_XBODY(LC_NL_SIMDE, avx512, nl_planes), LC_XBODY(LC_NL_SIMDE, avx512, nl_values),
     LC_XBODY(LC_NL_SIMDE, avx512, nl_gather), LC_XBODY(LC_NL_SIMDE, avx512, nl_acc_post)},
#endif
#if LC_X86
    {{"avx2", LC_ISA_AVX2}, 4 * LC_NL_AVX2_U, lc_nl_run_avx2, lc_nl_planes_avx2, lc_nl_values_generic,
     lc_nl_gather_generic, lc_nl_acc_post_generic},
#endif
    {{"generic", LC_ISA_GENERIC}, LC_NL_GEN_WORDS, lc_nl_run_generic, lc_nl_planes_generic,
     lc_nl_values_generic, lc_nl_gather_generic, lc_nl_acc_post_generic},
};
LC_BODY_TABLE(lc_nl_body, lc_nl, lc_nl_bodies)   /* lc_nl_pick(isa), lc_nl_body_name(isa) */

/* a thread's nets: nslots slots of L words, slots 0 and 1 zeros and ones; NULL on failure */
static uint64_t *lc_nl_nets(const lc_nl_plan *P, int64_t L, int64_t extra) {
    uint64_t *nets = (uint64_t *)lc_aligned_alloc(sizeof(uint64_t) * (size_t)(P->nslots * L + extra));
    if (nets) {
        memset(nets, 0, sizeof(uint64_t) * (size_t)(P->nslots * L + extra));
        memset(nets + L, 0xFF, sizeof(uint64_t) * (size_t)L);
    }
    return nets;
}

/* Per-thread scratch on the team: slot tid of an array of nthreads pointers, allocated by its
 * thread at its first unit (a thread that finds no unit allocates nothing), freed after the job. */
static void **lc_nl_slots(int nthreads) { return (void **)calloc((size_t)(nthreads > 0 ? nthreads : 1), sizeof(void *)); }
static void lc_nl_slots_free(void **slots, int nthreads) {
    if (!slots) return;
    for (int i = 0; i < nthreads; i++) lc_aligned_free(slots[i]);
    free(slots);
}

#define LC_NL_TASK_WORDS 1024       /* a gemm task's items (about): a block of columns of one row */
#define LC_NL_PLANES_GRAIN ((int64_t)1 << 12)   /* the operands' planes: codes a range, at least (a few µs) */

typedef struct {
    const lc_nl_body *Bd;
    const lc_nl_plan *P;
    int64_t *C;
    const uint16_t *A, *B;
    uint16_t *Bt;
    uint64_t *Af, *Bf;
    uint64_t last;
    int64_t M, N, K, L, KW, NS, AS, NB, nbn;
    int a_bits, b_bits;
    void **nets;
    int rc;
} lc_nl_gemm_job;

/* B: columns n into planes (transposed to rows first), the mask row; each column its own bytes */
static void lc_nl_gemm_bcols(void *p, int64_t c0, int64_t c1, int tid) {
    const lc_nl_gemm_job *j = (const lc_nl_gemm_job *)p;
    const int64_t K = j->K, N = j->N, KW = j->KW, NS = j->NS;
    (void)tid;
    for (int64_t n = c0; n < c1; n++) {
        uint16_t *col = j->Bt + n * K;
        for (int64_t k = 0; k < K; k++) col[k] = j->B[k * N + n];
        j->Bd->planes(j->Bf + n * KW, NS, col, K, j->b_bits);
        uint64_t *mk = j->Bf + j->b_bits * NS + n * KW;
        for (int64_t w = 0; w < KW; w++) mk[w] = w + 1 < KW ? ~UINT64_C(0) : j->last;
    }
}

/* A: rows m into planes, extended circularly by L words; each row its own bytes */
static void lc_nl_gemm_arows(void *p, int64_t m0, int64_t m1, int tid) {
    const lc_nl_gemm_job *j = (const lc_nl_gemm_job *)p;
    const int64_t K = j->K, KW = j->KW, AS = j->AS;
    const int a_bits = j->a_bits;
    (void)tid;
    for (int64_t m = m0; m < m1; m++) {
        uint64_t *am = j->Af + m * a_bits * AS;
        j->Bd->planes(am, AS, j->A + m * K, K, a_bits);
        for (int i = 0; i < a_bits; i++)
            for (int64_t t = KW; t < AS; t++) am[i * AS + t] = am[i * AS + t % KW];
    }
}

/* task t: (row m, columns [n0, n0 + NB)), computed whole by one thread */
static void lc_nl_gemm_task(void *p, int64_t t, int tid) {
    lc_nl_gemm_job *j = (lc_nl_gemm_job *)p;
    const lc_nl_body *Bd = j->Bd;
    const int64_t L = j->L, N = j->N, KW = j->KW, NS = j->NS, AS = j->AS, NB = j->NB, nbn = j->nbn;
    const int a_bits = j->a_bits, b_bits = j->b_bits;
    uint64_t *nets = (uint64_t *)j->nets[tid];
    if (!nets) {
        nets = lc_nl_nets(j->P, L, 2 * L);
        if (!nets) {
            __atomic_store_n(&j->rc, -2, __ATOMIC_RELAXED);
            return;
        }
        j->nets[tid] = nets;
    }
    int64_t *acc = (int64_t *)(nets + j->P->nslots * L);
    uint64_t *mbuf = nets + j->P->nslots * L + L;
    const int64_t m = t / nbn, n0 = (t % nbn) * NB, n1 = n0 + NB < N ? n0 + NB : N;
    int64_t *Cm = j->C + m * N;
    for (int64_t n = n0; n < n1; n++) Cm[n] = 0;
    const uint64_t *am = j->Af + m * a_bits * AS;
    const int64_t s1 = n1 * KW;
    int64_t n = n0, kw = 0;
    for (int64_t s0 = n0 * KW; s0 < s1; s0 += L) {
        const int64_t cnt = s1 - s0 < L ? s1 - s0 : L;
        const uint64_t *mk = j->Bf + b_bits * NS + s0;
        if (cnt < L) {                         /* the block's last pass: lanes past it off */
            memcpy(mbuf, mk, sizeof(uint64_t) * (size_t)cnt);
            memset(mbuf + cnt, 0, sizeof(uint64_t) * (size_t)(L - cnt));
            mk = mbuf;
        }
        Bd->run(j->P, nets, am + s0 % KW, AS, j->Bf + s0, NS, mk, acc, NULL, 0);
        for (int64_t w = 0; w < cnt; w++) {
            Cm[n] += acc[w];
            if (++kw == KW) kw = 0, n++;
        }
    }
}

static int lc_nl_gemm(int64_t *C, const uint16_t *A, const uint16_t *B, int64_t M, int64_t N, int64_t K,
                      const int32_t *gates, int64_t G, const int32_t *outputs, int a_bits, int b_bits, int p_bits,
                      int psigned, int isa, int nthreads) {
    if (lc_nl_check(gates, G, outputs, a_bits, b_bits, p_bits)) return -1;
    if (M <= 0 || N <= 0) return 0;
    if (K <= 0) {
        memset(C, 0, sizeof(int64_t) * (size_t)(M * N));
        return 0;
    }
    const lc_nl_body *Bd = lc_nl_pick(isa);
    lc_nl_plan P;
    if (lc_nl_plan_make(&P, gates, G, outputs, a_bits, b_bits, p_bits, psigned)) return -2;
    const int64_t L = Bd->words, KW = (K + 63) / 64, NI = N * KW, NS = NI + L;   /* B rows: NS words */
    const int64_t AS = KW + L;                                                     /* A rows: AS words a bit */
    /* tasks: (row m, columns [n0, n0 + NB)) */
    const int64_t NB = KW >= LC_NL_TASK_WORDS ? 1 : LC_NL_TASK_WORDS / KW;
    const int64_t nbn = (N + NB - 1) / NB, ntask = M * nbn;
    const int nt = ntask < nthreads ? (int)ntask : (nthreads > 0 ? nthreads : 1);
    uint64_t *Bf = (uint64_t *)lc_aligned_alloc(sizeof(uint64_t) * (size_t)((b_bits + 1) * NS));
    uint64_t *Af = (uint64_t *)lc_aligned_alloc(sizeof(uint64_t) * (size_t)(M * a_bits * AS));
    uint16_t *Bt = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)(N * K));
    void **nets = lc_nl_slots(nt);
    lc_nl_gemm_job j = {.Bd = Bd, .P = &P, .C = C, .A = A, .B = B, .Bt = Bt, .Af = Af, .Bf = Bf,
                        .last = (K % 64) ? (UINT64_C(1) << (K % 64)) - 1 : ~UINT64_C(0), .M = M, .N = N, .K = K,
                        .L = L, .KW = KW, .NS = NS, .AS = AS, .NB = NB, .nbn = nbn, .a_bits = a_bits,
                        .b_bits = b_bits, .nets = nets, .rc = 0};
    if (!Bf || !Af || !Bt || !nets) {
        j.rc = -2;
        goto done;
    }
    memset(Bf, 0, sizeof(uint64_t) * (size_t)((b_bits + 1) * NS));
    const int64_t grain = (LC_NL_PLANES_GRAIN + K - 1) / K;         /* columns (rows) a range */
    lc_team_range(nthreads, N, grain, lc_nl_gemm_bcols, &j);
    lc_team_range(nthreads, M, grain, lc_nl_gemm_arows, &j);
    lc_team_for(nt, ntask, lc_nl_gemm_task, &j);
done:
    lc_nl_slots_free(nets, nt);
    lc_aligned_free(Bf);
    lc_aligned_free(Af);
    free(Bt);
    lc_nl_plan_free(&P);
    return j.rc;
}

#define LC_NL_CHUNK_WORDS 256        /* products: words (64 products each) a chunk */

typedef struct {
    const lc_nl_body *Bd;
    const lc_nl_plan *P;
    int64_t *out;
    const uint16_t *a, *b;
    int64_t n, L, CW, CH;
    int a_bits, b_bits, p_bits, psigned;
    void **nets;
    int rc;
} lc_nl_products_job;

/* chunk ch of CH products, computed whole by one thread in its nets (and planes past them) */
static void lc_nl_products_chunk(void *p, int64_t ch, int tid) {
    lc_nl_products_job *j = (lc_nl_products_job *)p;
    const lc_nl_body *Bd = j->Bd;
    const int64_t L = j->L, CW = j->CW, CH = j->CH, n = j->n;
    const int a_bits = j->a_bits, b_bits = j->b_bits, p_bits = j->p_bits;
    uint64_t *nets = (uint64_t *)j->nets[tid];
    if (!nets) {
        const int64_t planes = a_bits + b_bits + p_bits;
        nets = lc_nl_nets(j->P, L, planes * CW);
        if (!nets) {
            __atomic_store_n(&j->rc, -2, __ATOMIC_RELAXED);
            return;
        }
        j->nets[tid] = nets;
    }
    const int64_t i0 = ch * CH, len = n - i0 < CH ? n - i0 : CH, nw = lc_round_up((len + 63) / 64, L);
    uint64_t *pa = nets + j->P->nslots * L, *pb = pa + a_bits * CW, *po = pb + b_bits * CW;
    Bd->planes(pa, CW, j->a + i0, len, a_bits);
    Bd->planes(pb, CW, j->b + i0, len, b_bits);
    for (int64_t w = (len + 63) / 64; w < nw; w++) {     /* the words past len in the last pass */
        for (int i = 0; i < a_bits; i++) pa[i * CW + w] = 0;
        for (int k = 0; k < b_bits; k++) pb[k * CW + w] = 0;
    }
    for (int64_t w0 = 0; w0 < nw; w0 += L)
        Bd->run(j->P, nets, pa + w0, CW, pb + w0, CW, NULL, NULL, po + w0, CW);
    Bd->values(j->out + i0, po, CW, len, p_bits, j->psigned);
}

static int lc_nl_products(int64_t *out, const uint16_t *a, const uint16_t *b, int64_t n, const int32_t *gates,
                          int64_t G, const int32_t *outputs, int a_bits, int b_bits, int p_bits, int psigned,
                          int isa, int nthreads) {
    if (lc_nl_check(gates, G, outputs, a_bits, b_bits, p_bits)) return -1;
    if (n <= 0) return 0;
    const lc_nl_body *Bd = lc_nl_pick(isa);
    lc_nl_plan P;
    if (lc_nl_plan_make(&P, gates, G, outputs, a_bits, b_bits, p_bits, psigned)) return -2;
    const int64_t L = Bd->words, CW = lc_round_up(LC_NL_CHUNK_WORDS, (size_t)L), CH = 64 * CW;
    const int64_t nch = (n + CH - 1) / CH;
    const int nt = nch < nthreads ? (int)nch : (nthreads > 0 ? nthreads : 1);
    lc_nl_products_job j = {.Bd = Bd, .P = &P, .out = out, .a = a, .b = b, .n = n, .L = L, .CW = CW, .CH = CH,
                            .a_bits = a_bits, .b_bits = b_bits, .p_bits = p_bits, .psigned = psigned,
                            .nets = lc_nl_slots(nt), .rc = 0};
    if (!j.nets)
        j.rc = -2;
    else
        lc_team_for(nt, nch, lc_nl_products_chunk, &j);
    lc_nl_slots_free(j.nets, nt);
    lc_nl_plan_free(&P);
    return j.rc;
}

#include "netlist/accum.h"

#endif /* LUTCORE_NETLIST_H */
