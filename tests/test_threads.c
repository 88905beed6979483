/* Threads, as docs/threading.md allows them: (a) four threads on one
 * context, each running submit-and-wait ops (holding the caller's lock the
 * doc asks for: the context's queue and command buffer are externally
 * synchronized) and recording vkattn_cmd_* into command buffers of their own
 * (no lock: recording is concurrent), one MHA layer shared by all; (b) three
 * contexts on three threads at once; (c) one KV cache and one layer used by
 * two threads in turn, each decoding its own sequence. Every result is
 * checked against the CPU reference. pthreads, not C11 threads: clang 14's
 * ThreadSanitizer does not intercept thrd_create (glibc creates the thread
 * behind its back) and crashes in it. Worker threads never call cmocka (its
 * failures longjmp): they count failures and keep the first message. */
#include "test_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>

/* ------------------------------------------------------------ failures */

typedef struct job_status {
    int failures;
    char error[512];
} job_status;

static void job_fail(job_status *st, const char *fmt, ...)
{
    if (st->failures++)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->error, sizeof st->error, fmt, ap);
    va_end(ap);
}

/* Records a failed vkattn call (with the context's last error) and jumps to
 * `out`. */
#define JOB_TRY(st, ctx, out, expr)                                         \
    do {                                                                    \
        vkattn_result job_r_ = (expr);                                      \
        if (job_r_ != VKATTN_SUCCESS) {                                     \
            job_fail(st, "%s -> %s: %s", #expr, vkattn_result_name(job_r_), \
                     vkattn_context_last_error(ctx));                       \
            goto out;                                                       \
        }                                                                   \
    } while (0)
#define JOB_VK(st, out, expr)                                       \
    do {                                                            \
        VkResult job_vr_ = (expr);                                  \
        if (job_vr_ != VK_SUCCESS) {                                \
            job_fail(st, "%s -> VkResult %d", #expr, (int)job_vr_); \
            goto out;                                               \
        }                                                           \
    } while (0)

static void job_check(job_status *st, const float *got, const float *want, size_t n,
                      const char *what, int iteration)
{
    test_error e = test_compare(got, want, n);
    if (e.nonfinite || e.max_rel > TEST_TOL_F32)
        job_fail(st, "%s, iteration %d: max_rel %g (tolerance %g), %zu non-finite, worst at %zu",
                 what, iteration, e.max_rel, TEST_TOL_F32, e.nonfinite, e.worst);
}

static float *rnd(test_rng *r, size_t n, float amp)
{
    float *a = malloc(n * 4);
    test_fill_uniform(r, a, n, -amp, amp);
    return a;
}

/* ---------------------------------------------- a context and its lock */

/* What the threads of one context share: the context, the lock that
 * serializes its submit-and-wait functions and object creation (the caller's
 * duty: vkattn does not serialize them), its Vulkan entry points. */
typedef struct shared_ctx {
    vkattn_context *ctx;
    pthread_mutex_t lock;
    vkattn_vulkan_handles h;
    PFN_vkCreateCommandPool vkCreateCommandPool;
    PFN_vkDestroyCommandPool vkDestroyCommandPool;
    PFN_vkResetCommandPool vkResetCommandPool;
    PFN_vkAllocateCommandBuffers vkAllocateCommandBuffers;
    PFN_vkBeginCommandBuffer vkBeginCommandBuffer;
    PFN_vkEndCommandBuffer vkEndCommandBuffer;
    PFN_vkCmdPipelineBarrier vkCmdPipelineBarrier;
    PFN_vkCmdFillBuffer vkCmdFillBuffer;
    PFN_vkCreateFence vkCreateFence;
    PFN_vkDestroyFence vkDestroyFence;
    PFN_vkResetFences vkResetFences;
    PFN_vkWaitForFences vkWaitForFences;
    PFN_vkQueueSubmit vkQueueSubmit;
} shared_ctx;

static bool shared_init(shared_ctx *s, vkattn_context *ctx)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    if (pthread_mutex_init(&s->lock, NULL) != 0)
        return false;
    vkattn_context_vulkan_handles(ctx, &s->h);
#define LOAD(name) s->name = (PFN_##name)s->h.get_device_proc_addr(s->h.device, #name)
    LOAD(vkCreateCommandPool);
    LOAD(vkDestroyCommandPool);
    LOAD(vkResetCommandPool);
    LOAD(vkAllocateCommandBuffers);
    LOAD(vkBeginCommandBuffer);
    LOAD(vkEndCommandBuffer);
    LOAD(vkCmdPipelineBarrier);
    LOAD(vkCmdFillBuffer);
    LOAD(vkCreateFence);
    LOAD(vkDestroyFence);
    LOAD(vkResetFences);
    LOAD(vkWaitForFences);
    LOAD(vkQueueSubmit);
#undef LOAD
    return true;
}

/* A thread's own command pool, command buffer and fence. */
typedef struct own_cmd {
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
} own_cmd;

static bool own_cmd_make(const shared_ctx *s, own_cmd *c, job_status *st)
{
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .queueFamilyIndex = s->h.queue_family_index};
    JOB_VK(st, out, s->vkCreateCommandPool(s->h.device, &pci, NULL, &c->pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = c->pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    JOB_VK(st, out, s->vkAllocateCommandBuffers(s->h.device, &cai, &c->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    JOB_VK(st, out, s->vkCreateFence(s->h.device, &fci, NULL, &c->fence));
    return true;
out:
    return false;
}

static void own_cmd_free(const shared_ctx *s, own_cmd *c)
{
    if (c->fence)
        s->vkDestroyFence(s->h.device, c->fence, NULL);
    if (c->pool)
        s->vkDestroyCommandPool(s->h.device, c->pool, NULL);
}

/* Begins the thread's command buffer with a barrier after everything
 * earlier on the queue (uploads, other threads' work). */
static bool own_cmd_begin(const shared_ctx *s, own_cmd *c, job_status *st)
{
    JOB_VK(st, out, s->vkResetCommandPool(s->h.device, c->pool, 0));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    JOB_VK(st, out, s->vkBeginCommandBuffer(c->cmd, &bi));
    VkMemoryBarrier all = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_MEMORY_WRITE_BIT,
                           VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    s->vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                            VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &all, 0, NULL, 0, NULL);
    return true;
out:
    return false;
}

/* Ends the command buffer with the barrier the header's contract asks after
 * vkattn_cmd_* (compute writes -> transfer and host reads), submits it under
 * the lock (the queue is the context's) and waits on the thread's own fence
 * outside the lock. */
static bool own_cmd_run(shared_ctx *s, own_cmd *c, job_status *st)
{
    VkMemoryBarrier after = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT,
                             VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT};
    s->vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                            &after, 0, NULL, 0, NULL);
    JOB_VK(st, out, s->vkEndCommandBuffer(c->cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                       .commandBufferCount = 1,
                       .pCommandBuffers = &c->cmd};
    pthread_mutex_lock(&s->lock);
    VkResult vr = s->vkQueueSubmit(s->h.queue, 1, &si, c->fence);
    pthread_mutex_unlock(&s->lock);
    JOB_VK(st, out, vr);
    JOB_VK(st, out, s->vkWaitForFences(s->h.device, 1, &c->fence, VK_TRUE, UINT64_MAX));
    JOB_VK(st, out, s->vkResetFences(s->h.device, 1, &c->fence));
    return true;
out:
    return false;
}

/* A vkattn buffer holding `bytes` bytes of `data` (zeros when NULL). */
static vkattn_buffer *job_buffer(vkattn_context *ctx, const void *data, size_t bytes,
                                 job_status *st)
{
    vkattn_buffer *b = NULL;
    vkattn_buffer_desc bd = {.size = bytes};
    JOB_TRY(st, ctx, out, vkattn_buffer_create(ctx, &bd, &b));
    void *zeros = data ? NULL : calloc(1, bytes);
    vkattn_result r = vkattn_buffer_upload(b, 0, data ? data : zeros, bytes);
    free(zeros);
    JOB_TRY(st, ctx, out, r);
    return b;
out:
    vkattn_buffer_destroy(b);
    return NULL;
}

/* ---------------------------------------------------- the shared layer */

/* Dm 32, 4 query heads over 2 key/value heads of 8, biases. */
enum { DM = 32, HQ = 4, HKV = 2, QKV_ROWS = (HQ + 2 * HKV) * (DM / HQ) };

typedef struct layer_weights {
    vkattn_mha_desc desc;
    float *wqkv, *wo, *bqkv, *bo;
    vkattn_mha_weights w;
} layer_weights;

static void layer_weights_make(layer_weights *lw, uint64_t seed)
{
    test_rng r = test_rng_seed(seed);
    lw->desc =
        (vkattn_mha_desc){.embed_dim = DM, .num_heads = HQ, .num_kv_heads = HKV, .bias = true};
    lw->wqkv = rnd(&r, (size_t)QKV_ROWS * DM, 0.25f);
    lw->wo = rnd(&r, (size_t)DM * DM, 0.25f);
    lw->bqkv = rnd(&r, QKV_ROWS, 0.2f);
    lw->bo = rnd(&r, DM, 0.2f);
    lw->w = (vkattn_mha_weights){.wqkv = lw->wqkv, .wo = lw->wo, .bqkv = lw->bqkv, .bo = lw->bo};
}

static void layer_weights_free(layer_weights *lw)
{
    free(lw->wqkv), free(lw->wo), free(lw->bqkv), free(lw->bo);
}

/* ------------------------------------------- one thread's ops and data */

/* Attention q [1, 4, 7, 16] over k, v [1, 2, 9, 16] (GQA); linear
 * x [5, 24] W [16, 24] + b; a forward of the shared layer on x [1, 6, 32]
 * with the thread's own scratch. Causal or not by the thread's parity. */
enum { AQ = 4 * 7 * 16, AK = 2 * 9 * 16, LX = 5 * 24, LW = 16 * 24, LB = 16, LY = 5 * 16 };
enum { MT = 6, MX = MT * DM };
static const int64_t a_qs[4] = {1, 4, 7, 16}, a_ks[4] = {1, 2, 9, 16};
static const int64_t l_xs[2] = {5, 24}, l_ws[2] = {16, 24}, l_bs[1] = {16}, l_ys[2] = {5, 16};
static const int64_t m_xs[3] = {1, MT, DM};

typedef struct work {
    shared_ctx *s;
    vkattn_mha *layer;
    bool causal;
    int iterations;
    own_cmd cmd;
    /* host data and the reference results */
    float *aq, *ak, *av, *lx, *lw, *lb, *mx;
    float want_a[AQ], want_l[LY], want_m[MX], got[AQ + LY + MX];
    /* device tensors */
    vkattn_buffer *buf[9]; /* q k v out, x w b y, mha x y scratch */
    vkattn_attention_args att;
    vkattn_linear_args lin;
    vkattn_mha_forward_args fwd;
    job_status st;
} work;

/* Host data, references, buffers (under the lock: creating a context's
 * objects is externally synchronized), the own command buffer. */
static bool work_setup(work *w, shared_ctx *s, vkattn_mha *layer, const layer_weights *lw,
                       uint64_t seed)
{
    job_status *st = &w->st;
    vkattn_context *ctx = s->ctx;
    w->s = s;
    w->layer = layer;
    test_rng r = test_rng_seed(seed);
    w->aq = rnd(&r, AQ, 1.0f), w->ak = rnd(&r, AK, 1.0f), w->av = rnd(&r, AK, 1.0f);
    w->lx = rnd(&r, LX, 1.0f), w->lw = rnd(&r, LW, 0.5f), w->lb = rnd(&r, LB, 0.5f);
    w->mx = rnd(&r, MX, 1.0f);
    char err[256] = "";
    vkattn_ref_attention_args ra = {
        .q = vkattn_host_tensor_make(w->aq, VKATTN_DTYPE_F32, 4, a_qs),
        .k = vkattn_host_tensor_make(w->ak, VKATTN_DTYPE_F32, 4, a_ks),
        .v = vkattn_host_tensor_make(w->av, VKATTN_DTYPE_F32, 4, a_ks),
        .out = vkattn_host_tensor_make(w->want_a, VKATTN_DTYPE_F32, 4, a_qs),
        .causal = w->causal};
    vkattn_ref_linear_args rl = {.x = vkattn_host_tensor_make(w->lx, VKATTN_DTYPE_F32, 2, l_xs),
                                 .w = vkattn_host_tensor_make(w->lw, VKATTN_DTYPE_F32, 2, l_ws),
                                 .b = vkattn_host_tensor_make(w->lb, VKATTN_DTYPE_F32, 1, l_bs),
                                 .y =
                                     vkattn_host_tensor_make(w->want_l, VKATTN_DTYPE_F32, 2, l_ys)};
    vkattn_ref_mha_args rm = {.x = vkattn_host_tensor_make(w->mx, VKATTN_DTYPE_F32, 3, m_xs),
                              .y = vkattn_host_tensor_make(w->want_m, VKATTN_DTYPE_F32, 3, m_xs),
                              .causal = w->causal};
    if (vkattn_ref_attention(&ra, err, sizeof err) || vkattn_ref_linear(&rl, err, sizeof err) ||
        vkattn_ref_mha(&lw->desc, &lw->w, &rm, err, sizeof err)) {
        job_fail(st, "reference: %s", err);
        return false;
    }
    uint64_t scratch = 0;
    bool ok = false;
    pthread_mutex_lock(&s->lock);
    JOB_TRY(st, ctx, out, vkattn_mha_scratch_size(layer, 1, MT, MT, &scratch));
    const void *data[9] = {w->aq, w->ak, w->av, NULL, w->lx, w->lw, w->lb, NULL, w->mx};
    const size_t n[9] = {AQ, AK, AK, AQ, LX, LW, LB, LY, MX};
    for (int i = 0; i < 9; i++)
        if (!(w->buf[i] = job_buffer(ctx, data[i], n[i] * 4, st)))
            goto out;
    vkattn_buffer *b_my = job_buffer(ctx, NULL, MX * 4, st);
    vkattn_buffer *b_scratch = b_my ? job_buffer(ctx, NULL, scratch, st) : NULL;
    if (!b_scratch) {
        vkattn_buffer_destroy(b_my);
        goto out;
    }
    ok = own_cmd_make(s, &w->cmd, st);
    w->att =
        (vkattn_attention_args){.q = vkattn_tensor_make(w->buf[0], 0, VKATTN_DTYPE_F32, 4, a_qs),
                                .k = vkattn_tensor_make(w->buf[1], 0, VKATTN_DTYPE_F32, 4, a_ks),
                                .v = vkattn_tensor_make(w->buf[2], 0, VKATTN_DTYPE_F32, 4, a_ks),
                                .out = vkattn_tensor_make(w->buf[3], 0, VKATTN_DTYPE_F32, 4, a_qs),
                                .causal = w->causal};
    w->lin = (vkattn_linear_args){.x = vkattn_tensor_make(w->buf[4], 0, VKATTN_DTYPE_F32, 2, l_xs),
                                  .w = vkattn_tensor_make(w->buf[5], 0, VKATTN_DTYPE_F32, 2, l_ws),
                                  .b = vkattn_tensor_make(w->buf[6], 0, VKATTN_DTYPE_F32, 1, l_bs),
                                  .y = vkattn_tensor_make(w->buf[7], 0, VKATTN_DTYPE_F32, 2, l_ys)};
    w->fwd =
        (vkattn_mha_forward_args){.x = vkattn_tensor_make(w->buf[8], 0, VKATTN_DTYPE_F32, 3, m_xs),
                                  .y = vkattn_tensor_make(b_my, 0, VKATTN_DTYPE_F32, 3, m_xs),
                                  .causal = w->causal,
                                  .scratch = b_scratch};
out:
    pthread_mutex_unlock(&s->lock);
    return ok;
}

static void work_free(work *w)
{
    pthread_mutex_lock(&w->s->lock);
    for (int i = 0; i < 9; i++)
        vkattn_buffer_destroy(w->buf[i]);
    vkattn_buffer_destroy(w->fwd.y.buffer);
    vkattn_buffer_destroy(w->fwd.scratch);
    own_cmd_free(w->s, &w->cmd);
    pthread_mutex_unlock(&w->s->lock);
    free(w->aq), free(w->ak), free(w->av), free(w->lx), free(w->lw), free(w->lb), free(w->mx);
}

/* Downloads the three outputs (staging: under the lock) and checks them. */
static bool work_check(work *w, const char *path, int it)
{
    job_status *st = &w->st;
    vkattn_context *ctx = w->s->ctx;
    bool ok = false;
    pthread_mutex_lock(&w->s->lock);
    JOB_TRY(st, ctx, out, vkattn_buffer_download(w->buf[3], 0, w->got, AQ * 4));
    JOB_TRY(st, ctx, out, vkattn_buffer_download(w->buf[7], 0, w->got + AQ, LY * 4));
    JOB_TRY(st, ctx, out, vkattn_buffer_download(w->fwd.y.buffer, 0, w->got + AQ + LY, MX * 4));
    ok = true;
out:
    pthread_mutex_unlock(&w->s->lock);
    if (!ok)
        return false;
    char what[96];
    snprintf(what, sizeof what, "%s attention", path);
    job_check(st, w->got, w->want_a, AQ, what, it);
    snprintf(what, sizeof what, "%s linear", path);
    job_check(st, w->got + AQ, w->want_l, LY, what, it);
    snprintf(what, sizeof what, "%s MHA forward", path);
    job_check(st, w->got + AQ + LY, w->want_m, MX, what, it);
    return st->failures == 0;
}

/* Zeroes the outputs and runs the three ops through the submit-and-wait
 * functions, all under the lock; the forward uses the layer's own scratch
 * (reserved beforehand, so it never grows while others record). */
static bool work_submit_and_wait(work *w, int it)
{
    job_status *st = &w->st;
    vkattn_context *ctx = w->s->ctx;
    static const float zeros[AQ] = {0};
    vkattn_mha_forward_args fwd = w->fwd;
    fwd.scratch = NULL;
    bool ok = false;
    pthread_mutex_lock(&w->s->lock);
    JOB_TRY(st, ctx, out, vkattn_buffer_upload(w->buf[3], 0, zeros, AQ * 4));
    JOB_TRY(st, ctx, out, vkattn_buffer_upload(w->buf[7], 0, zeros, LY * 4));
    JOB_TRY(st, ctx, out, vkattn_buffer_upload(w->fwd.y.buffer, 0, zeros, MX * 4));
    JOB_TRY(st, ctx, out, vkattn_attention(ctx, &w->att));
    JOB_TRY(st, ctx, out, vkattn_linear(ctx, &w->lin));
    JOB_TRY(st, ctx, out, vkattn_mha_forward(w->layer, &fwd));
    ok = true;
out:
    pthread_mutex_unlock(&w->s->lock);
    return ok && work_check(w, "submit-and-wait", it);
}

/* Records the three ops into the thread's own command buffer without any
 * lock (concurrently with the other threads), then runs and checks it. */
static bool work_record(work *w, int it)
{
    job_status *st = &w->st;
    shared_ctx *s = w->s;
    VkCommandBuffer cmd = w->cmd.cmd;
    if (!own_cmd_begin(s, &w->cmd, st))
        return false;
    s->vkCmdFillBuffer(cmd, vkattn_buffer_vk(w->buf[3]), 0, VK_WHOLE_SIZE, 0);
    s->vkCmdFillBuffer(cmd, vkattn_buffer_vk(w->buf[7]), 0, VK_WHOLE_SIZE, 0);
    s->vkCmdFillBuffer(cmd, vkattn_buffer_vk(w->fwd.y.buffer), 0, VK_WHOLE_SIZE, 0);
    VkMemoryBarrier filled = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_TRANSFER_WRITE_BIT,
                              VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    s->vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &filled, 0, NULL, 0, NULL);
    /* independent ops: distinct outputs, shared inputs only read */
    JOB_TRY(st, s->ctx, out, vkattn_cmd_attention(s->ctx, cmd, &w->att));
    JOB_TRY(st, s->ctx, out, vkattn_cmd_linear(s->ctx, cmd, &w->lin));
    JOB_TRY(st, s->ctx, out, vkattn_cmd_mha_forward(w->layer, cmd, &w->fwd));
    return own_cmd_run(s, &w->cmd, st) && work_check(w, "recorded", it);
out:
    s->vkEndCommandBuffer(cmd);
    return false;
}

static void work_loop(work *w)
{
    for (int it = 0; it < w->iterations; it++)
        if (!work_submit_and_wait(w, it) || !work_record(w, it))
            return;
}

static void *work_thread(void *arg)
{
    work_loop(arg);
    return NULL;
}

/* ---------------------------------------- (a) four threads, one context */

enum { A_THREADS = 4, A_ITERATIONS = 4 };

static void test_four_threads_one_context(void **state)
{
    test_gpu *g = *state;
    shared_ctx s;
    assert_true(shared_init(&s, g->ctx));
    layer_weights lw;
    layer_weights_make(&lw, 11);
    vkattn_mha *layer = test_mha_create(g->ctx, &lw.desc, &lw.w);
    TEST_OK(g->ctx, vkattn_mha_reserve(layer, 1, MT, MT));
    work *w = calloc(A_THREADS, sizeof *w);
    for (int i = 0; i < A_THREADS; i++) {
        w[i].causal = i % 2 == 0; /* different pipelines too */
        w[i].iterations = A_ITERATIONS;
        if (!work_setup(&w[i], &s, layer, &lw, 100 + (uint64_t)i))
            fail_msg("setup %d: %s", i, w[i].st.error);
    }
    pthread_t t[A_THREADS];
    for (int i = 0; i < A_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, work_thread, &w[i]), 0);
    for (int i = 0; i < A_THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < A_THREADS; i++)
        if (w[i].st.failures)
            fail_msg("thread %d: %d failures, first: %s", i, w[i].st.failures, w[i].st.error);
    for (int i = 0; i < A_THREADS; i++)
        work_free(&w[i]);
    free(w);
    vkattn_mha_destroy(layer);
    layer_weights_free(&lw);
    pthread_mutex_destroy(&s.lock);
    test_assert_no_validation_messages(g->ctx);
}

/* ---------------------------------- (b) three contexts on three threads */

enum { B_CONTEXTS = 3, B_ITERATIONS = 3 };

typedef struct context_job {
    const char *device;
    const layer_weights *lw;
    uint64_t seed;
    work w;
} context_job;

/* A context of its own, created, used and destroyed on this thread: two
 * recording threads' worth of work, run one after the other. */
static void *context_thread(void *arg)
{
    context_job *job = arg;
    job_status *st = &job->w.st;
    vkattn_context_desc desc = {.device = job->device, .flags = VKATTN_CONTEXT_VALIDATION};
    vkattn_context *ctx = NULL;
    vkattn_mha *layer = NULL;
    shared_ctx s;
    if (vkattn_context_create(&desc, &ctx) != VKATTN_SUCCESS) {
        job_fail(st, "vkattn_context_create failed");
        return NULL;
    }
    if (!shared_init(&s, ctx)) {
        job_fail(st, "pthread_mutex_init failed");
        vkattn_context_destroy(ctx);
        return NULL;
    }
    JOB_TRY(st, ctx, out, vkattn_mha_create(ctx, &job->lw->desc, &layer));
    JOB_TRY(st, ctx, out, vkattn_mha_set_weights(layer, &job->lw->w));
    JOB_TRY(st, ctx, out, vkattn_mha_reserve(layer, 1, MT, MT));
    job->w.causal = job->seed % 2 == 0;
    job->w.iterations = B_ITERATIONS;
    if (work_setup(&job->w, &s, layer, job->lw, job->seed))
        work_loop(&job->w);
    work_free(&job->w);
out:
    vkattn_mha_destroy(layer);
    uint32_t errors = 0, warnings = 0;
    vkattn_context_validation_counts(ctx, &errors, &warnings);
    if (errors || warnings)
        job_fail(st, "%u validation errors, %u warnings", errors, warnings);
    vkattn_context_destroy(ctx);
    pthread_mutex_destroy(&s.lock);
    return NULL;
}

static void test_three_contexts_three_threads(void **state)
{
    (void)state;
    layer_weights lw;
    layer_weights_make(&lw, 12);
    context_job *jobs = calloc(B_CONTEXTS, sizeof *jobs);
    pthread_t t[B_CONTEXTS];
    for (int i = 0; i < B_CONTEXTS; i++) {
        jobs[i].device = getenv("VKATTN_DEVICE");
        jobs[i].lw = &lw;
        jobs[i].seed = 200 + (uint64_t)i;
        assert_int_equal(pthread_create(&t[i], NULL, context_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < B_CONTEXTS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < B_CONTEXTS; i++)
        if (jobs[i].w.st.failures)
            fail_msg("context %d: %d failures, first: %s", i, jobs[i].w.st.failures,
                     jobs[i].w.st.error);
    free(jobs);
    layer_weights_free(&lw);
}

/* ------------------------- (c) one KV cache, one layer, two threads */

enum { C_PROMPT = 3, C_TOTAL = 9 };

typedef struct decode_job {
    shared_ctx *s;
    vkattn_mha *layer;
    vkattn_kv_cache *cache; /* shared: used under s->lock only */
    uint32_t sequence;
    float *x, *want, *y; /* [C_TOTAL, DM] */
    vkattn_buffer *bx, *by, *scratch;
    own_cmd cmd;
    job_status st;
} decode_job;

/* Prefill then one-token steps of this thread's sequence; odd steps are
 * recorded (vkattn_cmd_mha_step with own scratch) into the thread's command
 * buffer, the others submit-and-wait. The cache is externally synchronized:
 * every use of it (recording a step advances its lengths) holds the lock;
 * the recorded step's fence is waited on outside it. */
static void *decode_thread(void *arg)
{
    decode_job *job = arg;
    job_status *st = &job->st;
    shared_ctx *s = job->s;
    vkattn_context *ctx = s->ctx;
    uint32_t pos = 0;
    for (int step = 0; pos < C_TOTAL; step++) {
        uint32_t t = step == 0 ? C_PROMPT : 1, len = 0;
        int64_t shape[3] = {1, t, DM};
        vkattn_mha_step_args a = {.cache = job->cache,
                                  .batch = 1,
                                  .sequences = &job->sequence,
                                  .x = vkattn_tensor_make(job->bx, 0, VKATTN_DTYPE_F32, 3, shape),
                                  .y = vkattn_tensor_make(job->by, 0, VKATTN_DTYPE_F32, 3, shape)};
        bool recorded = step % 2 == 1, locked = true;
        pthread_mutex_lock(&s->lock);
        JOB_TRY(st, ctx, out, vkattn_kv_cache_length(job->cache, job->sequence, &len));
        if (len != pos) {
            job_fail(st, "sequence %u holds %u tokens before step %d, not %u", job->sequence, len,
                     step, pos);
            goto out;
        }
        JOB_TRY(st, ctx, out,
                vkattn_buffer_upload(job->bx, 0, job->x + (size_t)pos * DM, t * DM * 4));
        if (recorded) {
            a.scratch = job->scratch;
            if (!own_cmd_begin(s, &job->cmd, st))
                goto out;
            vkattn_result r = vkattn_cmd_mha_step(job->layer, job->cmd.cmd, &a);
            pthread_mutex_unlock(&s->lock); /* own_cmd_run takes it to submit */
            locked = false;
            if (r != VKATTN_SUCCESS) {
                s->vkEndCommandBuffer(job->cmd.cmd);
                JOB_TRY(st, ctx, out, r);
            }
            if (!own_cmd_run(s, &job->cmd, st))
                goto out;
            pthread_mutex_lock(&s->lock);
            locked = true;
        } else {
            JOB_TRY(st, ctx, out, vkattn_mha_step(job->layer, &a));
        }
        JOB_TRY(st, ctx, out,
                vkattn_buffer_download(job->by, 0, job->y + (size_t)pos * DM, t * DM * 4));
        pthread_mutex_unlock(&s->lock);
        pos += t;
        continue;
    out:
        if (locked)
            pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    test_error e = test_compare(job->y, job->want, (size_t)C_TOTAL * DM);
    if (e.nonfinite || e.max_rel > TEST_TOL_F32)
        job_fail(st, "sequence %u: max_rel %g, %zu non-finite", job->sequence, e.max_rel,
                 e.nonfinite);
    return NULL;
}

static void test_two_threads_one_cache(void **state)
{
    test_gpu *g = *state;
    vkattn_context *ctx = g->ctx;
    shared_ctx s;
    assert_true(shared_init(&s, ctx));
    layer_weights lw;
    layer_weights_make(&lw, 13);
    vkattn_mha *layer = test_mha_create(ctx, &lw.desc, &lw.w);
    vkattn_kv_cache_desc cd = {.num_kv_heads = HKV,
                               .num_heads = HQ,
                               .head_dim = DM / HQ,
                               .max_sequences = 2,
                               .capacity = 16,
                               .block_size = 4};
    vkattn_kv_cache *cache = NULL;
    TEST_OK(ctx, vkattn_kv_cache_create(ctx, &cd, &cache));
    uint64_t scratch = 0, scratch1 = 0;
    TEST_OK(ctx, vkattn_mha_step_scratch_size(layer, 1, C_PROMPT, &scratch));
    TEST_OK(ctx, vkattn_mha_step_scratch_size(layer, 1, 1, &scratch1));
    if (scratch1 > scratch)
        scratch = scratch1;
    decode_job jobs[2];
    test_rng r = test_rng_seed(300);
    int64_t shape[3] = {1, C_TOTAL, DM};
    for (uint32_t i = 0; i < 2; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].s = &s;
        jobs[i].layer = layer;
        jobs[i].cache = cache;
        jobs[i].sequence = i;
        jobs[i].x = rnd(&r, (size_t)C_TOTAL * DM, 1.0f);
        jobs[i].y = calloc((size_t)C_TOTAL * DM, 4);
        jobs[i].want = malloc((size_t)C_TOTAL * DM * 4);
        vkattn_ref_mha_args ra = {
            .x = vkattn_host_tensor_make(jobs[i].x, VKATTN_DTYPE_F32, 3, shape),
            .y = vkattn_host_tensor_make(jobs[i].want, VKATTN_DTYPE_F32, 3, shape),
            .causal = true};
        assert_int_equal(vkattn_ref_mha(&lw.desc, &lw.w, &ra, NULL, 0), VKATTN_SUCCESS);
        jobs[i].bx = test_buffer_with(ctx, NULL, C_PROMPT * DM * 4);
        jobs[i].by = test_buffer_with(ctx, NULL, C_PROMPT * DM * 4);
        jobs[i].scratch = test_buffer_with(ctx, NULL, scratch);
        if (!own_cmd_make(&s, &jobs[i].cmd, &jobs[i].st))
            fail_msg("%s", jobs[i].st.error);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, decode_thread, &jobs[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++)
        if (jobs[i].st.failures)
            fail_msg("thread %d: %d failures, first: %s", i, jobs[i].st.failures, jobs[i].st.error);
    for (int i = 0; i < 2; i++) {
        own_cmd_free(&s, &jobs[i].cmd);
        TEST_DESTROY_BUFFERS(jobs[i].bx, jobs[i].by, jobs[i].scratch);
        free(jobs[i].x), free(jobs[i].y), free(jobs[i].want);
    }
    vkattn_kv_cache_destroy(cache);
    vkattn_mha_destroy(layer);
    layer_weights_free(&lw);
    pthread_mutex_destroy(&s.lock);
    test_assert_no_validation_messages(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_threads_one_context),
        cmocka_unit_test(test_three_contexts_three_threads),
        cmocka_unit_test(test_two_threads_one_cache),
    };
    return cmocka_run_group_tests(tests, test_gpu_setup, test_gpu_teardown);
}
