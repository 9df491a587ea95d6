/* csrc/conv2d/geo.h — one direct convolution's geometry (conv2d.h and its x86 bodies). */
#ifndef LUTCORE_CONV2D_GEO_H
#define LUTCORE_CONV2D_GEO_H

#include <stdint.h>

#define LC_C2D_KMAX 32           /* the largest reduction length K = C*KH*KW of the direct path */

/* input (N, H, W, C) NHWC codes, kernel KH x KW, stride (sh, sw), padding (ph, pw), dilation
 * (dh, dw), output (N, O, OH, OW); K = KH*KW*C */
typedef struct {
    int64_t N, H, W, C, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, O, K;
} lc_c2d_geo;

#endif /* LUTCORE_CONV2D_GEO_H */
