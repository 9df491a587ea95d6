/* csrc/netlist/plan.h — a gate netlist (the IR of lutcore.ops.netlist) compiled once per call
 * into the program every body of the netlist family runs (netlist.h: the contract).
 *
 * The IR: nodes 0 and 1 are the constants, 2 .. 2+A-1 the bits of operand a (LSB first),
 * 2+A .. 2+A+B-1 those of b, node 2+A+B+g gate g = row g of gates (G, 4) int32
 * [x, y, z, tt]: out = (tt >> (4 x + 2 y + z)) & 1 (vpternlog's imm8 with x the first
 * operand), x, y, z < the gate's node; outputs (P,) the node of product bit p.
 *
 * The program (lc_nl_plan_make): the gates that reach an output, in an order of the netlist's
 * (list-scheduled: a gate's readers a few instructions after it where the netlist allows), with
 *   - constant inputs folded into tt (a gate of node 0/1 reads nothing), a node read twice
 *     read once, the inputs the function depends on first (kind 0: x, y, z; 1: x, y and z = x;
 *     2: x = y = z: the AVX-512 body loads each once), and a gate whose function is then a
 *     constant or one input unchanged made an alias of it (no instruction);
 *   - nets in slots: 0 all zeros, 1 all ones, 2 .. 2+A+B-1 the operand bits, then gate
 *     outputs in slots reused once their last reader has run (a slot freed by a gate's own
 *     inputs may hold its output: every body reads an instruction's inputs before writing)
 *     -- the live nets, not all of them, sit in cache;
 *   - per instruction, the vpternlog form (x, y, z, tt) the AVX-512 body runs and the form
 *     the generic and AVX2 bodies run: an op of lc_nl_ops over permuted inputs (a, b, c)
 *     with negation bits (a, b, c, out), or the function's algebraic normal form (ANF:
 *     the XOR of the monomials 1, z, y, yz, x, xz, xy, xyz whose bits anf sets).
 * A body's nets are `words` 64-bit words a slot (one pass: 64 words lanes); the driver
 * sets slots 0 and 1 once.
 */
#ifndef LUTCORE_NETLIST_PLAN_H
#define LUTCORE_NETLIST_PLAN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LC_NL_MAX_BITS 16          /* operand widths 1..16 */
#define LC_NL_MAX_P 32             /* product width 1..32 */

/* the generic bodies' ops over (a, b, c) */
enum { LC_NL_CONST, LC_NL_BUF, LC_NL_AND2, LC_NL_XOR2, LC_NL_OR2, LC_NL_AND3, LC_NL_OR3, LC_NL_XOR3,
       LC_NL_MAJ, LC_NL_MUX /* a ? b : c */, LC_NL_AXOR /* a ^ (b & c) */, LC_NL_ANDOR /* a | (b & c) */,
       LC_NL_ORAND /* a & (b | c) */, LC_NL_AOX /* a & (b ^ c) */, LC_NL_ANF };

/* tt -> op | perm << 4 | neg << 7: the first form, fewest negations first, then in the enum's
 * order, that computes tt -- (a, b, c) = the inputs (x, y, z) in the order lc_nl_perms[perm],
 * each XORed with its bit of neg (bit 0 a, 1 b, 2 c), the result with bit 3; LC_NL_ANF where
 * none does (72 of the 256).  tests/ops/test_netlist.py runs every tt through every body. */
static const uint16_t lc_nl_forms[256] = {
    0x0000, 0x0406, 0x0185, 0x0404, 0x0285, 0x0414, 0x008d, 0x040b, 0x0085, 0x018d, 0x0092, 0x060b,
    0x0082, 0x050b, 0x008c, 0x0081, 0x0305, 0x0434, 0x00ad, 0x042b, 0x00cd, 0x044b, 0x000e, 0x0408,
    0x000e, 0x000e, 0x000e, 0x0449, 0x000e, 0x0429, 0x038a, 0x040c, 0x0105, 0x01ad, 0x00b2, 0x062b,
    0x000e, 0x000e, 0x000e, 0x0459, 0x004d, 0x000e, 0x04cb, 0x0188, 0x000e, 0x018a, 0x0129, 0x018b,
    0x0102, 0x052b, 0x00ac, 0x00a1, 0x000e, 0x0409, 0x03aa, 0x042c, 0x000e, 0x01aa, 0x0109, 0x01ab,
    0x0003, 0x000e, 0x000e, 0x0402, 0x0205, 0x01cd, 0x000e, 0x000e, 0x0132, 0x064b, 0x000e, 0x0439,
    0x002d, 0x000e, 0x000e, 0x028a, 0x04ab, 0x0288, 0x0149, 0x028b, 0x0112, 0x054b, 0x000e, 0x0419,
    0x00cc, 0x00c1, 0x03ca, 0x044c, 0x000e, 0x01ca, 0x0013, 0x000e, 0x0119, 0x01cb, 0x000e, 0x0412,
    0x000d, 0x000e, 0x000e, 0x02aa, 0x000e, 0x02ca, 0x0033, 0x000e, 0x000e, 0x0087, 0x004a, 0x000e,
    0x002a, 0x000e, 0x000e, 0x050d, 0x048b, 0x0308, 0x0159, 0x02ab, 0x0139, 0x02cb, 0x000e, 0x0432,
    0x000a, 0x000e, 0x000e, 0x052d, 0x000e, 0x054d, 0x000e, 0x0405, 0x0005, 0x000e, 0x014d, 0x000e,
    0x012d, 0x000e, 0x000e, 0x008a, 0x0032, 0x000e, 0x014c, 0x0239, 0x012c, 0x0259, 0x0088, 0x008b,
    0x010d, 0x000e, 0x000e, 0x00aa, 0x000e, 0x00ca, 0x0007, 0x000e, 0x000e, 0x00b3, 0x024a, 0x000e,
    0x022a, 0x000e, 0x000e, 0x040d, 0x0012, 0x000e, 0x024c, 0x0219, 0x000e, 0x0093, 0x014a, 0x000e,
    0x004c, 0x034a, 0x0041, 0x034b, 0x0019, 0x000e, 0x014b, 0x0094, 0x010c, 0x0249, 0x0108, 0x00ab,
    0x020a, 0x000e, 0x000e, 0x042d, 0x0039, 0x000e, 0x024b, 0x00b4, 0x000e, 0x000e, 0x05cd, 0x0605,
    0x0002, 0x000e, 0x000e, 0x0083, 0x022c, 0x0209, 0x012a, 0x000e, 0x002c, 0x032a, 0x0009, 0x000e,
    0x0021, 0x032b, 0x012b, 0x0084, 0x020c, 0x0229, 0x010a, 0x000e, 0x0208, 0x00cb, 0x000e, 0x044d,
    0x0059, 0x000e, 0x000e, 0x000e, 0x022b, 0x0134, 0x05ad, 0x0505, 0x000c, 0x030a, 0x0029, 0x000e,
    0x0049, 0x000e, 0x000e, 0x000e, 0x0008, 0x000e, 0x004b, 0x04cd, 0x002b, 0x04ad, 0x0034, 0x0086,
    0x0001, 0x030b, 0x010b, 0x0104, 0x020b, 0x0114, 0x058d, 0x0485, 0x000b, 0x048d, 0x0014, 0x0106,
    0x0004, 0x0206, 0x0006, 0x0400,
};
static const uint8_t lc_nl_perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

typedef struct {
    int32_t d, x, y, z;          /* output slot; the inputs' slots in the IR's order */
    int32_t a, b, c;             /* the inputs' slots in the generic op's order */
    uint8_t tt, op, neg, anf;    /* truth table (canonical); op, negation bits, ANF (op LC_NL_ANF) */
    uint8_t kind;                /* inputs the function reads: 0 x, y, z; 1 x, y (z = x); 2 x (y = z = x) */
} lc_nl_ins;

typedef struct {
    int a_bits, b_bits, p_bits, psigned;
    int64_t nins, nslots;
    lc_nl_ins *ins;
    int32_t out_slot[LC_NL_MAX_P];   /* product bit p's slot */
} lc_nl_plan;

/* tt with input v (0: x, 1: y, 2: z) fixed to bit */
static inline int lc_nl_fix(int tt, int v, int bit) {
    const int sh = 2 - v;
    int r = 0;
    for (int m = 0; m < 8; m++) {
        const int src = (m & ~(1 << sh)) | (bit << sh);
        r |= ((tt >> src) & 1) << m;
    }
    return r;
}

/* tt with input v set equal to input u (the same node read twice) */
static inline int lc_nl_merge(int tt, int v, int u) {
    int r = 0;
    for (int m = 0; m < 8; m++) {
        const int bu = (m >> (2 - u)) & 1, src = (m & ~(1 << (2 - v))) | (bu << (2 - v));
        r |= ((tt >> src) & 1) << m;
    }
    return r;
}

/* whether tt does not depend on input v */
static inline int lc_nl_free_of(int tt, int v) { return lc_nl_fix(tt, v, 0) == lc_nl_fix(tt, v, 1); }

/* the ANF of tt: bit s = XOR of f(t) over t a subset of s */
static inline int lc_nl_anf(int tt) {
    int f = tt;
    for (int v = 0; v < 3; v++)
        for (int m = 0; m < 8; m++)
            if (m & (1 << v)) f ^= ((f >> (m ^ (1 << v))) & 1) << m;
    return f;
}

/* 0, or -1: a gate input not below its node, an id or tt out of range, a width out of range */
static int lc_nl_check(const int32_t *gates, int64_t G, const int32_t *outputs, int a_bits, int b_bits,
                       int p_bits) {
    if (a_bits < 1 || a_bits > LC_NL_MAX_BITS || b_bits < 1 || b_bits > LC_NL_MAX_BITS || p_bits < 1 ||
        p_bits > LC_NL_MAX_P || G < 0 || G > (INT32_MAX / 4))
        return -1;
    const int64_t first = 2 + a_bits + b_bits;
    for (int64_t g = 0; g < G; g++) {
        const int32_t *r = gates + 4 * g;
        for (int k = 0; k < 3; k++)
            if (r[k] < 0 || r[k] >= first + g) return -1;
        if (r[3] < 0 || r[3] > 255) return -1;
    }
    for (int p = 0; p < p_bits; p++)
        if (outputs[p] < 0 || outputs[p] >= first + G) return -1;
    return 0;
}

/* a binary min-heap of int64 keys (the scheduler's two queues) */
static inline void lc_nl_heap_push(int64_t *h, int64_t *n, int64_t key) {
    int64_t i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > key; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = key;
}
static inline int64_t lc_nl_heap_pop(int64_t *h, int64_t *n) {
    const int64_t top = h[0], key = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= key) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = key;
    return top;
}

#define LC_NL_SCHED_LAT 4    /* instructions between a gate and its readers, where the netlist allows */

static void lc_nl_plan_free(lc_nl_plan *P) {
    free(P->ins);
    P->ins = NULL;
}

/* P <- the program of a checked netlist (lc_nl_check); 0, or -2 out of memory */
static int lc_nl_plan_make(lc_nl_plan *P, const int32_t *gates, int64_t G, const int32_t *outputs, int a_bits,
                           int b_bits, int p_bits, int psigned) {
    const int64_t first = 2 + a_bits + b_bits, nn = first + G;
    memset(P, 0, sizeof(*P));
    P->a_bits = a_bits, P->b_bits = b_bits, P->p_bits = p_bits, P->psigned = psigned;
    int32_t *rep = (int32_t *)malloc(sizeof(int32_t) * (size_t)nn);      /* node -> the node it equals */
    uint8_t *tt = (uint8_t *)malloc((size_t)(G ? G : 1) * 2);              /* canonical tt, kind */
    int32_t *cin = (int32_t *)malloc(sizeof(int32_t) * (size_t)(G ? G : 1) * 3);   /* canonical inputs */
    uint8_t *need = (uint8_t *)calloc((size_t)nn, 1);
    int64_t *last = (int64_t *)malloc(sizeof(int64_t) * (size_t)nn);      /* last reader (instruction) */
    int32_t *slot = (int32_t *)malloc(sizeof(int32_t) * (size_t)nn);
    int32_t *freel = (int32_t *)malloc(sizeof(int32_t) * (size_t)(nn + 1));
    P->ins = (lc_nl_ins *)malloc(sizeof(lc_nl_ins) * (size_t)(G ? G : 1));
    int rc = -2;
    if (!rep || !tt || !cin || !need || !last || !slot || !freel || !P->ins) goto done;
    for (int64_t n = 0; n < first; n++) rep[n] = (int32_t)n;
    /* canonical gates: constants folded, a node read twice merged, the inputs the function
     * depends on moved first (kind 1: (p, q, p); kind 2: (p, p, p)); aliases found */
    for (int64_t g = 0; g < G; g++) {
        const int32_t *r = gates + 4 * g;
        int t = r[3], vs[3], nv = 0;
        int32_t in[3];
        for (int k = 0; k < 3; k++) {
            in[k] = rep[r[k]];
            if (in[k] <= 1) t = lc_nl_fix(t, k, in[k]);
        }
        for (int k = 1; k < 3; k++)
            for (int i = 0; i < k; i++)
                if (in[k] > 1 && in[k] == in[i]) {
                    t = lc_nl_merge(t, k, i);
                    break;
                }
        for (int k = 0; k < 3; k++)
            if (in[k] > 1 && !lc_nl_free_of(t, k)) vs[nv++] = k;
        int c = 0;
        for (int m = 0; m < 8; m++) {
            int val[3] = {0, 0, 0};
            for (int i = 0; i < nv; i++) val[vs[i]] = (m >> (2 - i)) & 1;
            c |= ((t >> (4 * val[0] + 2 * val[1] + val[2])) & 1) << m;
        }
        int32_t *ci = cin + 3 * g;
        ci[0] = nv ? in[vs[0]] : 0;
        ci[1] = nv > 1 ? in[vs[1]] : ci[0];
        ci[2] = nv > 2 ? in[vs[2]] : ci[0];
        tt[2 * g] = (uint8_t)c;
        tt[2 * g + 1] = (uint8_t)(nv == 3 ? 0 : nv == 2 ? 1 : 2);
        int32_t to = -1;
        if (nv == 0) to = c & 1;                          /* a constant */
        else if (nv == 1 && c == 0xF0) to = ci[0];        /* its input unchanged */
        rep[first + g] = to >= 0 ? to : (int32_t)(first + g);
    }
    /* what reaches an output, backwards */
    for (int p = 0; p < p_bits; p++) need[rep[outputs[p]]] = 1;
    for (int64_t g = G - 1; g >= 0; g--) {
        if (!need[first + g] || rep[first + g] != first + g) continue;
        for (int k = 0; k < 3; k++) need[cin[3 * g + k]] = 1;
    }
    /* the instruction order: list scheduling of the needed gates -- among the gates whose inputs
     * were made LC_NL_SCHED_LAT instructions ago, the first in the netlist's order (or, when none
     * is, the one ready soonest): a gate's readers do not wait on it (the bodies' loads of a
     * slot just stored), and the netlist's locality (few live nets) is kept */
    int64_t ng = 0;
    for (int64_t g = 0; g < G; g++) ng += need[first + g] && rep[first + g] == first + g;
    int64_t *ord = (int64_t *)malloc(sizeof(int64_t) * (size_t)(ng + 1));
    int64_t *rstart = (int64_t *)calloc((size_t)(G + 1), sizeof(int64_t));      /* readers, CSR */
    int64_t *rlist = (int64_t *)malloc(sizeof(int64_t) * (size_t)(3 * ng + 1));
    int64_t *when = (int64_t *)calloc((size_t)(G ? G : 1), sizeof(int64_t));    /* step its inputs are ready */
    int32_t *indeg = (int32_t *)calloc((size_t)(G ? G : 1), sizeof(int32_t));
    int64_t *hp = (int64_t *)malloc(sizeof(int64_t) * (size_t)(ng + 1));          /* pending: (when, g) */
    int64_t *hr = (int64_t *)malloc(sizeof(int64_t) * (size_t)(ng + 1));          /* ready: g */
    if (!ord || !rstart || !rlist || !when || !indeg || !hp || !hr) {
        free(ord), free(rstart), free(rlist), free(when), free(indeg), free(hp), free(hr);
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {      /* count the readers of each gate, then list them */
        for (int64_t g = 0; g < G; g++) {
            if (!need[first + g] || rep[first + g] != first + g) continue;
            const int32_t *ci = cin + 3 * g;
            for (int k = 0; k < 3; k++) {
                if (ci[k] < first || (k > 0 && ci[k] == ci[0]) || (k > 1 && ci[k] == ci[1])) continue;
                const int64_t src = ci[k] - first;
                if (pass == 0) rstart[src + 1]++, indeg[g]++;
                else rlist[rstart[src] + when[src]++] = g;
            }
        }
        if (pass == 0)
            for (int64_t i = 0; i < G; i++) rstart[i + 1] += rstart[i];
    }
    if (G) memset(when, 0, sizeof(int64_t) * (size_t)G);
    int64_t npend = 0, nready = 0, step = 0, no = 0;
    for (int64_t g = 0; g < G; g++)
        if (need[first + g] && rep[first + g] == first + g && indeg[g] == 0) lc_nl_heap_push(hr, &nready, g);
    while (no < ng) {
        while (npend && (hp[0] >> 32) <= step) lc_nl_heap_push(hr, &nready, lc_nl_heap_pop(hp, &npend) & 0xFFFFFFFF);
        if (!nready) {
            step = hp[0] >> 32;
            continue;
        }
        const int64_t g = lc_nl_heap_pop(hr, &nready);
        ord[no++] = g;
        for (int64_t r = rstart[g]; r < rstart[g + 1]; r++) {
            const int64_t rd = rlist[r];
            if (when[rd] < step + LC_NL_SCHED_LAT) when[rd] = step + LC_NL_SCHED_LAT;
            if (--indeg[rd] == 0) lc_nl_heap_push(hp, &npend, (when[rd] << 32) | rd);
        }
        step++;
    }
    free(rstart), free(rlist), free(when), free(indeg), free(hp), free(hr);
    /* last readers, in instruction order (outputs: never freed) */
    for (int64_t n = 0; n < nn; n++) last[n] = -1;
    for (int64_t oi = 0; oi < ng; oi++)
        for (int k = 0; k < 3; k++) last[cin[3 * ord[oi] + k]] = oi;
    for (int p = 0; p < p_bits; p++) last[rep[outputs[p]]] = INT64_MAX;
    /* slots */
    for (int64_t n = 0; n < first; n++) slot[n] = (int32_t)n;
    int64_t nfree = 0, nslots = first, ni = 0;
    for (int64_t oi = 0; oi < ng; oi++) {
        const int64_t g = ord[oi], node = first + g;
        lc_nl_ins *ins = P->ins + ni;
        int32_t in[3];
        for (int k = 0; k < 3; k++) in[k] = cin[3 * g + k];
        ins->x = slot[in[0]], ins->y = slot[in[1]], ins->z = slot[in[2]];
        for (int k = 0; k < 3; k++) {                 /* free the inputs read for the last time */
            if (in[k] < first || last[in[k]] != ni) continue;
            if ((k > 0 && in[k] == in[0]) || (k > 1 && in[k] == in[1])) continue;
            freel[nfree++] = slot[in[k]];
        }
        slot[node] = nfree ? freel[--nfree] : (int32_t)nslots++;
        ins->d = slot[node];
        const int t = tt[2 * g], form = lc_nl_forms[t];
        ins->kind = tt[2 * g + 1];
        const uint8_t *pm = lc_nl_perms[(form >> 4) & 7];
        const int32_t xyz[3] = {ins->x, ins->y, ins->z};
        ins->tt = (uint8_t)t;
        ins->op = (uint8_t)(form & 15);
        ins->neg = (uint8_t)(form >> 7);
        ins->anf = (uint8_t)lc_nl_anf(t);
        ins->a = xyz[pm[0]], ins->b = xyz[pm[1]], ins->c = xyz[pm[2]];
        ni++;
    }
    for (int p = 0; p < p_bits; p++) P->out_slot[p] = slot[rep[outputs[p]]];
    P->nins = ni;
    P->nslots = nslots;
    free(ord);
    rc = 0;
done:
    free(rep), free(tt), free(cin), free(need), free(last), free(slot), free(freel);
    if (rc) lc_nl_plan_free(P);
    return rc;
}

#endif /* LUTCORE_NETLIST_PLAN_H */
