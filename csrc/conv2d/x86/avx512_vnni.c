/* csrc/conv2d/x86/avx512_vnni.c — avx512.c with the exact products as VNNI vpdpbusd (the
 * codes as unsigned bytes x + 128 against the signed weight bytes, four products and the
 * accumulate in one instruction; the accumulator starts at -128 * sum_k w[k, o]); compiled
 * with the VNNI flags.  The same bits. */
#define LC_BODY_ISA avx512vnni
#define LC_C2D_DOT_VNNI 1
#include "avx512.c"
