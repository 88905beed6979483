// Start-up self-test (src/core/selftest*.c): shared memory and barriers as
// the shared-memory kernels use them: a tile of TILE floats written by the
// whole workgroup, a barrier, read back in another invocation's order,
// written again after a second barrier and read once more.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint TILE = 4096u; // floats, a multiple of WORKGROUP_SIZE

shared float tile[TILE];

layout(std430, binding = 0) writeonly buffer Out { float o[]; };

void main() {
    const uint N = WORKGROUP_SIZE;
    uint i = gl_LocalInvocationIndex;
    for (uint t = i; t < TILE; t += N)
        tile[t] = float(t);
    barrier();
    // each invocation sums the tile's values at t = j, j + N, ... for j = N - 1 - i
    float sum = 0.0;
    for (uint t = N - 1u - i; t < TILE; t += N)
        sum += tile[t];
    barrier();
    for (uint t = i; t < TILE; t += N)
        tile[t] = float(2u * t + 1u);
    barrier();
    o[i] = sum;
    o[N + i] = tile[(i * 7u + 3u) % TILE];
}
