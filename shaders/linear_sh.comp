// Linear op, shared-memory family (GPUs, devices without shuffles):
// Y = X W^T + b with the head-split store of linear_io.glsl.
//
// A workgroup owns a BM x BN block of Y. Per step of BK elements of K it
// loads the BM x BK block of X and the BN x BK block of W into shared memory
// (vec4s, cooperatively, zeros past the ends), then each invocation updates
// its TM x TN register tile: rows ty + i * (BM / TM), columns tx * TN + j
// (consecutive, so packed-f16 pairs stay in one invocation).
// WORKGROUP_SIZE == (BM / TM) * (BN / TN); BM * BK / 4 and BN * BK / 4 are
// multiples of WORKGROUP_SIZE (the C side picks such constants).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "linear_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 64u;
layout(constant_id = 1) const uint BM = 32u;
layout(constant_id = 2) const uint BN = 32u;
layout(constant_id = 3) const uint BK = 16u;
layout(constant_id = 4) const uint TM = 4u;
layout(constant_id = 5) const uint TN = 4u;

const uint KQ = BK / 4u;      // vec4s per tile row
const uint PITCH = KQ + 1u;   // padded against bank conflicts
// Loads per invocation, rounded up (the heads epilogue's tiles need not
// divide evenly; the presets do, and then the bounds tests fold away).
const uint X_LOADS = (BM * KQ + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
const uint W_LOADS = (BN * KQ + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
const bool X_EVEN = X_LOADS * WORKGROUP_SIZE == BM * KQ;
const bool W_EVEN = W_LOADS * WORKGROUP_SIZE == BN * KQ;

shared vec4 xs_tile[BM * PITCH];
shared vec4 ws_tile[BN * PITCH];

void main() {
    uint tid = gl_LocalInvocationID.x;
    uint tx = tid % (BN / TN), ty = tid / (BN / TN);
    uint m_tile = pc.m0 + gl_WorkGroupID.y * BM;
    uint n_tile = pc.n0 + gl_WorkGroupID.x * BN;

    // The rows each invocation loads are the same for every K step.
    uint xr[X_LOADS];
    [[unroll]] for (uint l = 0u; l < X_LOADS; l++)
        xr[l] = x_row(min(m_tile + (tid + l * WORKGROUP_SIZE) / KQ, pc.m_end - 1u));
    uint wr[W_LOADS];
    [[unroll]] for (uint l = 0u; l < W_LOADS; l++)
        wr[l] = w_row(min(n_tile + (tid + l * WORKGROUP_SIZE) / KQ, pc.n_end - 1u));

    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; i++)
        acc[i] = 0.0;

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        [[unroll]] for (uint l = 0u; l < X_LOADS; l++) {
            uint idx = tid + l * WORKGROUP_SIZE;
            uint k = k0 + (idx % KQ) * 4u;
            if (X_EVEN || idx < BM * KQ)
                xs_tile[(idx / KQ) * PITCH + idx % KQ] =
                    k < pc.K ? x_fetch4(xr[l] + k, k) : vec4(0.0);
        }
        [[unroll]] for (uint l = 0u; l < W_LOADS; l++) {
            uint idx = tid + l * WORKGROUP_SIZE;
            uint k = k0 + (idx % KQ) * 4u;
            if (W_EVEN || idx < BN * KQ)
                ws_tile[(idx / KQ) * PITCH + idx % KQ] =
                    k < pc.K ? w_fetch4(wr[l] + k, k) : vec4(0.0);
        }
        barrier();
        [[unroll]] for (uint q = 0u; q < KQ; q++) {
            vec4 a[TM], b[TN];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                a[i] = xs_tile[(ty + i * (BM / TM)) * PITCH + q];
            [[unroll]] for (uint j = 0u; j < TN; j++)
                b[j] = ws_tile[(tx * TN + j) * PITCH + q];
            [[unroll]] for (uint i = 0u; i < TM; i++)
                [[unroll]] for (uint j = 0u; j < TN; j++) {
                    float s = acc[i * TN + j];
                    s = fma(a[i].x, b[j].x, s);
                    s = fma(a[i].y, b[j].y, s);
                    s = fma(a[i].z, b[j].z, s);
                    s = fma(a[i].w, b[j].w, s);
                    acc[i * TN + j] = s;
                }
        }
        barrier();
    }

    if (EPI_SEGS != 0u) {
        // The heads epilogue (linear_io.glsl): the rows of register row i of
        // every invocation staged, then stored by the whole workgroup.
        [[unroll]] for (uint i = 0u; i < TM; i++) {
            [[unroll]] for (uint j = 0u; j < TN; j++) {
                uint n = n_tile + tx * TN + j;
                epi_put(ty, tx * TN + j, acc[i * TN + j] + column(min(n, pc.n_end - 1u)).bias);
            }
            epi_flush(m_tile + i * (BM / TM), 1u, n_tile, tid, WORKGROUP_SIZE);
        }
        return;
    }
    [[unroll]] for (uint i = 0u; i < TM; i++) {
        uint m = m_tile + ty + i * (BM / TM);
        if (m >= pc.m_end)
            break;
        [[unroll]] for (uint j = 0u; j < TN; j += 2u) {
            uint n = n_tile + tx * TN + j;
            if (n < pc.n_end)
                y_store_pair(m, n, vec2(acc[i * TN + j], acc[i * TN + j + 1u]), n + 1u < pc.n_end);
        }
    }
}
