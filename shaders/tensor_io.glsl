// Tensor bindings by storage type. A kernel variant is compiled with one of
// these per tensor (chosen by -D defines in CMake) and then reads and writes
// through name_load/name_store whatever the storage is:
//   f32     float[]
//   f16     float16_t[]                     (needs 16-bit storage)
//   f16p    uint[], two halves per word     (every device; the bytes are the
//           same as f16: little-endian halves, low half first)
// The storage names are tokens pasted into macro names, so they must never
// be #defined themselves.
// Element indices are relative to the start of the binding. Arithmetic stays
// fp32 in every case.
#ifndef VKATTN_TENSOR_IO_GLSL
#define VKATTN_TENSOR_IO_GLSL

#if defined(NEEDS_16BIT_STORAGE)
#extension GL_EXT_shader_16bit_storage : require
#endif

// ---- read-only tensors
#define DECLARE_RO_f32(binding_, name_)                                             \
    layout(set = 0, binding = binding_) readonly buffer name_##_buffer { float name_[]; }; \
    float name_##_load(uint i) { return name_[i]; }

#define DECLARE_RO_f16(binding_, name_)                                                 \
    layout(set = 0, binding = binding_) readonly buffer name_##_buffer { float16_t name_[]; }; \
    float name_##_load(uint i) { return float(name_[i]); }

#define DECLARE_RO_f16p(binding_, name_)                                           \
    layout(set = 0, binding = binding_) readonly buffer name_##_buffer { uint name_[]; }; \
    float name_##_load(uint i) { return unpackHalf2x16(name_[i >> 1])[i & 1u]; }

// ---- written tensors: name_store_pair(p, v, keep) writes elements 2p and
// 2p+1; keep.x / keep.y false leaves that element untouched (a tensor that
// starts or ends inside a 32-bit word shares it with its neighbour).
#define DECLARE_WO_f32(binding_, name_)                                    \
    layout(set = 0, binding = binding_) buffer name_##_buffer { float name_[]; }; \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                    \
        if (write.x) name_[2u * p] = v.x;                                     \
        if (write.y) name_[2u * p + 1u] = v.y;                                \
    }

#define DECLARE_WO_f16(binding_, name_)                                        \
    layout(set = 0, binding = binding_) buffer name_##_buffer { float16_t name_[]; }; \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                        \
        if (write.x) name_[2u * p] = float16_t(v.x);                              \
        if (write.y) name_[2u * p + 1u] = float16_t(v.y);                         \
    }

#define DECLARE_WO_f16p(binding_, name_)                                   \
    layout(set = 0, binding = binding_) buffer name_##_buffer { uint name_[]; };  \
    void name_##_store_pair(uint p, vec2 v, bvec2 write) {                    \
        uint packed = packHalf2x16(v);                                        \
        if (!all(write)) {                                                    \
            uint old = name_[p];                                              \
            if (!write.x) packed = (packed & 0xffff0000u) | (old & 0xffffu);  \
            if (!write.y) packed = (packed & 0xffffu) | (old & 0xffff0000u);  \
        }                                                                     \
        if (any(write)) name_[p] = packed;                                    \
    }

// DECLARE_RO(binding, name, f32|f16|f16p) picks the macro above by storage type.
#define DECLARE_RO_(binding_, name_, dt_) DECLARE_RO_##dt_(binding_, name_)
#define DECLARE_RO(binding_, name_, dt_) DECLARE_RO_(binding_, name_, dt_)
#define DECLARE_WO_(binding_, name_, dt_) DECLARE_WO_##dt_(binding_, name_)
#define DECLARE_WO(binding_, name_, dt_) DECLARE_WO_(binding_, name_, dt_)

// Linear invocation index over a 2D grid of 1D workgroups of `wg_size`
// invocations (x is capped by maxComputeWorkGroupCount[0], so large launches
// spill into y). The size is passed in rather than read from
// gl_WorkGroupSize, which glslang folds to its default when the size is a
// specialization constant.
uint linear_invocation(uint wg_size) {
    return (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * wg_size +
           gl_LocalInvocationID.x;
}

#endif
