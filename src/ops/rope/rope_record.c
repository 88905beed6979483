/* Recording of vkattn_rope (rope.comp): the kernel table, the angle table
 * of the desc (a constant buffer kept by the context), and one dispatch per
 * box of rows that fits the device's bindings. */
#include "ops/rope/rope_internal.h"
#include "core/const_buffers.h"
#include "core/host.h"
#include "core/limits.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/windows.h"
#include "spec/rope.h"
#include "spec/size_math.h"
#include "vka_spirv.h"

#include <string.h>

#define WORKGROUP 64u

#define ROPE_KERNEL(v)                                                              \
    {                                                                               \
        .name = "rope_" #v, .spirv = &vka_spirv_rope_##v, .binding_count = 4,       \
        .bindings = {VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, VKA_BINDING_STORAGE, \
                     VKA_BINDING_STORAGE},                                          \
        .push_size = sizeof(rope_push)                                              \
    }

typedef struct rope_push {
    uint32_t x_first, o_first;
    uint32_t pos_first, pos_t;
    uint32_t xs_b, xs_h, xs_t;
    uint32_t os_b, os_h, os_t;
    uint32_t nb, nh, nt, per_row;
    uint32_t half_dims, head_dim;
    uint32_t flags;
    uint32_t position_base;
} rope_push;

enum { FLAG_GPTJ = 1u, FLAG_POSITIONS = 2u, FLAG_IN_PLACE = 4u };

/* [storage of x and out] */
static const vka_kernel rope_kernels[4] = {
    [VKA_STORAGE_F32] = ROPE_KERNEL(f32),
    [VKA_STORAGE_F16] = ROPE_KERNEL(f16),
    [VKA_STORAGE_F16P] = ROPE_KERNEL(f16p),
    [VKA_STORAGE_BF16] = ROPE_KERNEL(bf16),
};

/* ---- the angle table */

static void fill_table(void *dst, uint64_t bytes, const void *user)
{
    (void)bytes;
    vka_rope_table_fill(user, dst);
}

/* The table of a resolved desc, keyed by the fields it depends on (the
 * style and the unused scaling fields are zeroed, so descs that differ only
 * there share one). */
static vkattn_result table_get(vkattn_context *ctx, const vkattn_rope_desc *r, vkattn_buffer **out)
{
    vkattn_rope_desc key;
    memset(&key, 0, sizeof key);
    key.theta = r->theta;
    key.dims = r->dims;
    key.scaling = r->scaling;
    if (r->scaling != VKATTN_ROPE_SCALING_NONE)
        key.factor = r->factor;
    if (r->scaling == VKATTN_ROPE_SCALING_LLAMA3) {
        key.low_freq_factor = r->low_freq_factor;
        key.high_freq_factor = r->high_freq_factor;
        key.original_max_positions = r->original_max_positions;
    }
    return vka_const_buffer_get(ctx, &key, sizeof key, vka_rope_table_floats(&key) * sizeof(float),
                                fill_table, &key, out);
}

/* ---- boxes of rows */

/* A box over (B, H, T) with every D: its x and out windows fit one binding
 * each. */
static bool box_fits(const vkattn_context *ctx, const vka_rope_call *c, const vka_box *box)
{
    return vka_box_fits_storage(ctx, &c->x, box) && vka_box_fits_storage(ctx, &c->out, box);
}

/* The box size: the whole tensor if it fits, else halving the counts from
 * the batch dimension inwards until a box fits; false when not even one
 * row does. */
static bool plan_box(const vkattn_context *ctx, const vka_rope_call *c, vka_box *size)
{
    memset(size, 0, sizeof *size);
    for (uint32_t d = 0; d < 4; d++)
        size->count[d] = (uint64_t)c->x.shape[d];
    uint32_t d = 0;
    while (!box_fits(ctx, c, size)) {
        if (d == 3)
            return false;
        if (size->count[d] > 1)
            size->count[d] = (size->count[d] + 1) / 2;
        else
            d++;
    }
    return true;
}

/* A stride for the push constants: 0 where the box has one index (the
 * stride may then not fit 32 bits; it is never used). Inside a fitting box
 * the others span less than 2^31 elements. */
static uint32_t box_stride(const vkattn_tensor *t, const vka_box *box, uint32_t d)
{
    return box->count[d] > 1 ? (uint32_t)t->strides[d] : 0;
}

/* Binds the box's window of `t` (binding `b`, first element `*first`). */
static vkattn_result bind_box(vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box,
                              vka_binding *b, uint32_t *first)
{
    uint64_t start, extent;
    size_t es = vkattn_dtype_size(t->dtype);
    vka_box_span(t, box, &start, &extent);
    return vka_bind_window(ctx, t->buffer, t->offset + start * es, extent * es, es, b, first);
}

/* One dispatch over `box`. */
static vkattn_result dispatch_box(vkattn_context *ctx, VkCommandBuffer cmd, const vka_rope_call *c,
                                  vka_pipeline *pipeline, rope_push push, vka_binding b[4],
                                  const vka_box *box, uint32_t wg)
{
    VKA_TRY(bind_box(ctx, &c->x, box, &b[0], &push.x_first));
    if (c->in_place) {
        b[1] = b[0];
        push.o_first = push.x_first;
    } else {
        VKA_TRY(bind_box(ctx, &c->out, box, &b[1], &push.o_first));
    }
    if (c->positions.buffer) {
        uint64_t T = (uint64_t)c->positions.shape[1];
        uint64_t first = box->start[0] * T + box->start[2];
        uint64_t count = (box->count[0] - 1) * T + box->count[2];
        VKA_TRY(vka_bind_window(ctx, c->positions.buffer, c->positions.offset + first * 4,
                                count * 4, 4, &b[3], &push.pos_first));
    }
    push.xs_b = box_stride(&c->x, box, 0);
    push.xs_h = box_stride(&c->x, box, 1);
    push.xs_t = box_stride(&c->x, box, 2);
    push.os_b = box_stride(&c->out, box, 0);
    push.os_h = box_stride(&c->out, box, 1);
    push.os_t = box_stride(&c->out, box, 2);
    push.nb = (uint32_t)box->count[0];
    push.nh = (uint32_t)box->count[1];
    push.nt = (uint32_t)box->count[2];
    push.position_base = c->position_offset + (uint32_t)box->start[2];
    uint64_t items = (uint64_t)push.nb * push.nh * push.nt * push.per_row;
    uint32_t gx, gy;
    vka_grid_2d(ctx, vka_div_up64(items, wg), &gx, &gy);
    return vka_cmd_dispatch(ctx, cmd, pipeline, b, &push, gx, gy, 1);
}

vkattn_result vka_rope_record(vkattn_context *ctx, VkCommandBuffer cmd, const vka_rope_call *c)
{
    const uint64_t B = (uint64_t)c->x.shape[0], H = (uint64_t)c->x.shape[1],
                   T = (uint64_t)c->x.shape[2], D = (uint64_t)c->x.shape[3];
    vka_box size;
    if (!plan_box(ctx, c, &size))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "one row of args->x (D %llu) does not fit the device's storage binding "
                        "range %llu",
                        (unsigned long long)D, (unsigned long long)vka_storage_window_limit(ctx));
    const vka_kernel *kernel = &rope_kernels[vka_storage_kind(ctx, c->x.dtype)];
    uint32_t wg = vka_workgroup_size(ctx, WORKGROUP);
    vka_pipeline *pipeline;
    VKA_TRY(vka_pipeline_get(ctx, kernel, &wg, 1, &pipeline));
    uint64_t table_bytes = vka_rope_table_floats(&c->rope) * sizeof(float);
    if (table_bytes > vka_storage_window_limit(ctx))
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "args->rope.dims %u: its angle table (%llu bytes) exceeds the device's "
                        "storage binding range %llu",
                        c->rope.dims, (unsigned long long)table_bytes,
                        (unsigned long long)vka_storage_window_limit(ctx));
    vkattn_buffer *table;
    VKA_TRY(table_get(ctx, &c->rope, &table));

    vka_binding b[4];
    memset(b, 0, sizeof b);
    b[2] = (vka_binding){.buffer = table, .offset = 0, .range = table_bytes};
    if (!c->positions.buffer)
        VKA_TRY(vka_bind_dummy(ctx, VK_FORMAT_UNDEFINED, &b[3]));
    rope_push push;
    memset(&push, 0, sizeof push);
    push.half_dims = c->rope.dims / 2;
    push.head_dim = (uint32_t)D;
    /* in place, the pass-through dims stay as they are */
    push.per_row = push.half_dims + (c->in_place ? 0 : (uint32_t)(D - c->rope.dims + 1) / 2);
    push.pos_t = (uint32_t)T;
    push.flags = (c->rope.style == VKATTN_ROPE_GPTJ ? FLAG_GPTJ : 0) |
                 (c->positions.buffer ? FLAG_POSITIONS : 0) | (c->in_place ? FLAG_IN_PLACE : 0);

    bool first = true;
    vka_box box;
    memset(&box, 0, sizeof box);
    box.count[3] = D;
    for (uint64_t b0 = 0; b0 < B; b0 += size.count[0])
        for (uint64_t h0 = 0; h0 < H; h0 += size.count[1])
            for (uint64_t t0 = 0; t0 < T; t0 += size.count[2]) {
                box.start[0] = b0, box.start[1] = h0, box.start[2] = t0;
                box.count[0] = vka_min_u64(size.count[0], B - b0);
                box.count[1] = vka_min_u64(size.count[1], H - h0);
                box.count[2] = vka_min_u64(size.count[2], T - t0);
                /* windows of neighbouring boxes may share words at their
                 * edges (f16p stores rewrite whole words) */
                if (!first)
                    vka_cmd_compute_barrier(ctx, cmd);
                first = false;
                VKA_TRY(dispatch_box(ctx, cmd, c, pipeline, push, b, &box, wg));
            }
    return VKATTN_SUCCESS;
}
