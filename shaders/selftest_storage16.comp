// Start-up self-test (src/core/selftest*.c): 16-bit storage, as the f16
// kernels use it: float16_t loads (scalar and four at a time), stores of
// float16_t, from every invocation of a workgroup.
#version 450
#extension GL_EXT_shader_16bit_storage : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;

layout(std430, binding = 0) readonly buffer In { f16vec4 src4[]; };
layout(std430, binding = 1) readonly buffer InScalar { float16_t src[]; };
layout(std430, binding = 2) writeonly buffer Out { float16_t dst[]; };

void main() {
    const uint N = WORKGROUP_SIZE;
    uint i = gl_LocalInvocationIndex;
    vec4 q = vec4(src4[i]);
    // out: the scalar read back as it was, then the quad's components in reverse
    dst[i] = src[i];
    dst[N + 4u * i] = float16_t(q.w);
    dst[N + 4u * i + 1u] = float16_t(q.z);
    dst[N + 4u * i + 2u] = float16_t(q.y);
    dst[N + 4u * i + 3u] = float16_t(q.x);
}
