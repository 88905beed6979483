/* A program outside the project that uses an installed vkattn: one GQA
 * attention call on the default device, checked against the CPU reference.
 * Built twice by tests/packaging/run.sh: through find_package(vkattn) and
 * through pkg-config. */
#include <vkattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    if (vkattn_version() != VKATTN_VERSION) {
        fprintf(stderr, "consumer: header %d.%d.%d but library %s\n", VKATTN_VERSION_MAJOR,
                VKATTN_VERSION_MINOR, VKATTN_VERSION_PATCH, vkattn_version_string());
        return 1;
    }
    vkattn_context *ctx = NULL;
    if (vkattn_context_create(NULL, &ctx) != VKATTN_SUCCESS) {
        fprintf(stderr, "consumer: no Vulkan device\n");
        return 1;
    }
    int64_t qs[4] = {1, 4, 6, 16}, ks[4] = {1, 2, 6, 16};
    enum { NQ = 4 * 6 * 16, NK = 2 * 6 * 16 };
    float q[NQ], k[NK], v[NK], out[NQ], want[NQ];
    unsigned seed = 7;
    for (int i = 0; i < NQ; i++)
        q[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 255) / 128.0f - 1.0f;
    for (int i = 0; i < NK; i++) {
        k[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 255) / 128.0f - 1.0f;
        v[i] = (float)((seed = seed * 1103515245u + 12345u) >> 16 & 255) / 128.0f - 1.0f;
    }
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc bd = {.size = 8192};
    int bad = vkattn_buffer_create(ctx, &bd, &b) || vkattn_buffer_upload(b, 0, q, sizeof q) ||
              vkattn_buffer_upload(b, 2048, k, sizeof k) ||
              vkattn_buffer_upload(b, 3072, v, sizeof v);
    vkattn_attention_args a = {.q = vkattn_tensor_make(b, 0, VKATTN_DTYPE_F32, 4, qs),
                               .k = vkattn_tensor_make(b, 2048, VKATTN_DTYPE_F32, 4, ks),
                               .v = vkattn_tensor_make(b, 3072, VKATTN_DTYPE_F32, 4, ks),
                               .out = vkattn_tensor_make(b, 4096, VKATTN_DTYPE_F32, 4, qs),
                               .causal = true};
    bad = bad || vkattn_attention(ctx, &a) || vkattn_buffer_download(b, 4096, out, sizeof out);
    vkattn_ref_attention_args r = {.q = vkattn_host_tensor_make(q, VKATTN_DTYPE_F32, 4, qs),
                                   .k = vkattn_host_tensor_make(k, VKATTN_DTYPE_F32, 4, ks),
                                   .v = vkattn_host_tensor_make(v, VKATTN_DTYPE_F32, 4, ks),
                                   .out = vkattn_host_tensor_make(want, VKATTN_DTYPE_F32, 4, qs),
                                   .causal = true};
    bad = bad || vkattn_ref_attention(&r, NULL, 0);
    double max_err = 0;
    for (int i = 0; !bad && i < NQ; i++)
        if (!(fabs((double)out[i] - want[i]) <= max_err))
            max_err = isfinite(out[i]) ? fabs((double)out[i] - want[i]) : INFINITY;
    if (bad)
        fprintf(stderr, "consumer: %s\n", vkattn_context_last_error(ctx));
    vkattn_buffer_destroy(b);
    vkattn_context_destroy(ctx);
    printf("consumer: vkattn %s, max error %.2e\n", vkattn_version_string(), max_err);
    return bad || max_err > 1e-4;
}
