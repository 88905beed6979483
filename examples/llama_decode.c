/* A Llama-style attention block decoding through a KV cache, with the
 * public API only:
 *
 *   1. a layer shaped like Llama 3's at a small width: 32 query heads
 *      sharing 8 key/value heads (GQA) of 16 dimensions (Dm 512), no
 *      biases, rotary position embeddings with theta 500000 and Llama 3.1
 *      frequency scaling (factor 8, low 1, high 4, original 8192);
 *   2. random weights from a fixed seed (a real host loads them from a
 *      checkpoint; the layout is torch.nn.Linear's);
 *   3. a KV cache for one sequence; the prompt (24 tokens) goes in as one
 *      prefill step, then 8 tokens are decoded one step at a time - each at
 *      the position the cache gives it (its length), so nothing here
 *      counts positions;
 *   4. after every step, the step's output rows are compared with the CPU
 *      reference run causally over the whole sequence so far (its last
 *      rows), which must agree within 2e-4 (f32).
 * Exit status 0 when every step matches and the validation layer (when
 * installed) saw nothing. Run by the test suite on every Vulkan
 * implementation. */
#include <vkattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DM = 512, HEADS = 32, KV_HEADS = 8, DH = 16, PROMPT = 24, DECODE = 8 };
enum { TOKENS = PROMPT + DECODE };
#define TOLERANCE 2e-4

static void vkattn_message(void *user, vkattn_log_level level, const char *message)
{
    (void)user;
    if (level >= VKATTN_LOG_WARNING)
        fprintf(stderr, "llama: vkattn: %s\n", message);
}

/* Uniform values in [-amplitude, amplitude) from a fixed seed. */
static void fill(float *a, size_t n, float amplitude, unsigned seed)
{
    unsigned long long s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = amplitude * ((float)(s >> 40) / (float)(1u << 23) - 1.0f);
    }
}

/* The layer's weights on the host (the reference reads them too). */
typedef struct llama_weights {
    float wq[HEADS * DH * DM], wk[KV_HEADS * DH * DM], wv[KV_HEADS * DH * DM];
    float wo[DM * HEADS * DH];
} llama_weights;

static vkattn_mha_desc layer_desc(void)
{
    return (vkattn_mha_desc){
        .embed_dim = DM,
        .num_heads = HEADS,
        .num_kv_heads = KV_HEADS,
        .head_dim = DH,
        .rope = {.theta = 500000.0f,
                 .scaling = VKATTN_ROPE_SCALING_LLAMA3,
                 .factor = 8.0f,
                 .low_freq_factor = 1.0f,
                 .high_freq_factor = 4.0f,
                 .original_max_positions = 8192},
    };
}

static vkattn_context *open_context(void)
{
    vkattn_context_desc desc = {.device = getenv("VKATTN_DEVICE"),
                                .flags = VKATTN_CONTEXT_VALIDATION,
                                .log = vkattn_message};
    vkattn_context *ctx = NULL;
    vkattn_result r = vkattn_context_create(&desc, &ctx);
    if (r == VKATTN_ERROR_LAYER_NOT_PRESENT) { /* validation is a bonus here */
        desc.flags = 0;
        r = vkattn_context_create(&desc, &ctx);
    }
    if (r != VKATTN_SUCCESS) {
        fprintf(stderr, "llama: no context: %s\n", vkattn_result_message(r));
        return NULL;
    }
    printf("llama: device \"%s\", vkattn %s\n", vkattn_context_device_info(ctx)->name,
           vkattn_version_string());
    return ctx;
}

/* Max |got - want| / max |want| of the rows [first, first + n) of the
 * reference over tokens 0..first + n - 1; *bad when anything is not finite. */
static double compare_with_reference(const vkattn_mha_weights *w, const float *x, const float *y,
                                     uint32_t first, uint32_t n, int *bad)
{
    static float ref[TOKENS * DM];
    vkattn_mha_desc desc = layer_desc();
    int64_t xs[3] = {1, first + n, DM};
    vkattn_ref_mha_args ra = {.x = vkattn_host_tensor_make((void *)x, VKATTN_DTYPE_F32, 3, xs),
                              .y = vkattn_host_tensor_make(ref, VKATTN_DTYPE_F32, 3, xs),
                              .causal = true};
    char err[512];
    if (vkattn_ref_mha(&desc, w, &ra, err, sizeof err) != VKATTN_SUCCESS) {
        fprintf(stderr, "llama: reference: %s\n", err);
        *bad = 1;
        return INFINITY;
    }
    double max_err = 0, max_ref = 0;
    for (size_t i = 0; i < (size_t)n * DM; i++) {
        double want = ref[(size_t)first * DM + i];
        if (!isfinite(y[i]))
            *bad = 1;
        max_err = fmax(max_err, fabs(y[i] - want));
        max_ref = fmax(max_ref, fabs(want));
    }
    return max_err / fmax(max_ref, 1e-30);
}

/* Steps through the sequence: the prompt, then one token at a time. */
static int run(vkattn_context *ctx, vkattn_mha *layer, const vkattn_mha_weights *w, const float *x)
{
    vkattn_kv_cache_desc cd = {.num_kv_heads = KV_HEADS,
                               .num_heads = HEADS,
                               .head_dim = DH,
                               .max_sequences = 1,
                               .capacity = TOKENS};
    vkattn_kv_cache *cache = NULL;
    vkattn_buffer *xb = NULL, *yb = NULL;
    vkattn_buffer_desc bd = {.size = (uint64_t)PROMPT * DM * 4};
    vkattn_result r = vkattn_kv_cache_create(ctx, &cd, &cache);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &xb);
    if (r == VKATTN_SUCCESS)
        r = vkattn_buffer_create(ctx, &bd, &yb);
    static float y[PROMPT * DM];
    int failed = r != VKATTN_SUCCESS;
    const uint32_t sequence = 0;
    for (uint32_t t = 0; !failed && t < TOKENS; t += t ? 1 : PROMPT) {
        uint32_t n = t ? 1 : PROMPT; /* this step's new tokens */
        int64_t shape[3] = {1, n, DM};
        vkattn_mha_step_args sa = {.cache = cache,
                                   .batch = 1,
                                   .sequences = &sequence,
                                   .x = vkattn_tensor_make(xb, 0, VKATTN_DTYPE_F32, 3, shape),
                                   .y = vkattn_tensor_make(yb, 0, VKATTN_DTYPE_F32, 3, shape)};
        uint64_t bytes = (uint64_t)n * DM * 4;
        r = vkattn_buffer_upload(xb, 0, x + (size_t)t * DM, bytes);
        if (r == VKATTN_SUCCESS)
            r = vkattn_mha_step(layer, &sa);
        if (r == VKATTN_SUCCESS)
            r = vkattn_buffer_download(yb, 0, y, bytes);
        if (r != VKATTN_SUCCESS)
            break;
        int bad = 0;
        double e = compare_with_reference(w, x, y, t, n, &bad);
        if (t)
            printf("llama: decode token %u: max relative error %.3g%s\n", t, e,
                   bad ? " and non-finite values" : "");
        else
            printf("llama: prefill of %u tokens: max relative error %.3g%s\n", n, e,
                   bad ? " and non-finite values" : "");
        failed = bad || !(e <= TOLERANCE);
    }
    if (r != VKATTN_SUCCESS) {
        fprintf(stderr, "llama: %s\n", vkattn_context_last_error(ctx));
        failed = 1;
    }
    vkattn_buffer_destroy(xb);
    vkattn_buffer_destroy(yb);
    vkattn_kv_cache_destroy(cache);
    return failed;
}

int main(void)
{
    static llama_weights lw;
    static float x[TOKENS * DM]; /* the token embeddings a model would look up */
    /* about 1/sqrt(fan-in), as trained projections are */
    float amp = 1.0f / sqrtf((float)DM);
    fill(lw.wq, sizeof lw.wq / 4, amp, 1);
    fill(lw.wk, sizeof lw.wk / 4, amp, 2);
    fill(lw.wv, sizeof lw.wv / 4, amp, 3);
    fill(lw.wo, sizeof lw.wo / 4, amp, 4);
    fill(x, sizeof x / 4, 1.0f, 5);
    vkattn_mha_weights w = {.wq = lw.wq, .wk = lw.wk, .wv = lw.wv, .wo = lw.wo};

    vkattn_context *ctx = open_context();
    if (!ctx)
        return 1;
    vkattn_mha_desc desc = layer_desc();
    vkattn_mha *layer = NULL;
    vkattn_result r = vkattn_mha_create(ctx, &desc, &layer);
    if (r == VKATTN_SUCCESS)
        r = vkattn_mha_set_weights(layer, &w);
    int failed = r != VKATTN_SUCCESS;
    if (failed)
        fprintf(stderr, "llama: layer: %s\n", vkattn_context_last_error(ctx));
    else
        failed = run(ctx, layer, &w, x);
    vkattn_mha_destroy(layer);
    uint32_t errors = 0, warnings = 0;
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    vkattn_context_destroy(ctx);
    if (errors || warnings) {
        fprintf(stderr, "llama: validation: %u errors, %u warnings\n", errors, warnings);
        failed = 1;
    }
    printf("llama: %s\n", failed ? "FAILED" : "ok");
    return failed;
}
