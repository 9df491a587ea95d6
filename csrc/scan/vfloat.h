/* csrc/scan/vfloat.h — scan_impl.h's float32 vector vocabulary (LC_V*) from csrc/core/vec.h, at
 * the width the including file set (no include guard: scan_impl.h undefines these at its end).
 * scan.h includes it at 8 lanes (the AVX2 body), csrc/scan/x86/avx512.c at 16; each first
 * defines LC_V_TARGET, LC_V_NAME and the cross-lane sums LC_VHSUM, LC_VHSUM8 (and LC_VFOLD8
 * at 16), which keep the 8-lane hadd tree's order at both widths. */
#define LC_ST float
#define LC_VT LC_VF
#define LC_VL LC_VF_W
#define LC_VZERO LC_VF_ZERO()
#define LC_VLOAD LC_VF_LOADU
#define LC_VSTORE LC_VF_STOREU
#define LC_VSET1 LC_VF_SET1
#define LC_VADD LC_VF_ADD
#define LC_VSUB LC_VF_SUB
#define LC_VMUL LC_VF_MUL
#define LC_VFMA LC_VF_FMA
#define LC_VEXP LC_VF_NAME(exp)
#define LC_VEXP_FAST LC_VF_NAME(exp_fast)
#define LC_VEXP2 LC_VF_NAME(exp2)
#define LC_VEXP2_FAST LC_VF_NAME(exp2_fast)
#define LC_LOG2E_ST LC_LOG2E
#define LC_VMAXABS LC_VF_NAME(maxabs)
#define LC_SMAXABS lc_maxabs_float
#define LC_VSOFTPLUS LC_VF_NAME(softplus)
#define LC_VSIGMOID LC_VF_NAME(sigmoid)
#define LC_VSILU LC_VF_NAME(silu)
#define LC_VSOFTPLUS_E LC_VF_NAME(softplus_e)
#define LC_VDSOFTPLUS_E LC_VF_NAME(dsoftplus_e)
#define LC_VPHI1 LC_VF_NAME(phi1)
#define LC_VDPHI1 LC_VF_NAME(dphi1)
