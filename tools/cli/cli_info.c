/* vkattn info: every Vulkan device with the capabilities vkattn uses; with
 * --layer, a layer shape's parameter and KV-cache report instead. */
#include "cli.h"
#include "cli_io.h"
#include "cli_report.h"
#include "cli_selftest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char help[] =
    "usage: vkattn info [--json] [--device SEL]\n"
    "       vkattn info --layer Dm,H,Hkv[,Dh] [--context N] [--bias]\n"
    "Lists every Vulkan device the loader finds with the capabilities vkattn uses,\n"
    "and marks with '*' the one a context would choose (automatic, or --device /\n"
    "$VKATTN_DEVICE); for that one, what a context uses after its start-up\n"
    "self-test: each feature on or off and why, and the driver quirks that apply\n"
    "(vkattn selftest shows each check). Exits 1 when there is no Vulkan device.\n"
    "  --json         one JSON object per device\n"
    "  --layer Dm,H,Hkv[,Dh]   instead, the size report of an attention layer of\n"
    "                 embed_dim Dm, H query heads, Hkv KV heads and head_dim Dh\n"
    "                 (default Dm / H): parameters of Wq, Wk, Wv, Wo and biases,\n"
    "                 weight bytes per dtype, KV-cache bytes per token and for a\n"
    "                 context per dtype, beside the same layer as MHA, GQA and MQA\n"
    "                 (no device needed; vkattn mha --report prints the same)\n"
    "  --context N    ... the context length of the report (default 4096)\n"
    "  --bias         ... the projections have biases\n";

static const char *yn(bool b) { return b ? "yes" : "no"; }

static const char *f16_path_name(const vkattn_device_info *d)
{
    return d->f16_path == VKATTN_F16_NATIVE ? "native (16-bit storage)"
                                            : "packed (pairs of halves in 32-bit words)";
}

/* How the device holds each storage type: "native" when its own loads and
 * stores read and write it, "emulated" when the kernels unpack it from
 * 32-bit words (arithmetic is f32 for every type). */
static const char *f16_storage(const vkattn_device_info *d)
{
    return d->f16_path == VKATTN_F16_NATIVE ? "native" : "emulated";
}

/* The cooperative-matrix shapes (f16 x f16 -> f32, subgroup scope) and the
 * kernels' one, or why the family cannot run. */
static void print_coopmat(const vkattn_device_info *d)
{
    printf("    cooperative matrices (f16 x f16 -> f32, subgroup):");
    if (!d->coopmat_shape_count)
        printf(" none");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++) {
        const vkattn_coopmat_shape *s = &d->coopmat_shapes[i];
        bool used =
            s->m == d->coopmat_shape.m && s->n == d->coopmat_shape.n && s->k == d->coopmat_shape.k;
        printf("%s %ux%ux%u%s", i ? "," : "", s->m, s->n, s->k, used ? " (the kernels')" : "");
    }
    if (d->coopmat_why[0])
        printf("; coopmat kernels cannot run: %s", d->coopmat_why);
    printf("\n");
}

static void print_text(const vkattn_device_info *d, bool chosen, const vkattn_self_test_report *rep)
{
    printf("%s %u: %s%s\n", chosen ? "*" : " ", d->index, d->name, chosen ? "   (chosen)" : "");
    printf("    type %s, Vulkan %u.%u.%u, driver %s%s%s%s\n", vkattn_device_type_name(d->type),
           VK_API_VERSION_MAJOR(d->api_version), VK_API_VERSION_MINOR(d->api_version),
           VK_API_VERSION_PATCH(d->api_version), d->driver_name[0] ? d->driver_name : "?",
           d->driver_info[0] ? " (" : "", d->driver_info, d->driver_info[0] ? ")" : "");
    if (!d->supported) {
        printf("    not usable: %s\n", d->unsupported_reason);
        return;
    }
    printf("    subgroup size %u (range %u..%u), shuffle %s, arithmetic %s, size control %s\n",
           d->subgroup_size, d->subgroup_size_min, d->subgroup_size_max, yn(d->subgroup_shuffle),
           yn(d->subgroup_arithmetic), yn(d->subgroup_size_control));
    printf("    shared memory %u B, workgroup up to %u invocations\n", d->max_shared_memory,
           d->max_workgroup_invocations);
    printf("    fp16 arithmetic %s, 16-bit storage %s -> f16 tensors: %s\n", yn(d->fp16_arithmetic),
           yn(d->storage_16bit), f16_path_name(d));
    printf("    types: f32 native; f16 %s; bf16 emulated (pairs in 32-bit words); q8_0, q4_0, "
           "q4_1, q5_0, q5_1, iq4_nl emulated (KV caches and q8_0 weights: blocks read as 32-bit "
           "words or 16-byte "
           "texels, dequantized in the kernels); arithmetic f32\n",
           d->f16_path == VKATTN_F16_NATIVE ? "native (16-bit storage)"
                                            : "emulated (pairs in 32-bit words)");
    printf("    kernels: %s%s, inputs through %s\n",
           d->subgroup_kernels ? "subgroup (shuffles, no shared memory)" : "shared-memory tiles",
           d->coopmat_kernels ? "; coopmat (matrix units) for the GEMMs and attention" : "",
           d->texel_inputs ? "uniform texel buffers" : "storage buffers");
    print_coopmat(d);
    printf("    max storage buffer range %llu B (%.0f MiB), texel buffer elements %llu\n",
           (unsigned long long)d->max_storage_buffer_range,
           (double)d->max_storage_buffer_range / (1 << 20),
           (unsigned long long)d->max_texel_buffer_elements);
    printf("    timestamps %s (period %.3g ns), memory %s, largest device heap %.1f GiB\n",
           yn(d->timestamps), d->timestamp_period_ns,
           d->unified_memory ? "unified (device-local is host-visible)" : "separate (staging)",
           (double)d->device_local_bytes / (1 << 30));
    if (rep)
        cli_print_features(stdout, rep, "    ");
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

/* The self-test's features and quirks as a JSON object. */
static void json_self_test(const vkattn_self_test_report *rep)
{
    static const char *const source[3] = {"ran", "cached", "skipped"};
    static const char *const keys[VKATTN_FEATURE_COUNT] = {
        "subgroup_kernels", "shared_kernels", "texel_inputs", "storage_16bit", "coopmat_kernels"};
    printf(", \"self_test\": {\"source\": \"%s\", \"ms\": %.3f, \"every_op_has_a_family\": %s",
           source[rep->source], rep->ms, rep->every_op_has_a_family ? "true" : "false");
    for (int f = 0; f < VKATTN_FEATURE_COUNT; f++) {
        printf(", \"%s\": {\"on\": %s, \"works\": %s, \"why\": ", keys[f],
               rep->features[f].on ? "true" : "false", rep->features[f].works ? "true" : "false");
        json_string(rep->features[f].why);
        putchar('}');
    }
    printf(", \"checks\": [");
    for (uint32_t k = 0; k < rep->check_count; k++) {
        const vkattn_self_test_check *c = &rep->checks[k];
        printf("%s{\"name\": \"%s\", \"checked\": %s, \"passed\": %s, \"detail\": ", k ? ", " : "",
               c->name, c->checked ? "true" : "false", c->passed ? "true" : "false");
        json_string(c->detail);
        putchar('}');
    }
    printf("], \"quirks\": [");
    for (uint32_t q = 0; q < rep->quirk_count; q++) {
        printf("%s{\"id\": ", q ? ", " : "");
        json_string(rep->quirks[q].id);
        printf(", \"applied\": %s}", rep->quirks[q].applied ? "true" : "false");
    }
    printf("]}");
}

static void print_json(const vkattn_device_info *d, bool chosen, const vkattn_self_test_report *rep)
{
    printf("{\"index\": %u, \"name\": ", d->index);
    json_string(d->name);
    printf(", \"chosen\": %s, \"supported\": %s, \"type\": ", chosen ? "true" : "false",
           d->supported ? "true" : "false");
    json_string(vkattn_device_type_name(d->type));
    printf(", \"driver\": ");
    json_string(d->driver_name);
    printf(", \"api_version\": \"%u.%u.%u\", \"subgroup_size\": %u, \"subgroup_shuffle\": %s, "
           "\"shared_memory\": %u, \"fp16_arithmetic\": %s, \"storage_16bit\": %s, "
           "\"f16_path\": \"%s\", \"kernels\": \"%s\", \"inputs\": \"%s\", "
           "\"max_storage_buffer_range\": %llu, "
           "\"max_texel_buffer_elements\": %llu, \"timestamps\": %s, \"types\": {\"f32\": "
           "\"native\", \"f16\": \"%s\", \"bf16\": \"emulated\", \"q8_0\": \"emulated\", "
           "\"q4_0\": \"emulated\", \"q4_1\": \"emulated\", \"q5_0\": \"emulated\", "
           "\"q5_1\": \"emulated\", \"iq4_nl\": \"emulated\"}",
           VK_API_VERSION_MAJOR(d->api_version), VK_API_VERSION_MINOR(d->api_version),
           VK_API_VERSION_PATCH(d->api_version), d->subgroup_size,
           d->subgroup_shuffle ? "true" : "false", d->max_shared_memory,
           d->fp16_arithmetic ? "true" : "false", d->storage_16bit ? "true" : "false",
           d->f16_path == VKATTN_F16_NATIVE ? "native" : "packed",
           d->subgroup_kernels ? "subgroup" : "shared", d->texel_inputs ? "texel" : "storage",
           (unsigned long long)d->max_storage_buffer_range,
           (unsigned long long)d->max_texel_buffer_elements, d->timestamps ? "true" : "false",
           f16_storage(d));
    printf(", \"coopmat_shapes\": [");
    for (uint32_t i = 0; i < d->coopmat_shape_count; i++)
        printf("%s[%u, %u, %u]", i ? ", " : "", d->coopmat_shapes[i].m, d->coopmat_shapes[i].n,
               d->coopmat_shapes[i].k);
    printf("], \"coopmat_shape\": [%u, %u, %u], \"coopmat_kernels\": %s, \"coopmat_why\": ",
           d->coopmat_shape.m, d->coopmat_shape.n, d->coopmat_shape.k,
           d->coopmat_kernels ? "true" : "false");
    json_string(d->coopmat_why);
    if (rep)
        json_self_test(rep);
    printf("}\n");
}

static void on_log(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    if (level >= VKATTN_LOG_WARNING)
        fprintf(stderr, "vkattn: %s\n", message);
}

/* The chosen device's self-test, from a context on it; its capabilities
 * as that context uses them into *d. 0, or -1 when no context could be
 * made (said on stderr). */
static int self_test_of(const char *device, vkattn_device_info *d, vkattn_self_test_report *rep)
{
    char index[16];
    snprintf(index, sizeof index, "%u", d->index);
    cli_device_options o = {.device = device ? device : index};
    vkattn_context *ctx = cli_open(&o);
    if (!ctx)
        return -1;
    vkattn_self_test_report got;
    vkattn_result r = vkattn_context_self_test(ctx, &got);
    if (r == VKATTN_SUCCESS) {
        *rep = got;
        uint32_t i = d->index;
        *d = *vkattn_context_device_info(ctx);
        d->index = i;
    }
    cli_close(ctx, &o, 0);
    return r == VKATTN_SUCCESS ? 0 : -1;
}

/* info --layer: the report, or 2 for a bad option. */
static int layer_report(const char *layer, const char *context, bool bias)
{
    vkattn_mha_desc d;
    uint32_t n = CLI_REPORT_CONTEXT;
    if (cli_parse_layer(layer, &d) != 0 || (context && cli_parse_uint("--context", context, &n)))
        return 2;
    d.bias = bias;
    char source[256];
    snprintf(source, sizeof source, "--layer %s", layer);
    return cli_layer_report(stdout, &d, n, source, cli_layer_terms) != 0 ? 2 : 0;
}

int cli_info(int argc, char **argv)
{
    bool json = false, bias = false;
    const char *device = getenv("VKATTN_DEVICE"), *layer = NULL, *context = NULL;
    for (int i = 1; i < argc; i++) {
        const char **value = strcmp(argv[i], "--layer") == 0     ? &layer
                             : strcmp(argv[i], "--context") == 0 ? &context
                                                                 : NULL;
        if (value) {
            if (i + 1 >= argc) {
                cli_error("info: %s needs a value\n%s", argv[i], help);
                return 2;
            }
            *value = argv[++i];
        } else if (strcmp(argv[i], "--bias") == 0) {
            bias = true;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[i], "--device") == 0) {
            if (i + 1 >= argc) {
                cli_error("info: --device needs a value\n%s", help);
                return 2;
            }
            device = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(help, stdout);
            return 0;
        } else {
            cli_error("info: unknown argument \"%s\"\n%s", argv[i], help);
            return 2;
        }
    }
    if (layer) {
        if (json) {
            cli_error("info: --layer prints a text report; it takes no --json");
            return 2;
        }
        return layer_report(layer, context, bias);
    }
    if (context || bias) {
        cli_error("info: %s needs --layer", context ? "--context" : "--bias");
        return 2;
    }
    if (device && !*device)
        device = NULL;
    uint32_t count = 0, chosen = UINT32_MAX;
    vkattn_result r = cli_list_devices(device, NULL, 0, &count, NULL, on_log, NULL);
    if (r != VKATTN_SUCCESS || count == 0) {
        cli_error("no Vulkan device found (%s). Install a Vulkan driver: on Debian, "
                  "apt-get install mesa-vulkan-drivers gives the lavapipe CPU device.",
                  vkattn_result_name(r));
        return 1;
    }
    vkattn_device_info *infos = calloc(count, sizeof *infos);
    if (!infos)
        return 1;
    r = cli_list_devices(device, infos, count, &count, &chosen, on_log, NULL);
    if (r != VKATTN_SUCCESS) {
        free(infos);
        cli_error("listing devices failed: %s", vkattn_result_message(r));
        return 1;
    }
    /* the chosen device as a context sees it: after its self-test */
    vkattn_self_test_report rep;
    bool tested = chosen != UINT32_MAX && infos[chosen].supported &&
                  self_test_of(device, &infos[chosen], &rep) == 0;
    if (!json)
        printf("vkattn %s: %u Vulkan device%s\n", vkattn_version_string(), count,
               count == 1 ? "" : "s");
    for (uint32_t i = 0; i < count; i++) {
        const vkattn_self_test_report *own = i == chosen && tested ? &rep : NULL;
        (json ? print_json : print_text)(&infos[i], i == chosen, own);
    }
    if (chosen == UINT32_MAX)
        fprintf(stderr, "vkattn: no device matches %s%s%s\n", device ? "\"" : "",
                device ? device : "the automatic choice", device ? "\"" : "");
    free(infos);
    return chosen == UINT32_MAX ? 1 : 0;
}
