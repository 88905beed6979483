// Linear op, cooperative-matrix family (GPUs' matrix units; coopmat.glsl):
// Y = X W^T + b with the head-split store of linear_io.glsl.
//
// A workgroup of NSG subgroups owns a BM x BN block of Y; subgroup g owns
// TR x TC matrices of it (CM_M x CM_N each, f32 accumulators): rows
// (g / SG_COLS) * TR * CM_M.., columns (g % SG_COLS) * TC * CM_N... Per step
// of BK elements of K the workgroup stages the BM x BK block of X and the
// BN x BK block of W in shared memory as float16_t (rows padded by 8
// halves), then every subgroup multiplies its A and B fragments, CM_K at a
// time: B = W^T is read column-major from W's rows. Operands that f16 cannot
// hold exactly (f32, and q8_0's scale x int8) are split (coopmat.glsl:
// hi_part, lo_part): hi.hi + (hi.lo + lo.hi) / 2^11 keeps f32's accuracy
// (lo.lo is below f32's rounding; docs/kernels.md); the lo products go to
// accumulators of their own. bf16 converts to f16 exactly within f16's range.
// The accumulators go to shared memory (epi_stage: EPI_ROWS = BM, EPI_COLS
// = BN, the C side sets them), whence the heads epilogue or the plain
// store (y_store_pair) writes them, as the other families do.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "coopmat.glsl"
#include "linear_io.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WORKGROUP_SIZE = 128u; // NSG subgroups
layout(constant_id = 1) const uint BM = 64u;
layout(constant_id = 2) const uint BN = 64u;
layout(constant_id = 3) const uint BK = 32u;  // a multiple of CM_K and of 4
layout(constant_id = 4) const uint TR = 2u;   // matrices per subgroup along M
layout(constant_id = 5) const uint TC = 2u;   // ... along N

// The build defines X_SPLIT_ON / W_SPLIT_ON for f32 x and f32 or q8_0 w.
#ifndef X_SPLIT_ON
#define X_SPLIT_ON 0
#endif
#ifndef W_SPLIT_ON
#define W_SPLIT_ON 0
#endif
const bool X_SPLIT = X_SPLIT_ON != 0;
const bool W_SPLIT = W_SPLIT_ON != 0;

const bool SPLIT = X_SPLIT || W_SPLIT;

const uint SG_ROWS = BM / (TR * CM_M);
const uint SG_COLS = BN / (TC * CM_N);
const uint LDK = BK + 8u;     // halves per staged row
const uint KQ = BK / 4u;      // quads per staged row
const uint X_LOADS = (BM * KQ + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;
const uint W_LOADS = (BN * KQ + WORKGROUP_SIZE - 1u) / WORKGROUP_SIZE;

shared float16_t xh_s[BM * LDK];
shared float16_t xl_s[X_SPLIT ? BM * LDK : 1u];
shared float16_t wh_s[BN * LDK];
shared float16_t wl_s[W_SPLIT ? BN * LDK : 1u];

void put4(bool x, bool lo, uint at, f16vec4 v) {
    [[unroll]] for (uint u = 0u; u < 4u; u++) {
        if (x && !lo) xh_s[at + u] = v[u];
        else if (x) xl_s[at + u] = v[u];
        else if (!lo) wh_s[at + u] = v[u];
        else wl_s[at + u] = v[u];
    }
}

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint g = gl_SubgroupID;
    const uint sg_r = g / SG_COLS, sg_c = g % SG_COLS;
    const uint m_tile = pc.m0 + gl_WorkGroupID.y * BM;
    const uint n_tile = pc.n0 + gl_WorkGroupID.x * BN;

    uint xr[X_LOADS];
    [[unroll]] for (uint l = 0u; l < X_LOADS; l++)
        xr[l] = x_row(min(m_tile + (lid + l * WORKGROUP_SIZE) / KQ, pc.m_end - 1u));
    uint wr[W_LOADS];
    [[unroll]] for (uint l = 0u; l < W_LOADS; l++)
        wr[l] = w_row(min(n_tile + (lid + l * WORKGROUP_SIZE) / KQ, pc.n_end - 1u));

    CM_C acc[TR * TC];
    CM_C acc_lo[SPLIT ? TR * TC : 1u]; // the lo products, scaled by LO_SCALE
    [[unroll]] for (uint i = 0u; i < TR * TC; i++) {
        acc[i] = CM_C(0.0);
        if (SPLIT)
            acc_lo[i] = CM_C(0.0);
    }

    for (uint k0 = 0u; k0 < pc.K; k0 += BK) {
        [[unroll]] for (uint l = 0u; l < X_LOADS; l++) {
            uint idx = lid + l * WORKGROUP_SIZE;
            uint k = k0 + (idx % KQ) * 4u;
            if (idx < BM * KQ) {
                vec4 v = k < pc.K ? x_fetch4(xr[l] + k, k) : vec4(0.0);
                uint at = (idx / KQ) * LDK + (idx % KQ) * 4u;
                vec4 h = X_SPLIT ? hi_part(v) : v;
                put4(true, false, at, f16vec4(h));
                if (X_SPLIT)
                    put4(true, true, at, f16vec4(lo_part4(v, h)));
            }
        }
        [[unroll]] for (uint l = 0u; l < W_LOADS; l++) {
            uint idx = lid + l * WORKGROUP_SIZE;
            uint k = k0 + (idx % KQ) * 4u;
            if (idx < BN * KQ) {
                vec4 v = k < pc.K ? w_fetch4(wr[l] + k, k) : vec4(0.0);
                uint at = (idx / KQ) * LDK + (idx % KQ) * 4u;
                vec4 h = W_SPLIT ? hi_part(v) : v;
                put4(false, false, at, f16vec4(h));
                if (W_SPLIT)
                    put4(false, true, at, f16vec4(lo_part4(v, h)));
            }
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk += CM_K) {
            CM_A a[TR];
            CM_B b[TC];
            [[unroll]] for (uint i = 0u; i < TR; i++)
                coopMatLoad(a[i], xh_s, (sg_r * TR + i) * CM_M * LDK + kk, LDK, CM_ROW);
            [[unroll]] for (uint j = 0u; j < TC; j++)
                coopMatLoad(b[j], wh_s, (sg_c * TC + j) * CM_N * LDK + kk, LDK, CM_COL);
            [[unroll]] for (uint i = 0u; i < TR; i++)
                [[unroll]] for (uint j = 0u; j < TC; j++)
                    acc[i * TC + j] = coopMatMulAdd(a[i], b[j], acc[i * TC + j]);
            if (W_SPLIT) { // hi(x) . lo(w)
                [[unroll]] for (uint j = 0u; j < TC; j++)
                    coopMatLoad(b[j], wl_s, (sg_c * TC + j) * CM_N * LDK + kk, LDK, CM_COL);
                [[unroll]] for (uint i = 0u; i < TR; i++)
                    [[unroll]] for (uint j = 0u; j < TC; j++)
                        acc_lo[i * TC + j] = coopMatMulAdd(a[i], b[j], acc_lo[i * TC + j]);
            }
            if (X_SPLIT) { // lo(x) . hi(w)
                [[unroll]] for (uint i = 0u; i < TR; i++)
                    coopMatLoad(a[i], xl_s, (sg_r * TR + i) * CM_M * LDK + kk, LDK, CM_ROW);
                if (W_SPLIT)
                    [[unroll]] for (uint j = 0u; j < TC; j++)
                        coopMatLoad(b[j], wh_s, (sg_c * TC + j) * CM_N * LDK + kk, LDK, CM_COL);
                [[unroll]] for (uint i = 0u; i < TR; i++)
                    [[unroll]] for (uint j = 0u; j < TC; j++)
                        acc_lo[i * TC + j] = coopMatMulAdd(a[i], b[j], acc_lo[i * TC + j]);
            }
        }
        barrier();
    }

    // ---- accumulators to the staged tile, then stored
    if (SPLIT)
        [[unroll]] for (uint i = 0u; i < TR * TC; i++)
            acc[i] = acc[i] + acc_lo[i] * (1.0 / LO_SCALE);
    [[unroll]] for (uint i = 0u; i < TR; i++)
        [[unroll]] for (uint j = 0u; j < TC; j++)
            coopMatStore(acc[i * TC + j], epi_stage,
                         (sg_r * TR + i) * CM_M * EPI_COLS + (sg_c * TC + j) * CM_N, EPI_COLS,
                         CM_ROW);
    barrier();
    if (EPI_SEGS != 0u) {
        // the heads epilogue stores staged values that hold their bias
        for (uint e = lid; e < BM * BN; e += WORKGROUP_SIZE) {
            uint n = n_tile + e % BN;
            epi_stage[e] += column(min(n, pc.n_end - 1u)).bias;
        }
        epi_flush(m_tile, 1u, n_tile, lid, WORKGROUP_SIZE);
        return;
    }
    for (uint e = lid; e < BM * BN / 2u; e += WORKGROUP_SIZE) {
        uint r = e / (BN / 2u), c = (e % (BN / 2u)) * 2u;
        uint m = m_tile + r, n = n_tile + c;
        if (m < pc.m_end && n < pc.n_end)
            y_store_pair(m, n, vec2(epi_stage[r * BN + c], epi_stage[r * BN + c + 1u]),
                         n + 1u < pc.n_end);
    }
}
