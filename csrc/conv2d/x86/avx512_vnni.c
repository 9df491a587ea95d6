/* csrc/conv2d/x86/avx512_vnni.c — avx512.c with the exact products as VNNI vpdpwssd (one
 * instruction per int16 pair dot product and accumulate instead of madd + add); compiled
 * with the VNNI flags.  The same bits. */
#define LC_BODY_ISA avx512vnni
#define LC_C2D_DOT_VNNI 1
#include "avx512.c"
