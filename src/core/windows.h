/* Binding windows (windows.c): the ranges of buffers that one binding
 * covers, within the device's limits. */
#ifndef VKA_WINDOWS_H
#define VKA_WINDOWS_H

#include "core/context.h"
#include "core/kernel.h"

/* A storage-buffer binding that covers [offset, offset + bytes) of `buffer`:
 * the binding starts at the aligned address at or below `offset`, and
 * `*first_element` is where `offset` falls in it, in elements of
 * `element_size`. Fails when the window exceeds maxStorageBufferRange (callers
 * split larger work). */
vkattn_result vka_bind_window(vkattn_context *ctx, const vkattn_buffer *buffer, uint64_t offset,
                              uint64_t bytes, size_t element_size, vka_binding *out,
                              uint32_t *first_element);

/* Like vka_bind_window, for a uniform texel buffer of `format`
 * (VK_FORMAT_R32G32B32A32_SFLOAT for f32 data, R16G16B16A16_SFLOAT for f16):
 * `*first_element` counts scalar elements from the view's start. Fails with
 * VKATTN_ERROR_UNSUPPORTED when the window exceeds maxTexelBufferElements or
 * `offset` does not fall on a texel (callers then use storage bindings). */
vkattn_result vka_bind_texel_window(vkattn_context *ctx, const vkattn_buffer *buffer,
                                    uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                    vka_binding *out, uint32_t *first_element);
/* A box of a tensor: first index and count per dimension (rank entries). */
typedef struct vka_box {
    uint64_t start[VKATTN_MAX_RANK];
    uint64_t count[VKATTN_MAX_RANK];
} vka_box;

/* Elements from the tensor's first element to the box's first (`first`) and
 * from the box's first to its last, inclusive (`extent`). */
void vka_box_span(const vkattn_tensor *t, const vka_box *box, uint64_t *first, uint64_t *extent);
/* Whether a box fits one storage-buffer binding (and 32-bit indices) /
 * one uniform-texel-buffer binding, with room for the alignment of any start. */
bool vka_box_fits_storage(const vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box);
bool vka_box_fits_texel(const vkattn_context *ctx, const vkattn_tensor *t, const vka_box *box);
/* Bytes a box spans (for messages). */
uint64_t vka_box_bytes(const vkattn_tensor *t, const vka_box *box);
/* The largest storage binding used: min(maxStorageBufferRange, 2 GiB). */
uint64_t vka_storage_window_limit(const vkattn_context *ctx);

/* A uniform-texel-buffer binding of [offset, offset + bytes) of `buffer`
 * holding `dtype` data: an rgba32f view (f32) or an rgba32ui view (f16 or
 * bf16, eight a texel; the kernels' "tex16" / "texbf16" inputs), with `*first` the quad (four
 * elements) where `offset` falls. `offset` must be on a quad. The window must
 * fit (vka_box_fits_texel). */
vkattn_result vka_bind_texel_quads(vkattn_context *ctx, const vkattn_buffer *buffer,
                                   uint64_t offset, uint64_t bytes, vkattn_dtype dtype,
                                   vka_binding *out, uint32_t *first);
#endif
