/* Floating-point tensors of a .safetensors file widened to f32. */
#include "safetensors.h"

#include <string.h>

int st_to_f32(const st_tensor *t, float *out, size_t count)
{
    const unsigned char *p = t->data; /* may be unaligned: read through memcpy */
    if (t->dtype == ST_F32) {
        memcpy(out, p, count * sizeof *out);
        return 0;
    }
    if (t->dtype != ST_F16 && t->dtype != ST_BF16)
        return -1;
    for (size_t i = 0; i < count; i++) {
        uint32_t h = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8, bits;
        if (t->dtype == ST_BF16) {
            bits = h << 16;
        } else {
            uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
            if (exp == 0x1f) { /* inf, NaN */
                bits = sign | 0x7f800000u | man << 13;
            } else if (exp) {
                bits = sign | (exp + 112) << 23 | man << 13;
            } else if (!man) {
                bits = sign;
            } else { /* subnormal: normalise */
                int e = -1;
                do {
                    man <<= 1;
                    e++;
                } while (!(man & 0x400));
                bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
            }
        }
        memcpy(&out[i], &bits, sizeof bits);
    }
    return 0;
}
