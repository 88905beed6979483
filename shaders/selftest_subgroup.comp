// Start-up self-test (src/core/selftest*.c): the subgroup contract the
// subgroup kernels rely on. Built for the subgroup size the device reports
// (SG, with full subgroups required where the device can pin the size), a
// workgroup of two subgroups writes, per invocation, what it saw; the host
// works out the expected values from the subgroup ids and lanes the
// invocations report, so no mapping of invocations to lanes is assumed.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 16u;
layout(constant_id = 1) const uint SG = 8u; // the size the pipeline is built for
layout(constant_id = 2) const uint SG_LOG2 = 3u;

// Per invocation i of N = WORKGROUP_SIZE, at these offsets (in floats):
//   0: gl_SubgroupID, N: gl_SubgroupInvocationID, 2N: subgroupAdd(1.0),
//   3N: subgroupAdd(v), 4N: subgroupMax(v), 5N: subgroupBroadcast(v, 0),
//   6N: subgroupBroadcast(v, SG - 1), 7N + i * SG + k:
//   subgroupShuffle(v, (lane + k) % SG), then 7N + N * SG + i * SG_LOG2 + j:
//   subgroupShuffleXor(v, 1 << j); v = 3 i + 1.
layout(std430, binding = 0) writeonly buffer Out { float o[]; };

void main() {
    const uint N = WORKGROUP_SIZE;
    uint i = gl_LocalInvocationIndex;
    uint lane = gl_SubgroupInvocationID;
    float v = float(3u * i + 1u);
    o[i] = float(gl_SubgroupID);
    o[N + i] = float(lane);
    o[2u * N + i] = subgroupAdd(1.0);
    o[3u * N + i] = subgroupAdd(v);
    o[4u * N + i] = subgroupMax(v);
    o[5u * N + i] = subgroupBroadcast(v, 0u);
    o[6u * N + i] = subgroupBroadcast(v, SG - 1u);
    uint shuffles = 7u * N;
    for (uint k = 0u; k < SG; k++)
        o[shuffles + i * SG + k] = subgroupShuffle(v, (lane + k) % SG);
    uint xors = shuffles + N * SG;
    for (uint j = 0u; j < SG_LOG2; j++)
        o[xors + i * SG_LOG2 + j] = subgroupShuffleXor(v, 1u << j);
}
