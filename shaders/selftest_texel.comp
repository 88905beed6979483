// Start-up self-test (src/core/selftest*.c): each texel-buffer format the
// kernels read (rgba32f views of f32 data, rgba16f and rgba32ui views of
// f16 data), fetched by every invocation of a workgroup from a texel offset,
// written out through a storage buffer for the host to compare bit for bit.
#version 450
#extension GL_EXT_samplerless_texture_functions : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;

layout(binding = 0) uniform textureBuffer t32;  // rgba32f
layout(binding = 1) uniform textureBuffer t16;  // rgba16f
layout(binding = 2) uniform utextureBuffer tu;  // rgba32ui
layout(std430, binding = 3) writeonly buffer Out { uvec4 o[]; };

layout(push_constant) uniform Push {
    uint first; // the texel read by invocation 0
} pc;

void main() {
    const uint N = WORKGROUP_SIZE;
    uint i = gl_LocalInvocationIndex;
    int t = int(pc.first + i);
    o[i] = floatBitsToUint(texelFetch(t32, t));
    o[N + i] = floatBitsToUint(texelFetch(t16, t));
    o[2u * N + i] = texelFetch(tu, t);
}
