// Linear op for few rows (decode): Y = X W^T + b with the head-split store of
// linear_io.glsl, for at most MR rows of X. Bandwidth-bound on W, which is
// read exactly once: a team of LANES invocations owns NR consecutive output
// columns (W rows); its lanes split K (lane l takes quad number l, l + LANES,
// ..., or pairs of quads in input mode 3) for all MR rows (adjacent lanes on
// adjacent texels of a W row: the fastest pattern on lavapipe, see
// docs/kernels.md), then the partial sums are reduced:
//   GEMV_SUBGROUP 1: the team is one subgroup, reduced with subgroupAdd;
//   GEMV_SUBGROUP 0: the team is the workgroup, reduced in shared memory
//                    (WORKGROUP_SIZE a power of two).
// Rows past the end are clamped to the last row (computed, never stored).
#version 450
#extension GL_GOOGLE_include_directive : require
#if GEMV_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "linear_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint SUBGROUP_SIZE = 8u; // == gl_SubgroupSize (subgroup variant)
layout(constant_id = 2) const uint MR = 1u;     // rows of X (1, 2, 4 or 8)
layout(constant_id = 3) const uint NR = 4u;     // columns per team, even
layout(constant_id = 4) const uint UNROLL = 4u; // vec4 steps per lane per loop trip

#if defined(X_PACKED) || defined(W_PACKED)
#define STEP 2
#else
#define STEP 1
#endif

#if GEMV_SUBGROUP
const uint LANES = SUBGROUP_SIZE;
#else
const uint LANES = WORKGROUP_SIZE;
shared float partial[MR * NR * WORKGROUP_SIZE];
#endif

void main() {
#if GEMV_SUBGROUP
    uint lane = gl_SubgroupInvocationID;
    uint team = gl_WorkGroupID.x * (WORKGROUP_SIZE / SUBGROUP_SIZE) + gl_SubgroupID;
#else
    uint lane = gl_LocalInvocationID.x;
    uint team = gl_WorkGroupID.x;
#endif
    uint n_first = pc.n0 + team * NR;

    uint xr[MR];
    [[unroll]] for (uint r = 0u; r < MR; r++)
        xr[r] = x_row(min(pc.m0 + r, pc.m_end - 1u));
    uint wr[NR];
    [[unroll]] for (uint j = 0u; j < NR; j++)
        wr[j] = w_row(min(n_first + j, pc.n_end - 1u));

    float acc[MR * NR];
    [[unroll]] for (uint i = 0u; i < MR * NR; i++)
        acc[i] = 0.0;

#if defined(W_Q8_0) && INPUT_MODE == 0
    // q8_0 weights through rgba32ui texels (CPU drivers gather texels as
    // vectors but load storage buffers lane by lane): a lane takes groups of
    // 8 blocks (256 values, 272 bytes = 17 texels; K is a multiple of 256),
    // fetches each row's 17 texels once, and finds every block's scale and
    // int8 words at fixed places in them.
    for (uint k = lane * 256u; k < pc.K; k += LANES * 256u) {
        uvec4 wt[NR * 17u];
        [[unroll]] for (uint j = 0u; j < NR; j++) {
            uint t0 = ((wr[j] + k) >> 8) * 17u;
            [[unroll]] for (uint t = 0u; t < 17u; t++)
                wt[j * 17u + t] = w_texel(t0 + t);
        }
        [[unroll]] for (uint r = 0u; r < MR; r++) {
            [[unroll]] for (uint kb = 0u; kb < 8u; kb++) {
                float part[NR];
                [[unroll]] for (uint j = 0u; j < NR; j++)
                    part[j] = 0.0;
                [[unroll]] for (uint i = 0u; i < 8u; i++) {
                    uint kk = k + kb * 32u + 4u * i;
                    vec4 xv = x_fetch4(xr[r] + kk, kk);
                    uint o = kb * 34u + 2u + 4u * i; // byte of the word in the group
                    [[unroll]] for (uint j = 0u; j < NR; j++) {
                        uint lo = wt[j * 17u + (o >> 4)][(o >> 2) & 3u];
                        uint hi = wt[j * 17u + ((o + 2u) >> 4)][((o + 2u) >> 2) & 3u];
                        uint w = (o & 2u) == 0u ? lo : (lo >> 16u) | (hi << 16u);
                        ivec4 v = ivec4(int(w << 24u), int(w << 16u), int(w << 8u), int(w)) >> 24;
                        part[j] += dot(xv, vec4(v));
                    }
                }
                uint o = kb * 34u; // the block's scale
                [[unroll]] for (uint j = 0u; j < NR; j++) {
                    uint sw = wt[j * 17u + (o >> 4)][(o >> 2) & 3u];
                    float d = unpackHalf2x16((o & 2u) == 0u ? sw : sw >> 16u).x;
                    acc[r * NR + j] = fma(d, part[j], acc[r * NR + j]);
                }
            }
        }
    }
#elif defined(W_Q8_0)
    // q8_0 weights: a lane takes whole blocks (lane l: blocks l, l + LANES,
    // ...; K is a multiple of 64), each read once as its scale and 8 words of
    // int8, for all MR rows of X.
    for (uint k = lane * 32u; k < pc.K; k += LANES * 32u) {
        float d[NR];
        uint q[NR * 8u];
        [[unroll]] for (uint j = 0u; j < NR; j++) {
            uint qj[8];
            w_block(wr[j] + k, d[j], qj);
            [[unroll]] for (uint i = 0u; i < 8u; i++)
                q[j * 8u + i] = qj[i];
        }
        [[unroll]] for (uint r = 0u; r < MR; r++) {
            float part[NR];
            [[unroll]] for (uint j = 0u; j < NR; j++)
                part[j] = 0.0;
            [[unroll]] for (uint i = 0u; i < 8u; i++) {
                vec4 xv = x_fetch4(xr[r] + k + 4u * i, k + 4u * i);
                [[unroll]] for (uint j = 0u; j < NR; j++) {
                    uint w = q[j * 8u + i];
                    ivec4 v = ivec4(int(w << 24u), int(w << 16u), int(w << 8u), int(w)) >> 24;
                    part[j] += dot(xv, vec4(v));
                }
            }
            [[unroll]] for (uint j = 0u; j < NR; j++)
                acc[r * NR + j] = fma(d[j], part[j], acc[r * NR + j]);
        }
    }
#else
    uint k4 = (pc.K + 3u) / 4u;
    uint q0 = 0u;
    // Whole trips without bounds checks, unrolled (loop control is costly on
    // CPU drivers), then the remainder one quad at a time. A step covers
    // STEP quads: 2 where an operand comes 8 halves per fetch (mode 3; K is
    // then a multiple of 8), so every fetch brings its whole texel.
    for (; q0 + LANES * UNROLL * STEP <= k4; q0 += LANES * UNROLL * STEP) {
        [[unroll]] for (uint u = 0u; u < UNROLL; u++) {
            uint k = (q0 + (u * LANES + lane) * STEP) * 4u;
            vec4 wv[NR * STEP];
            [[unroll]] for (uint j = 0u; j < NR; j++) {
#if STEP == 2
                w_fetch8(wr[j] + k, k, wv[2u * j], wv[2u * j + 1u]);
#else
                wv[j] = w_fetch4(wr[j] + k, k);
#endif
            }
            [[unroll]] for (uint r = 0u; r < MR; r++) {
                vec4 xv[STEP];
#if STEP == 2
                x_fetch8(xr[r] + k, k, xv[0], xv[1]);
#else
                xv[0] = x_fetch4(xr[r] + k, k);
#endif
                [[unroll]] for (uint j = 0u; j < NR; j++) {
                    float s = acc[r * NR + j];
                    [[unroll]] for (uint h = 0u; h < STEP; h++) {
                        s = fma(xv[h].x, wv[j * STEP + h].x, s);
                        s = fma(xv[h].y, wv[j * STEP + h].y, s);
                        s = fma(xv[h].z, wv[j * STEP + h].z, s);
                        s = fma(xv[h].w, wv[j * STEP + h].w, s);
                    }
                    acc[r * NR + j] = s;
                }
            }
        }
    }
    for (uint q = q0 + lane; q < k4; q += LANES) {
        uint k = q * 4u;
        vec4 wv[NR];
        [[unroll]] for (uint j = 0u; j < NR; j++)
            wv[j] = w_fetch4(wr[j] + k, k);
        [[unroll]] for (uint r = 0u; r < MR; r++) {
            vec4 xv = x_fetch4(xr[r] + k, k);
            [[unroll]] for (uint j = 0u; j < NR; j++)
                acc[r * NR + j] += dot(xv, wv[j]);
        }
    }
#endif

#if GEMV_SUBGROUP
    [[unroll]] for (uint i = 0u; i < MR * NR; i++)
        acc[i] = subgroupAdd(acc[i]);
#else
    [[unroll]] for (uint i = 0u; i < MR * NR; i++)
        partial[i * WORKGROUP_SIZE + lane] = acc[i];
    barrier();
    for (uint s = WORKGROUP_SIZE / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            [[unroll]] for (uint i = 0u; i < MR * NR; i++)
                partial[i * WORKGROUP_SIZE + lane] += partial[i * WORKGROUP_SIZE + lane + s];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < MR * NR; i++)
        acc[i] = partial[i * WORKGROUP_SIZE];
#endif

#if GEMV_SUBGROUP
    if (EPI_SEGS != 0u) {
        // The heads epilogue (linear_io.glsl): each team's first lane stages
        // its columns, then the workgroup stores whole heads.
        uint teams = WORKGROUP_SIZE / SUBGROUP_SIZE;
        if (lane == 0u) {
            [[unroll]] for (uint j = 0u; j < NR; j++) {
                float bias = column(min(n_first + j, pc.n_end - 1u)).bias;
                [[unroll]] for (uint r = 0u; r < MR; r++)
                    epi_put(r, gl_SubgroupID * NR + j, acc[r * NR + j] + bias);
            }
        }
        epi_flush(pc.m0, 1u, pc.n0 + gl_WorkGroupID.x * teams * NR, gl_LocalInvocationID.x,
                  WORKGROUP_SIZE);
        return;
    }
#endif
    // One lane per pair of columns of a row (packed-f16 words have one writer).
    [[unroll]] for (uint p0 = 0u; p0 < MR * NR / 2u; p0 += LANES) {
        uint p = p0 + lane;
        uint r = p / (NR / 2u), j = (p % (NR / 2u)) * 2u;
        uint m = pc.m0 + r, n = n_first + j;
        // acc is indexed by the lane's pair: pick it without dynamic indexing
        vec2 v = vec2(0.0);
        [[unroll]] for (uint i = 0u; i < MR * NR / 2u; i++)
            if (i == p) v = vec2(acc[2u * i], acc[2u * i + 1u]);
        if (p < MR * NR / 2u && m < pc.m_end && n < pc.n_end)
            y_store_pair(m, n, v, n + 1u < pc.n_end);
    }
}
