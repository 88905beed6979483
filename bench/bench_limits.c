/* The limit kernels (see bench_limits.h): raw Vulkan pipelines, descriptor
 * sets and buffer views over vkattn buffers, recorded into the context's
 * command buffer between vkattn timestamps. */
#include "bench_limits.h"

#include "bench_common.h"
#include "bench_spirv.h"
#include "bench_vk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sizes of the FMA kernel (limit_fma.comp: 64 invocations per workgroup,
 * 16 x 12 FMAs per iteration). Calibration doubles the workgroups (parallelism
 * for GPUs) and then the iterations until one run lasts FMA_TARGET_MS. */
#define FMA_LOCAL 64u
#define FMA_FLOPS_PER_ITERATION (16.0 * 12.0 * 2.0)
#define FMA_MAX_GROUPS 8192u
#define FMA_MAX_ITERATIONS 16384u /* lavapipe stops loops after 65535 iterations */
#define FMA_TARGET_MS 25.0
/* Read kernel: 64 invocations per workgroup; the access pattern (LANE_RUNS)
 * and the elements per lane are chosen per binding by a short measurement
 * (choose_read_config) among READ_PER_LANE x both patterns. */
#define READ_LOCAL 64u
#define READ_MAX_GROUPS 4096u
static const uint32_t READ_PER_LANE[] = {64, 256, 1024};
#define READ_PER_LANE_COUNT (sizeof READ_PER_LANE / sizeof READ_PER_LANE[0])
#define READ_PATTERNS 2 /* LANE_RUNS 0 and 1 */
#define READ_CHOICE_ROUNDS 2
#define WINDOW_ALIGN 4096u /* >= every minimum offset alignment Vulkan allows (256) */

/* One binding window of the read buffer: its descriptor set (and texel
 * view), its element count and grid. */
typedef struct window {
    VkDescriptorSet set;
    VkBufferView view;
    uint32_t count, groups;
} window;

typedef struct read_path {
    bool available;
    const char *name;
    const bench_spirv *spirv;
    bool texel;
    VkFormat format;               /* texel view format */
    uint32_t element_size;         /* bytes per element of 4 values */
    bench_kernel k[READ_PATTERNS]; /* LANE_RUNS = index */
    uint32_t pattern, per_lane;    /* the chosen configuration */
    window *windows;
    uint32_t window_count;
} read_path;

struct bench_limits {
    vkattn_context *ctx;
    vkattn_timer *timer;
    bench_vk vk;
    uint64_t read_bytes, out_region;
    double sum_f32, sum_f16; /* the read buffer's values summed on the host, per view */
    vkattn_buffer *src, *out, *fma_out;
    VkDescriptorPool pool;
    bench_kernel fma;
    VkDescriptorSet fma_set;
    uint32_t fma_groups, fma_iterations;
    read_path reads[BENCH_READ_BINDINGS];
};

/* Workgroups of every window for about `per_lane` elements per invocation. */
static void set_per_lane(read_path *p, uint32_t per_lane)
{
    p->per_lane = per_lane;
    for (uint32_t w = 0; w < p->window_count; w++) {
        uint32_t groups = p->windows[w].count / (READ_LOCAL * per_lane);
        p->windows[w].groups = groups < 1 ? 1 : groups > READ_MAX_GROUPS ? READ_MAX_GROUPS : groups;
    }
}

/* Which bindings this device offers, and how the read buffer splits into
 * windows each binding can cover (maxStorageBufferRange,
 * maxTexelBufferElements: SwiftShader's texel windows are only 1 MB). */
static void plan_reads(bench_limits *l, VkInstance instance, VkPhysicalDevice phys,
                       PFN_vkGetInstanceProcAddr gipa)
{
    const vkattn_device_info *info = vkattn_context_device_info(l->ctx);
    PFN_vkGetPhysicalDeviceFormatProperties fmt_props =
        (PFN_vkGetPhysicalDeviceFormatProperties)gipa(instance,
                                                      "vkGetPhysicalDeviceFormatProperties");
    bool native16 = info->f16_path == VKATTN_F16_NATIVE;
    read_path *r = l->reads;
    r[BENCH_READ_STORAGE_F32] = (read_path){
        true, "storage_vec4_f32", &bench_spirv_read_storage_f32, false, VK_FORMAT_UNDEFINED, 16};
    r[BENCH_READ_STORAGE_F16] =
        (read_path){true,
                    native16 ? "storage_f16vec4" : "storage_f16_packed",
                    native16 ? &bench_spirv_read_storage_f16 : &bench_spirv_read_storage_f16p,
                    false,
                    VK_FORMAT_UNDEFINED,
                    8};
    r[BENCH_READ_TEXEL_RGBA32F] = (read_path){
        true, "texel_rgba32f", &bench_spirv_read_texel, true, VK_FORMAT_R32G32B32A32_SFLOAT, 16};
    r[BENCH_READ_TEXEL_RGBA16F] = (read_path){
        true, "texel_rgba16f", &bench_spirv_read_texel, true, VK_FORMAT_R16G16B16A16_SFLOAT, 8};
    for (int b = 0; b < BENCH_READ_BINDINGS; b++) {
        read_path *p = &r[b];
        if (p->texel && fmt_props) {
            VkFormatProperties fp;
            fmt_props(phys, p->format, &fp);
            p->available = (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) != 0;
        }
        uint64_t range = p->texel ? info->max_texel_buffer_elements * p->element_size
                                  : info->max_storage_buffer_range;
        uint64_t wbytes = range / WINDOW_ALIGN * WINDOW_ALIGN;
        if (wbytes > l->read_bytes)
            wbytes = l->read_bytes;
        if (!p->available || wbytes == 0) {
            p->available = false;
            continue;
        }
        p->window_count = (uint32_t)((l->read_bytes + wbytes - 1) / wbytes);
        p->windows = calloc(p->window_count, sizeof *p->windows);
        if (!p->windows)
            bench_die(NULL, "out of host memory");
        for (uint32_t w = 0; w < p->window_count; w++) {
            uint64_t bytes = w + 1 < p->window_count ? wbytes : l->read_bytes - wbytes * w;
            p->windows[w].count = (uint32_t)(bytes / p->element_size);
        }
        set_per_lane(p, READ_PER_LANE[0]); /* the most workgroups: sizes the output */
    }
}

/* Descriptor sets (and texel views) of every window of every binding. Window
 * w writes its sums to region w of `out`, so one command buffer's dispatches
 * never write the same bytes. */
static void make_read_sets(bench_limits *l)
{
    VkDeviceSize wbytes = 0;
    for (int b = 0; b < BENCH_READ_BINDINGS; b++) {
        read_path *p = &l->reads[b];
        if (!p->available)
            continue;
        VkDescriptorType types[2] = {p->texel ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                              : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
        for (uint32_t pattern = 0; pattern < READ_PATTERNS; pattern++)
            bench_kernel_create(&l->vk, &p->k[pattern], p->spirv, types, 2, 4, pattern);
        wbytes = p->windows[0].count * (VkDeviceSize)p->element_size;
        for (uint32_t w = 0; w < p->window_count; w++) {
            window *win = &p->windows[w];
            win->set = bench_kernel_allocate_set(
                &l->vk, &p->k[0], l->pool); /* both patterns: identical set layouts */
            VkDeviceSize offset = wbytes * w, bytes = win->count * (VkDeviceSize)p->element_size;
            VkDescriptorBufferInfo src = {vkattn_buffer_vk(l->src), offset, bytes};
            VkDescriptorBufferInfo out = {vkattn_buffer_vk(l->out), l->out_region * w,
                                          win->groups * READ_LOCAL * 4u};
            VkWriteDescriptorSet wr[2] = {{.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = win->set,
                                           .dstBinding = 0,
                                           .descriptorCount = 1,
                                           .descriptorType = types[0]},
                                          {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                           .dstSet = win->set,
                                           .dstBinding = 1,
                                           .descriptorCount = 1,
                                           .descriptorType = types[1],
                                           .pBufferInfo = &out}};
            if (p->texel) {
                VkBufferViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                             .buffer = src.buffer,
                                             .format = p->format,
                                             .offset = offset,
                                             .range = bytes};
                bench_vk_check(l->vk.CreateBufferView(l->vk.device, &vi, NULL, &win->view),
                               "vkCreateBufferView");
                wr[0].pTexelBufferView = &win->view;
            } else {
                wr[0].pBufferInfo = &src;
            }
            l->vk.UpdateDescriptorSets(l->vk.device, 2, wr, 0, NULL);
        }
    }
}

/* The read buffer's contents: f16 values in [0.5, 0.75), so that read as f16
 * or as f32 (two halves per word) every value is a positive normal number
 * (denormals would slow CPU drivers down; positive sums let check_read see a
 * skipped or doubled block). */
static void fill_source(bench_limits *l)
{
    size_t n = (size_t)(l->read_bytes / 2);
    uint16_t *h = malloc(n * 2);
    if (!h)
        bench_die(NULL, "out of host memory");
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        float v = 0.5f + (float)(s >> 9) / 16777216.0f; /* [0.5, 0.75) */
        h[i] = vkattn_f32_to_f16(v);
        l->sum_f16 += vkattn_f16_to_f32(h[i]);
        if (i % 2) {
            uint32_t word = (uint32_t)h[i] << 16 | h[i - 1];
            float f;
            memcpy(&f, &word, 4);
            l->sum_f32 += f;
        }
    }
    BENCH_CHECK(l->ctx, vkattn_buffer_upload(l->src, 0, h, n * 2), "uploading the read buffer");
    free(h);
}

static vkattn_buffer *make_buffer(vkattn_context *ctx, uint64_t size)
{
    vkattn_buffer_desc d = {.size = size};
    vkattn_buffer *b = NULL;
    BENCH_CHECK(ctx, vkattn_buffer_create(ctx, &d, &b), "creating a limit-kernel buffer");
    return b;
}

static void make_pool(bench_limits *l)
{
    uint32_t sets = 1, storage = 1, texel = 0;
    for (int b = 0; b < BENCH_READ_BINDINGS; b++) {
        const read_path *p = &l->reads[b];
        if (!p->available)
            continue;
        sets += p->window_count;
        storage += p->window_count * (p->texel ? 1u : 2u);
        texel += p->texel ? p->window_count : 0u;
    }
    VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, storage},
                                     {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, texel ? texel : 1}};
    VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = sets,
                                     .poolSizeCount = 2,
                                     .pPoolSizes = sizes};
    bench_vk_check(l->vk.CreateDescriptorPool(l->vk.device, &pi, NULL, &l->pool),
                   "vkCreateDescriptorPool");
}

static VkCommandBuffer timed_begin(bench_limits *l)
{
    VkCommandBuffer cmd;
    BENCH_CHECK(l->ctx, vkattn_commands_begin(l->ctx, &cmd), "limit kernel: begin");
    bench_cmd_barrier(l->ctx, cmd);
    BENCH_CHECK(l->ctx, vkattn_cmd_timer_begin(l->timer, cmd, 0), "limit kernel: timer");
    return cmd;
}

static double timed_end(bench_limits *l, VkCommandBuffer cmd)
{
    double ms;
    BENCH_CHECK(l->ctx, vkattn_cmd_timer_end(l->timer, cmd, 0), "limit kernel: timer");
    BENCH_CHECK(l->ctx, vkattn_commands_submit(l->ctx), "limit kernel: submit");
    BENCH_CHECK(l->ctx, vkattn_timer_read_ms(l->timer, 0, &ms), "limit kernel: timer");
    return ms > 1e-6 ? ms : 1e-6;
}

static double fma_run_ms(bench_limits *l)
{
    struct {
        uint32_t iterations;
        float m, c, seed;
    } push = {l->fma_iterations, 0.999f, 0.001f, 0.5f};
    VkCommandBuffer cmd = timed_begin(l);
    l->vk.CmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l->fma.pipeline);
    l->vk.CmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, l->fma.layout, 0, 1,
                                &l->fma_set, 0, NULL);
    l->vk.CmdPushConstants(cmd, l->fma.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof push, &push);
    l->vk.CmdDispatch(cmd, l->fma_groups, 1, 1);
    return timed_end(l, cmd);
}

double bench_limits_fma(bench_limits *l)
{
    double flops = (double)l->fma_groups * FMA_LOCAL * l->fma_iterations * FMA_FLOPS_PER_ITERATION;
    return flops / (fma_run_ms(l) * 1e6);
}

double bench_limits_read(bench_limits *l, bench_read_binding binding)
{
    read_path *p = &l->reads[binding];
    if (!p->available)
        return 0.0;
    const bench_kernel *k = &p->k[p->pattern];
    VkCommandBuffer cmd = timed_begin(l);
    l->vk.CmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
    for (uint32_t w = 0; w < p->window_count; w++) {
        window *win = &p->windows[w];
        l->vk.CmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1, &win->set,
                                    0, NULL);
        l->vk.CmdPushConstants(cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &win->count);
        l->vk.CmdDispatch(cmd, win->groups, 1, 1);
    }
    return (double)l->read_bytes / (timed_end(l, cmd) * 1e6);
}

/* The fastest access pattern and run length of one binding on this device:
 * best of READ_CHOICE_ROUNDS interleaved runs of each configuration (the
 * differences are 2-4x on lavapipe, far above the noise). Warms it up too. */
static void choose_read_config(bench_limits *l, read_path *p, bench_read_binding binding)
{
    double best[READ_PATTERNS][READ_PER_LANE_COUNT] = {{0}};
    for (int round = 0; round < READ_CHOICE_ROUNDS; round++)
        for (uint32_t pattern = 0; pattern < READ_PATTERNS; pattern++)
            for (uint32_t i = 0; i < READ_PER_LANE_COUNT; i++) {
                p->pattern = pattern;
                set_per_lane(p, READ_PER_LANE[i]);
                double gbps = bench_limits_read(l, binding);
                best[pattern][i] = gbps > best[pattern][i] ? gbps : best[pattern][i];
            }
    uint32_t bp = 0, bi = 0;
    for (uint32_t pattern = 0; pattern < READ_PATTERNS; pattern++)
        for (uint32_t i = 0; i < READ_PER_LANE_COUNT; i++)
            if (best[pattern][i] > best[bp][bi]) {
                bp = pattern;
                bi = i;
            }
    p->pattern = bp;
    set_per_lane(p, READ_PER_LANE[bi]);
}

/* The chosen configuration must read every element exactly once: the
 * kernel's per-invocation sums add up to the host's sum. */
static void check_read(bench_limits *l, read_path *p, bench_read_binding binding)
{
    bench_limits_read(l, binding);
    bool f32 = binding == BENCH_READ_STORAGE_F32 || binding == BENCH_READ_TEXEL_RGBA32F;
    double got = 0, want = f32 ? l->sum_f32 : l->sum_f16;
    for (uint32_t w = 0; w < p->window_count; w++) {
        uint32_t n = p->windows[w].groups * READ_LOCAL;
        float *out = malloc(n * sizeof *out);
        if (!out)
            bench_die(NULL, "out of host memory");
        BENCH_CHECK(l->ctx, vkattn_buffer_download(l->out, l->out_region * w, out, n * sizeof *out),
                    "reading the limit kernel's sums");
        for (uint32_t i = 0; i < n; i++)
            got += out[i];
        free(out);
    }
    if (!(got > want * (1 - 1e-4) && got < want * (1 + 1e-4))) {
        fprintf(stderr, "vkattn-bench: read kernel %s summed %.6g, the host %.6g\n", p->name, got,
                want);
        bench_die(NULL, "limit kernel self-check failed");
    }
}

/* Grows the FMA grid until one run lasts FMA_TARGET_MS: workgroups first
 * (a GPU needs them to fill its cores), then iterations. */
static void calibrate_fma(bench_limits *l)
{
    l->fma_groups = 256;
    l->fma_iterations = 256;
    for (int tries = 0; tries < 16; tries++) {
        double ms = fma_run_ms(l);
        if (ms >= FMA_TARGET_MS)
            break;
        uint32_t factor = ms * 8 < FMA_TARGET_MS ? 8u : 2u;
        if (l->fma_groups * factor <= FMA_MAX_GROUPS)
            l->fma_groups *= factor;
        else if (l->fma_iterations * factor <= FMA_MAX_ITERATIONS)
            l->fma_iterations *= factor;
        else
            break;
    }
}

bench_limits *bench_limits_create(vkattn_context *ctx, vkattn_timer *timer, uint64_t read_bytes)
{
    bench_limits *l = calloc(1, sizeof *l);
    if (!l)
        bench_die(NULL, "out of host memory");
    vkattn_vulkan_handles h;
    vkattn_context_vulkan_handles(ctx, &h);
    l->ctx = ctx;
    l->timer = timer;
    l->read_bytes = (read_bytes + WINDOW_ALIGN - 1) / WINDOW_ALIGN * WINDOW_ALIGN;
    bench_vk_load(&l->vk, ctx);
    plan_reads(l, h.instance, h.physical_device, h.get_instance_proc_addr);
    uint32_t windows = 1, groups = 1;
    for (int b = 0; b < BENCH_READ_BINDINGS; b++)
        for (uint32_t w = 0; l->reads[b].available && w < l->reads[b].window_count; w++) {
            windows = l->reads[b].window_count > windows ? l->reads[b].window_count : windows;
            groups =
                l->reads[b].windows[w].groups > groups ? l->reads[b].windows[w].groups : groups;
        }
    l->out_region =
        ((uint64_t)groups * READ_LOCAL * 4 + WINDOW_ALIGN - 1) / WINDOW_ALIGN * WINDOW_ALIGN;
    l->src = make_buffer(ctx, l->read_bytes);
    l->out = make_buffer(ctx, l->out_region * windows);
    l->fma_out = make_buffer(ctx, (uint64_t)FMA_MAX_GROUPS * FMA_LOCAL * 4);
    fill_source(l);
    make_pool(l);
    VkDescriptorType storage = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bench_kernel_create(&l->vk, &l->fma, &bench_spirv_fma, &storage, 1, 16, 0);
    l->fma_set = bench_kernel_allocate_set(&l->vk, &l->fma, l->pool);
    VkDescriptorBufferInfo fo = {vkattn_buffer_vk(l->fma_out), 0, VK_WHOLE_SIZE};
    VkWriteDescriptorSet fw = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                               .dstSet = l->fma_set,
                               .descriptorCount = 1,
                               .descriptorType = storage,
                               .pBufferInfo = &fo};
    l->vk.UpdateDescriptorSets(l->vk.device, 1, &fw, 0, NULL);
    make_read_sets(l);
    calibrate_fma(l);
    for (int b = 0; b < BENCH_READ_BINDINGS; b++)
        if (l->reads[b].available) {
            choose_read_config(l, &l->reads[b], (bench_read_binding)b);
            check_read(l, &l->reads[b], (bench_read_binding)b);
        }
    return l;
}

void bench_limits_destroy(bench_limits *l)
{
    if (!l)
        return;
    for (int b = 0; b < BENCH_READ_BINDINGS; b++) {
        read_path *p = &l->reads[b];
        if (!p->available)
            continue;
        for (uint32_t w = 0; w < p->window_count; w++)
            l->vk.DestroyBufferView(l->vk.device, p->windows[w].view, NULL);
        free(p->windows);
        for (uint32_t pattern = 0; pattern < READ_PATTERNS; pattern++)
            bench_kernel_destroy(&l->vk, &p->k[pattern]);
    }
    bench_kernel_destroy(&l->vk, &l->fma);
    l->vk.DestroyDescriptorPool(l->vk.device, l->pool, NULL);
    vkattn_buffer_destroy(l->src);
    vkattn_buffer_destroy(l->out);
    vkattn_buffer_destroy(l->fma_out);
    free(l);
}

bool bench_limits_has_read(const bench_limits *l, bench_read_binding binding)
{
    return l->reads[binding].available;
}

const char *bench_limits_read_name(const bench_limits *l, bench_read_binding binding)
{
    return l->reads[binding].name;
}

void bench_limits_read_config(const bench_limits *l, bench_read_binding binding, char *text,
                              size_t size)
{
    const read_path *p = &l->reads[binding];
    snprintf(text, size, "%s x%u", p->pattern ? "lane_runs" : "coalesced", p->per_lane);
}

uint64_t bench_limits_read_bytes(const bench_limits *l) { return l->read_bytes; }
