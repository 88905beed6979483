// Linear op, subgroup family (CPU drivers): Y = X W^T + b with the head-split
// store of linear_io.glsl. No shared memory, no barriers.
//
// A subgroup owns TM = ROW_GROUPS * SUBGROUP_SIZE rows of Y; each lane owns
// TN consecutive columns (the workgroup's lanes cover WORKGROUP_SIZE * TN).
// Per trip of 4 * KQ elements of K a lane fetches its columns' W quads and,
// per row group, the quads of X row `lane` of the group; the other lanes'
// X rows arrive by subgroupShuffle with a constant lane index (a broadcast
// on lavapipe, where subgroupBroadcast is slower).
//
// Shaped for lavapipe (figures: docs/kernels.md): a texel fetch costs many
// FMAs whatever its width, so the tile is as large as the spills allow
// (TM x TN accumulators, 8-12 of them live at a time) and each fetch feeds
// TM or TN * 8 FMAs; each column's chain over the trip's k is written whole
// (columns outer), which Mesa 25's code generation spills less than k
// outer (docs/drivers.md); the unrolled trip keeps loop
// control (vector mask code) rare; values live across the loop are few
// (llvmpipe blends every one of them with the loop mask once per trip).
// Grid: x = row blocks (consecutive workgroups share the W columns while
// they are in cache), y = column blocks.
#version 450
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_GOOGLE_include_directive : require
#include "linear_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 32u;
layout(constant_id = 1) const uint SUBGROUP_SIZE = 8u; // == gl_SubgroupSize (full subgroups)
layout(constant_id = 2) const uint ROW_GROUPS = 4u;
layout(constant_id = 3) const uint TN = 8u; // even: packed-f16 pairs stay in one lane
layout(constant_id = 4) const uint KQ = 4u; // quads of K per trip, even

const uint TM = ROW_GROUPS * SUBGROUP_SIZE;

void main() {
    uint lane = gl_SubgroupInvocationID;
    uint n_first = pc.n0 + (gl_WorkGroupID.y * WORKGROUP_SIZE + gl_LocalInvocationID.x) * TN;
    uint m_first = pc.m0 + gl_WorkGroupID.x * TM;

    // Rows and columns past the end are clamped to the last one: fetched,
    // computed and never stored, so the loops need no bounds checks.
    uint xr[ROW_GROUPS];
    [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++)
        xr[g] = x_row(min(m_first + g * SUBGROUP_SIZE + lane, pc.m_end - 1u));
    uint wr[TN];
    [[unroll]] for (uint j = 0u; j < TN; j++)
        wr[j] = w_row(min(n_first + j, pc.n_end - 1u));

    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++)
        acc[i] = 0.0;

    uint trips = pc.K / (4u * KQ);
    for (uint t = 0u; t < trips; t++) {
        uint k = t * 4u * KQ;
        vec4 wq[TN * KQ];
        [[unroll]] for (uint j = 0u; j < TN; j++)
            [[unroll]] for (uint p = 0u; p < KQ; p += 2u)
                w_fetch8(wr[j] + k + 4u * p, k + 4u * p, wq[j * KQ + p], wq[j * KQ + p + 1u]);
        [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++) {
            vec4 xq[KQ];
            [[unroll]] for (uint p = 0u; p < KQ; p += 2u)
                x_fetch8(xr[g] + k + 4u * p, k + 4u * p, xq[p], xq[p + 1u]);
            [[unroll]] for (uint r = 0u; r < SUBGROUP_SIZE; r++) {
                vec4 xs[KQ];
                [[unroll]] for (uint u = 0u; u < KQ; u++)
                    xs[u] = subgroupShuffle(xq[u], r);
                uint row = (g * SUBGROUP_SIZE + r) * TN;
                [[unroll]] for (uint j = 0u; j < TN; j++)
                    [[unroll]] for (uint u = 0u; u < KQ; u++)
                        [[unroll]] for (uint c = 0u; c < 4u; c++)
                            acc[row + j] = fma(xs[u][c], wq[j * KQ + u][c], acc[row + j]);
            }
        }
    }
    // The rest of K one quad at a time (zeros past K in the scalar mode).
    for (uint k = trips * 4u * KQ; k < pc.K; k += 4u) {
        vec4 wq[TN];
        [[unroll]] for (uint j = 0u; j < TN; j++)
            wq[j] = w_fetch4(wr[j] + k, k);
        [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++) {
            vec4 xq = x_fetch4(xr[g] + k, k);
            [[unroll]] for (uint r = 0u; r < SUBGROUP_SIZE; r++) {
                vec4 xs = subgroupShuffle(xq, r);
                uint row = (g * SUBGROUP_SIZE + r) * TN;
                [[unroll]] for (uint j = 0u; j < TN; j++)
                    acc[row + j] += dot(xs, wq[j]);
            }
        }
    }

    // Epilogue: the columns' destinations once, then row i of every group
    // per trip of a loop that is not unrolled; each group's accumulators
    // shift up a row per trip (fully unrolled, the stores make lavapipe's
    // pipeline creation slow; figures: docs/kernels.md).
    Column cols[TN];
    [[unroll]] for (uint j = 0u; j < TN; j++)
        cols[j] = column(min(n_first + j, pc.n_end - 1u));
    if (EPI_SEGS != 0u) {
        // The heads epilogue (linear_io.glsl): row i of every group staged,
        // then stored by the whole workgroup.
        uint n_tile = pc.n0 + gl_WorkGroupID.y * WORKGROUP_SIZE * TN;
        uint col0 = gl_LocalInvocationID.x * TN;
        [[dont_unroll]] for (uint i = 0u; i < SUBGROUP_SIZE; i++) {
            [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++) {
                uint row = g * SUBGROUP_SIZE * TN;
                [[unroll]] for (uint j = 0u; j < TN; j++)
                    epi_put(g, col0 + j, acc[row + j] + cols[j].bias);
                [[unroll]] for (uint r = 0u; r + 1u < SUBGROUP_SIZE; r++)
                    [[unroll]] for (uint j = 0u; j < TN; j++)
                        acc[row + r * TN + j] = acc[row + (r + 1u) * TN + j];
            }
            epi_flush(m_first + i, SUBGROUP_SIZE, n_tile, gl_LocalInvocationID.x, WORKGROUP_SIZE);
        }
        return;
    }
    [[dont_unroll]] for (uint i = 0u; i < SUBGROUP_SIZE; i++) {
        [[unroll]] for (uint g = 0u; g < ROW_GROUPS; g++) {
            uint m = m_first + g * SUBGROUP_SIZE + i;
            uint row = g * SUBGROUP_SIZE * TN;
            if (m < pc.m_end) {
                [[unroll]] for (uint j = 0u; j < TN; j += 2u) {
                    uint n = n_first + j;
                    if (n < pc.n_end)
                        y_store_pair_at(m, cols[j], cols[j + 1u],
                                        vec2(acc[row + j], acc[row + j + 1u]), n + 1u < pc.n_end);
                }
            }
            [[unroll]] for (uint r = 0u; r + 1u < SUBGROUP_SIZE; r++)
                [[unroll]] for (uint j = 0u; j < TN; j++)
                    acc[row + r * TN + j] = acc[row + (r + 1u) * TN + j];
        }
    }
}
