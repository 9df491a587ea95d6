/* csrc/netlist/x86/avx512_vpopcnt.c — the netlist family's AVX-512 body with AVX512_VPOPCNTDQ:
 * avx512.c with vpopcntq for the per-word popcounts (the same sums, so the same bits). */
#define LC_NL_VPOPCNT 1
#define LC_BODY_ISA avx512vpopcnt
#include "avx512.c"
