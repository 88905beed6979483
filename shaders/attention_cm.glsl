// What both cooperative-matrix attention kernels share (attention_cm.comp,
// kv_attention_cm.comp; see the first): the split flags, the tile sizes
// derived from their specialization constants DK, DV, BR, BC and TPR (which
// each declares before including this), the shared-memory tiles, their
// stores, and the two products. The including kernel declares the
// constants, includes coopmat.glsl first, and brings its own row reads.
#ifndef VKATTN_ATTENTION_CM_GLSL
#define VKATTN_ATTENTION_CM_GLSL

// The build defines Q_SPLIT_ON (f32 and bf16 q: and its output, so P too;
// bf16 so that its output is the f32 one rounded) and
// KV_SPLIT_ON (f32 k and v; f32 and quantized caches).
#ifndef Q_SPLIT_ON
#define Q_SPLIT_ON 0
#endif
#ifndef KV_SPLIT_ON
#define KV_SPLIT_ON 0
#endif
const bool Q_SPLIT = Q_SPLIT_ON != 0;
const bool KV_SPLIT = KV_SPLIT_ON != 0;
const bool P_SPLIT = Q_SPLIT;
const bool S_SPLIT = Q_SPLIT || KV_SPLIT;
const bool O_SPLIT = P_SPLIT || KV_SPLIT;

const uint DKP = (DK + 7u) / 8u * 8u;
const uint DVP = (DV + 7u) / 8u * 8u;
const bool ELEM = DKP != DK || DVP != DV;
const uint DC = DKP / 4u;                // q/k quads per row
const uint VC = DVP / 4u;                // v/out quads per row
const uint DKC = (DKP + CM_K - 1u) / CM_K * CM_K; // q/k columns, whole matrices
const uint DVC = (DVP + CM_N - 1u) / CM_N * CM_N; // v/out columns, whole matrices
const uint LDQ = DKC + 8u;               // staged row pitches (halves)
const uint LDV = DVC + 8u;
const uint LDP = BC + 8u;
const uint CPT = (VC + TPR - 1u) / TPR;  // output quads per invocation
const uint KPT = (BC + TPR - 1u) / TPR;  // keys per invocation in the softmax

shared float16_t qh_s[BR * LDQ];
shared float16_t ql_s[Q_SPLIT ? BR * LDQ : 1u];
shared float16_t kh_s[BC * LDQ];
shared float16_t kl_s[KV_SPLIT ? BC * LDQ : 1u];
shared float16_t vh_s[BC * LDV];
shared float16_t vl_s[KV_SPLIT ? BC * LDV : 1u];
shared float16_t ph_s[BR * LDP];
shared float16_t pl_s[P_SPLIT ? BR * LDP : 1u];
shared float s_s[BR * BC];   // the block's scores (the kernel's domain)
shared float pv_s[BR * DVC]; // the block's P V
shared float red_s[BR * TPR];

// Stores quad x at halves [at, at + 4) of a staged tile, split when asked.
void put_q(uint at, vec4 x) {
    vec4 h = Q_SPLIT ? hi_part(x) : x;
    [[unroll]] for (uint u = 0u; u < 4u; u++) {
        qh_s[at + u] = float16_t(h[u]);
        if (Q_SPLIT)
            ql_s[at + u] = float16_t(lo_part(x[u], h[u]));
    }
}
void put_k(uint at, vec4 x) {
    vec4 h = KV_SPLIT ? hi_part(x) : x;
    [[unroll]] for (uint u = 0u; u < 4u; u++) {
        kh_s[at + u] = float16_t(h[u]);
        if (KV_SPLIT)
            kl_s[at + u] = float16_t(lo_part(x[u], h[u]));
    }
}
void put_v(uint at, vec4 x) {
    vec4 h = KV_SPLIT ? hi_part(x) : x;
    [[unroll]] for (uint u = 0u; u < 4u; u++) {
        vh_s[at + u] = float16_t(h[u]);
        if (KV_SPLIT)
            vl_s[at + u] = float16_t(lo_part(x[u], h[u]));
    }
}

// S = Q K^T of the block into s_s, each subgroup its share of the matrices.
void scores(uint g) {
    const uint TN = BC / CM_N;
    for (uint t = g; t < (BR / CM_M) * TN; t += gl_NumSubgroups) {
        uint tm = t / TN, tn = t % TN;
        CM_C acc = CM_C(0.0), lo = CM_C(0.0);
        for (uint kk = 0u; kk < DKC; kk += CM_K) {
            CM_A a;
            CM_B b;
            coopMatLoad(a, qh_s, tm * CM_M * LDQ + kk, LDQ, CM_ROW);
            coopMatLoad(b, kh_s, tn * CM_N * LDQ + kk, LDQ, CM_COL);
            acc = coopMatMulAdd(a, b, acc);
            if (KV_SPLIT) {
                CM_B bl;
                coopMatLoad(bl, kl_s, tn * CM_N * LDQ + kk, LDQ, CM_COL);
                lo = coopMatMulAdd(a, bl, lo);
            }
            if (Q_SPLIT) {
                CM_A al;
                coopMatLoad(al, ql_s, tm * CM_M * LDQ + kk, LDQ, CM_ROW);
                lo = coopMatMulAdd(al, b, lo);
            }
        }
        if (S_SPLIT)
            acc = acc + lo * (1.0 / LO_SCALE);
        coopMatStore(acc, s_s, tm * CM_M * BC + tn * CM_N, BC, CM_ROW);
    }
}

// The block's P V into pv_s.
void products(uint g) {
    const uint TN = DVC / CM_N;
    for (uint t = g; t < (BR / CM_M) * TN; t += gl_NumSubgroups) {
        uint tm = t / TN, tn = t % TN;
        CM_C acc = CM_C(0.0), lo = CM_C(0.0);
        for (uint kk = 0u; kk < BC; kk += CM_K) {
            CM_A a;
            CM_B b;
            coopMatLoad(a, ph_s, tm * CM_M * LDP + kk, LDP, CM_ROW);
            coopMatLoad(b, vh_s, kk * LDV + tn * CM_N, LDV, CM_ROW);
            acc = coopMatMulAdd(a, b, acc);
            if (KV_SPLIT) {
                CM_B bl;
                coopMatLoad(bl, vl_s, kk * LDV + tn * CM_N, LDV, CM_ROW);
                lo = coopMatMulAdd(a, bl, lo);
            }
            if (P_SPLIT) {
                CM_A al;
                coopMatLoad(al, pl_s, tm * CM_M * LDP + kk, LDP, CM_ROW);
                lo = coopMatMulAdd(al, b, lo);
            }
        }
        if (O_SPLIT)
            acc = acc + lo * (1.0 / LO_SCALE);
        coopMatStore(acc, pv_s, tm * CM_M * DVC + tn * CM_N, DVC, CM_ROW);
    }
}

#endif
