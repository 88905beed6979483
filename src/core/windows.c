/* Binding windows: the range of a buffer one binding covers, within the
 * device's limits (maxStorageBufferRange, maxTexelBufferElements, offset
 * alignments), and the boxes of a tensor a dispatch touches. Ops cut their
 * work into dispatches whose windows fit. */
#include "core/windows.h"

#include "core/buffer.h"
#include "core/host.h"
#include "spec/dtype.h"
#include "spec/size_math.h"

vkattn_result vka_bind_window(vkattn_context *ctx, const vkattn_buffer *buffer, uint64_t offset,
                              uint64_t bytes, size_t element_size, vka_binding *out,
                              uint32_t *first_element)
{
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
    if (align < 16)
        align = 16;
    uint64_t start = vka_align_down(offset, align);
    uint64_t range = vka_align_up(offset - start + bytes, 4);
    if (range > buffer->vk_size - start)
        range = buffer->vk_size - start;
    if (range > ctx->info.max_storage_buffer_range)
        return vka_fail(ctx, VKATTN_ERROR_OUT_OF_RANGE,
                        "a binding of %llu bytes exceeds the device's maxStorageBufferRange %llu",
                        (unsigned long long)range,
                        (unsigned long long)ctx->info.max_storage_buffer_range);
    out->buffer = buffer;
    out->offset = start;
    out->range = range;
    out->format = VK_FORMAT_UNDEFINED;
    *first_element = (uint32_t)((offset - start) / element_size);
    return VKATTN_SUCCESS;
}

vkattn_result vka_bind_texel_window(vkattn_context *ctx, const vkattn_buffer *buffer,
                                    uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                    vka_binding *out, uint32_t *first_element)
{
    size_t esize = vkattn_dtype_size(dtype);
    uint64_t texel = 4 * esize;
    uint64_t align = ctx->info.min_texel_buffer_offset_alignment;
    if (align < texel)
        align = texel;
    if (dtype == VKATTN_DTYPE_U8 || dtype == VKATTN_DTYPE_I32 || !esize)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "no texel format for dtype %d", (int)dtype);
    if (!buffer->texel_ok)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "the buffer has no VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT usage");
    uint64_t start = vka_align_down(offset, align);
    if ((offset - start) % texel)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED, "offset %llu is not on a %llu-byte texel",
                        (unsigned long long)offset, (unsigned long long)texel);
    uint64_t range = vka_align_up(offset - start + bytes, texel);
    if (range > buffer->vk_size - start)
        range = vka_align_down(buffer->vk_size - start, texel);
    if (range / texel > ctx->info.max_texel_buffer_elements)
        return vka_fail(ctx, VKATTN_ERROR_UNSUPPORTED,
                        "a texel binding of %llu texels exceeds maxTexelBufferElements %llu",
                        (unsigned long long)(range / texel),
                        (unsigned long long)ctx->info.max_texel_buffer_elements);
    out->buffer = buffer;
    out->offset = start;
    out->range = range;
    out->format =
        dtype == VKATTN_DTYPE_F16 ? VK_FORMAT_R16G16B16A16_SFLOAT : VK_FORMAT_R32G32B32A32_SFLOAT;
    *first_element = (uint32_t)((offset - start) / esize);
    return VKATTN_SUCCESS;
}

uint64_t vka_storage_window_limit(const vkattn_context *ctx)
{
    /* 2 GiB keeps every element index of a window inside 31 bits. */
    return vka_min_u64(ctx->info.max_storage_buffer_range, 1ull << 31);
}

void vka_box_span(const vkattn_tensor *t, const vka_box *box, uint64_t *first, uint64_t *extent)
{
    uint64_t f = 0, e = 0;
    for (uint32_t d = 0; d < t->rank; d++) {
        f += box->start[d] * (uint64_t)t->strides[d];
        e += (box->count[d] - 1) * (uint64_t)t->strides[d];
    }
    *first = f;
    *extent = e + 1;
}

uint64_t vka_box_bytes(const vkattn_tensor *t, const vka_box *box)
{
    uint64_t first, extent;
    vka_box_span(t, box, &first, &extent);
    if (vka_dtype_is_quantized(t->dtype)) /* bound from the tensor's offset on */
        return vkattn_dtype_row_bytes(t->dtype, first + extent);
    return extent * vkattn_dtype_size(t->dtype);
}

bool vka_box_fits_storage(const vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box)
{
    uint64_t align = ctx->info.min_storage_buffer_offset_alignment;
    if (align < 16)
        align = 16;
    /* Whatever the start, the window is at most align + bytes, rounded to 4. */
    return vka_box_bytes(t, box) + align + 4 <= vka_storage_window_limit(ctx);
}

/* Texel views hold 16-byte texels whatever the dtype: rgba32f for f32 data,
 * rgba32ui for f16 and bf16 data (eight halves a texel, unpacked by the kernels: a
 * CPU driver pays per fetch, so it streams faster than an rgba16f view). */
#define VKA_TEXEL_BYTES 16u

bool vka_box_fits_texel(const vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box)
{
    if (!t->buffer->texel_ok) /* a host buffer without uniform-texel usage */
        return false;
    uint64_t align = ctx->info.min_texel_buffer_offset_alignment;
    if (align < VKA_TEXEL_BYTES)
        align = VKA_TEXEL_BYTES;
    uint64_t bytes = vka_box_bytes(t, box) + align + VKA_TEXEL_BYTES;
    return bytes / VKA_TEXEL_BYTES <= ctx->info.max_texel_buffer_elements && bytes <= (1ull << 31);
}

vkattn_result vka_bind_texel_quads(vkattn_context *ctx, const vkattn_buffer *buffer,
                                   uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                   vka_binding *out, uint32_t *first)
{
    /* The view starts on a texel at or below `offset` (a multiple of 16
     * bytes for f32; of 8 for f16 chunks, which may start mid-texel). */
    uint64_t lead = offset % VKA_TEXEL_BYTES;
    uint32_t first_word = 0;
    vkattn_result r = vka_bind_texel_window(ctx, buffer, offset - lead, bytes + lead,
                                            VKATTN_DTYPE_F32, out, &first_word);
    if (r != VKATTN_SUCCESS)
        return r;
    uint64_t byte = 4ull * first_word + lead; /* from the view's start */
    if (dtype == VKATTN_DTYPE_F16 || dtype == VKATTN_DTYPE_BF16)
        out->format = VK_FORMAT_R32G32B32A32_UINT;
    *first = (uint32_t)(byte / (4 * vkattn_dtype_size(dtype))); /* in quads */
    return VKATTN_SUCCESS;
}
