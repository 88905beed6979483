// Linear op, subgroup family (CPU drivers): Y = X W^T + b with the head-split
// store of linear_io.glsl. No shared memory, no barriers.
//
// A subgroup owns TM = ROW_GROUPS * SUBGROUP_SIZE rows of Y; each of its lanes
// owns TN consecutive columns, so the lanes of a workgroup cover
// WORKGROUP_SIZE * TN columns. Per 4 elements of K a lane fetches one vec4 of
// X per row group (row `lane` of the group) and one vec4 of W per column,
// and takes the other lanes' X rows with subgroupShuffle by constant lane
// index (a register move on lavapipe; subgroupBroadcast is far slower there).
// Grid: x = column blocks (consecutive workgroups reuse the same X rows from
// cache), y = row blocks.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
#include "linear_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 32u;
layout(constant_id = 1) const uint SUBGROUP_SIZE = 8u; // == gl_SubgroupSize (full subgroups)
layout(constant_id = 2) const uint ROW_GROUPS = 4u;
layout(constant_id = 3) const uint TN = 4u; // even: packed-f16 pairs stay in one lane

const uint TM = ROW_GROUPS * SUBGROUP_SIZE;

void main() {
    uint lane = gl_SubgroupInvocationID;
    uint n_first = pc.n0 + (gl_WorkGroupID.x * WORKGROUP_SIZE + gl_LocalInvocationID.x) * TN;
    uint m_first = pc.m0 + gl_WorkGroupID.y * TM;

    // Rows and columns past the end are clamped to the last one: fetched,
    // computed and never stored, so the loop needs no bounds checks.
    uint xr[ROW_GROUPS];
    [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++)
        xr[g] = x_row(min(m_first + g * SUBGROUP_SIZE + lane, pc.m_end - 1u));
    uint wr[TN];
    [[unroll]] for (uint j = 0u; j < TN; j++)
        wr[j] = w_row(min(n_first + j, pc.n_end - 1u));

    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++)
        acc[i] = 0.0;

    for (uint k = 0u; k < pc.K; k += 4u) {
        vec4 wv[TN];
        [[unroll]] for (uint j = 0u; j < TN; j++)
            wv[j] = w_fetch4(wr[j] + k, k);
        [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++) {
            vec4 xv = x_fetch4(xr[g] + k, k);
            [[unroll]] for (uint r = 0u; r < SUBGROUP_SIZE; r++) {
                vec4 xs = subgroupShuffle(xv, r);
                [[unroll]] for (uint j = 0u; j < TN; j++) {
                    uint i = (g * SUBGROUP_SIZE + r) * TN + j;
                    acc[i] = fma(xs.x, wv[j].x, acc[i]);
                    acc[i] = fma(xs.y, wv[j].y, acc[i]);
                    acc[i] = fma(xs.z, wv[j].z, acc[i]);
                    acc[i] = fma(xs.w, wv[j].w, acc[i]);
                }
            }
        }
    }

    // Epilogue: the columns' destinations once, then row by row in a loop
    // that is not unrolled; the accumulators shift up a row per trip. (Fully
    // unrolled, the stores made pipeline creation take seconds on lavapipe.)
    Column cols[TN];
    [[unroll]] for (uint j = 0u; j < TN; j++)
        cols[j] = column(min(n_first + j, pc.n_end - 1u));
    [[dont_unroll]] for (uint i = 0u; i < TM; i++) {
        uint m = m_first + i;
        if (m >= pc.m_end)
            break;
        [[unroll]] for (uint j = 0u; j < TN; j += 2u) {
            uint n = n_first + j;
            if (n < pc.n_end)
                y_store_pair_at(m, cols[j], cols[j + 1u], vec2(acc[j], acc[j + 1u]),
                                n + 1u < pc.n_end);
        }
        [[unroll]] for (uint r = 0u; r + 1u < TM; r++)
            [[unroll]] for (uint j = 0u; j < TN; j++)
                acc[r * TN + j] = acc[(r + 1u) * TN + j];
    }
}
