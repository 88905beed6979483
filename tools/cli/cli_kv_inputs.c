/* attention's K and V in dtypes of their own (cli_kv_inputs.h). */
#include "cli_kv_inputs.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char cli_kv_inputs_help[] =
    "  --k-dtype T, --v-dtype T  K's and V's storage on the device, each f32, f16, bf16\n"
    "                        (default --dtype's) or ggml's blocks q8_0, q4_0, q4_1, q5_0,\n"
    "                        q5_1, iq4_nl (head dims multiples of 32); K and V may differ.\n"
    "                        A quantized one is read as the raw blocks: uint8\n"
    "                        [B,Hkv,Tk,D/32*bytes] (bytes per block: q8_0 34, q4_0 and\n"
    "                        iq4_nl 18, q4_1 20, q5_0 22, q5_1 24), as llama.cpp keeps them\n"
    "  --quantize-kv         quantized --k-dtype / --v-dtype from float32 --k / --v files\n"
    "                        instead, quantized on load as ggml's reference quantizers do\n";

static bool is_quantized(vkattn_dtype d) { return vkattn_dtype_block_size(d) > 1; }

int cli_kv_inputs_option(cli_kv_inputs *o, const char *flag, const char *value)
{
    int i = strcmp(flag, "--k-dtype") == 0 ? 0 : strcmp(flag, "--v-dtype") == 0 ? 1 : -1;
    if (i < 0)
        return 0;
    if (cli_dtype_named(value, (vkattn_dtype)-1) == (vkattn_dtype)-1) {
        cli_error("attention: %s \"%s\": expected f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1 "
                  "or iq4_nl",
                  flag, value);
        return -1;
    }
    o->name[i] = value;
    return 1;
}

bool cli_kv_inputs_switch(cli_kv_inputs *o, const char *flag)
{
    if (strcmp(flag, "--quantize-kv") != 0)
        return false;
    o->quantize = true;
    return true;
}

int cli_kv_inputs_check(cli_kv_inputs *o, vkattn_dtype job_dtype, bool rope, bool input_bf16)
{
    static const char *const flags[2] = {"--k-dtype", "--v-dtype"};
    bool any = false;
    for (int i = 0; i < 2; i++) {
        o->dtype[i] = cli_dtype_named(o->name[i], job_dtype);
        any = any || is_quantized(o->dtype[i]);
    }
    if (o->quantize && !any) {
        cli_error("attention: --quantize-kv quantizes K or V on load, but neither --k-dtype nor "
                  "--v-dtype is a quantized type (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)");
        return -1;
    }
    if (rope && is_quantized(o->dtype[0])) {
        cli_error("attention: --rope-theta rotates K on the device, stored in --dtype: it does "
                  "not take a quantized %s %s",
                  flags[0], o->name[0]);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        if (input_bf16 && is_quantized(o->dtype[i]) && !o->quantize) {
            cli_error("attention: --input-bf16 reads bf16 bits, but %s %s reads raw blocks "
                      "(uint8): give --quantize-kv to quantize the bf16 values on load",
                      flags[i], o->name[i]);
            return -1;
        }
    return 0;
}

void cli_kv_inputs_prepare(const cli_kv_inputs *o, cli_input *kv[2])
{
    for (int i = 0; i < 2; i++)
        if (is_quantized(o->dtype[i]) && !o->quantize)
            kv[i]->external = true;
}

/* Raw blocks: uint8 [B, Hkv, Tk, D/32 * bytes], read as [B, Hkv, Tk, D]. */
static int load_blocks(cli_input *in, vkattn_dtype dt)
{
    const char *name = vkattn_dtype_name(dt);
    uint64_t bb = vkattn_dtype_row_bytes(dt, 32);
    char accepted[256];
    snprintf(accepted, sizeof accepted,
             "a %s %s is uint8 raw blocks [B,Hkv,Tk,D/32*%llu] (or float32 with --quantize-kv)",
             name, in->flag, (unsigned long long)bb);
    if (cli_read_npy(in, accepted) != 0)
        return -1;
    npy_array *a = &in->array;
    if (a->dtype != NPY_U8 || a->rank != 4 || a->shape[3] % (int64_t)bb != 0) {
        char shape[128];
        cli_shape_text(a, shape, sizeof shape);
        cli_error("%s %s: %s %s: %s", in->flag, in->path, npy_dtype_name(a->dtype), shape,
                  accepted);
        return -1;
    }
    a->shape[3] = a->shape[3] / (int64_t)bb * 32;
    return 0;
}

/* A float32 input quantized in its place (rows are its last dimension). */
static int quantize(cli_input *in, vkattn_dtype dt, const char *flag)
{
    npy_array *a = &in->array;
    if (a->shape[a->rank - 1] % 32 != 0) {
        cli_error("%s %s: head dim %lld does not suit %s %s: quantized K and V hold whole "
                  "32-value blocks (head dims multiples of 32)",
                  in->flag, in->path, (long long)a->shape[a->rank - 1], flag,
                  vkattn_dtype_name(dt));
        return -1;
    }
    uint64_t n = (uint64_t)cli_numel(a), bytes = vkattn_dtype_row_bytes(dt, n);
    void *blocks = malloc(bytes ? bytes : 1);
    if (!blocks) {
        cli_error("out of memory");
        return -1;
    }
    char err[512];
    if (vkattn_ref_quantize(dt, a->data, n, blocks, err, sizeof err) != VKATTN_SUCCESS) {
        cli_error("%s %s: %s cannot be quantized to %s: %s", in->flag, in->path, flag,
                  vkattn_dtype_name(dt), err);
        free(blocks);
        return -1;
    }
    free(a->data);
    a->data = blocks;
    a->dtype = NPY_U8;
    a->nbytes = bytes;
    return 0;
}

int cli_kv_inputs_load(const cli_kv_inputs *o, cli_input *kv[2])
{
    static const char *const flags[2] = {"--k-dtype", "--v-dtype"};
    for (int i = 0; i < 2; i++) {
        vkattn_dtype dt = o->dtype[i];
        int r = !is_quantized(dt) ? cli_round_to_dtype(kv[i], dt)
                : o->quantize     ? quantize(kv[i], dt, flags[i])
                                  : load_blocks(kv[i], dt);
        if (r != 0)
            return -1;
    }
    return 0;
}

vkattn_buffer *cli_kv_inputs_upload(const cli_kv_inputs *o, int i, vkattn_context *ctx,
                                    const npy_array *a, vkattn_tensor *t)
{
    vkattn_dtype dt = o->dtype[i];
    if (!is_quantized(dt)) {
        vkattn_buffer *b = cli_upload(ctx, a, dt);
        if (b)
            *t = cli_tensor(b, a, dt);
        return b;
    }
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc d = {.size = a->nbytes};
    vkattn_result r = vkattn_buffer_create(ctx, &d, &b);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_upload(b, 0, a->data, a->nbytes);
    if (r != VKATTN_SUCCESS) {
        cli_error("%s", vkattn_context_last_error(ctx));
        vkattn_buffer_destroy(b);
        return NULL;
    }
    *t = vkattn_tensor_make(b, 0, dt, a->rank, a->shape);
    return b;
}

vkattn_host_tensor cli_kv_inputs_host(const cli_kv_inputs *o, int i, const npy_array *a)
{
    vkattn_dtype dt = is_quantized(o->dtype[i]) ? o->dtype[i] : VKATTN_DTYPE_F32;
    return vkattn_host_tensor_make(a->data, dt, a->rank, a->shape);
}
