/* Recording helpers (record.c). */
#ifndef VKA_RECORD_H
#define VKA_RECORD_H

#include "core/context.h"
#include "core/kernel.h"
#include "core/pipeline.h"

/* Binds pipeline, descriptors (cached by content) and push constants, then
 * records vkCmdDispatch. */
vkattn_result vka_cmd_dispatch(vkattn_context *ctx, VkCommandBuffer cmd, vka_pipeline *pipeline,
                               const vka_binding *bindings, const void *push, uint32_t gx,
                               uint32_t gy, uint32_t gz);

/* A binding of the context's small dummy buffer, for an absent optional input
 * (`format` VK_FORMAT_UNDEFINED for a storage binding). */
vkattn_result vka_bind_dummy(vkattn_context *ctx, VkFormat format, vka_binding *out);

/* How a dtype is stored for the kernels on this device (the variant to pick).
 * BF16 (pairs in 32-bit words) only for ops that accept bf16: the 3 x 3
 * tables below never see it. */
enum { VKA_STORAGE_F32 = 0, VKA_STORAGE_F16 = 1, VKA_STORAGE_F16P = 2, VKA_STORAGE_BF16 = 3 };
uint32_t vka_storage_kind(const vkattn_context *ctx, vkattn_dtype dtype);

/* Kernel tables indexed [storage of one operand][storage of the other]: the
 * seven pairs that exist, M(<a>_<b>, args...) each (a device uses one f16
 * path, so f16 never meets f16p). */
#define VKA_STORAGE_PAIRS(M, ...)                                              \
    {                                                                          \
        [VKA_STORAGE_F32] = {[VKA_STORAGE_F32] = M(f32_f32, __VA_ARGS__),      \
                             [VKA_STORAGE_F16] = M(f32_f16, __VA_ARGS__),      \
                             [VKA_STORAGE_F16P] = M(f32_f16p, __VA_ARGS__)},   \
        [VKA_STORAGE_F16] = {[VKA_STORAGE_F32] = M(f16_f32, __VA_ARGS__),      \
                             [VKA_STORAGE_F16] = M(f16_f16, __VA_ARGS__)},     \
        [VKA_STORAGE_F16P] = {[VKA_STORAGE_F32] = M(f16p_f32, __VA_ARGS__),    \
                              [VKA_STORAGE_F16P] = M(f16p_f16p, __VA_ARGS__)}, \
    }

/* The same for ops with bf16 variants: [4][4] tables of the seven pairs
 * with a VKA_STORAGE_BF16 in them (the others stay zero: use
 * VKA_STORAGE_PAIRS's table for those). */
#define VKA_STORAGE_PAIRS_BF16(M, ...)                                         \
    {                                                                          \
        [VKA_STORAGE_F32] = {[VKA_STORAGE_BF16] = M(f32_bf16, __VA_ARGS__)},   \
        [VKA_STORAGE_F16] = {[VKA_STORAGE_BF16] = M(f16_bf16, __VA_ARGS__)},   \
        [VKA_STORAGE_F16P] = {[VKA_STORAGE_BF16] = M(f16p_bf16, __VA_ARGS__)}, \
        [VKA_STORAGE_BF16] = {[VKA_STORAGE_F32] = M(bf16_f32, __VA_ARGS__),    \
                              [VKA_STORAGE_F16] = M(bf16_f16, __VA_ARGS__),    \
                              [VKA_STORAGE_F16P] = M(bf16_f16p, __VA_ARGS__),  \
                              [VKA_STORAGE_BF16] = M(bf16_bf16, __VA_ARGS__)}, \
    }

/* Global barrier: compute-shader writes -> compute-shader reads/writes. */
void vka_cmd_compute_barrier(vkattn_context *ctx, VkCommandBuffer cmd);

/* `words` 32-bit words of host `data` written into `buffer` at `offset`
 * (a multiple of 4) as the command buffer runs (vkCmdUpdateBuffer: the data
 * travel with the commands, in pieces of its 65536-byte limit), between
 * barriers: earlier compute reads and writes of any buffer -> this write ->
 * later compute reads. */
void vka_cmd_update_words(vkattn_context *ctx, VkCommandBuffer cmd, VkBuffer buffer,
                          uint64_t offset, const uint32_t *data, uint64_t words);

#endif
