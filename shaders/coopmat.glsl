// What every coopmat-family kernel declares: the extensions, and the shape
// of the device's matrices (specialization constants 16, 17, 18: the
// families' own constants come first; src/core/coopmat.h picks the shape,
// so one module serves every device).
#ifndef VKATTN_COOPMAT_GLSL
#define VKATTN_COOPMAT_GLSL

#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

layout(constant_id = 16) const uint CM_M = 16u; // rows of A and C
layout(constant_id = 17) const uint CM_N = 16u; // columns of B and C
layout(constant_id = 18) const uint CM_K = 16u; // columns of A, rows of B

#define CM_A coopmat<float16_t, gl_ScopeSubgroup, CM_M, CM_K, gl_MatrixUseA>
#define CM_B coopmat<float16_t, gl_ScopeSubgroup, CM_K, CM_N, gl_MatrixUseB>
#define CM_C coopmat<float, gl_ScopeSubgroup, CM_M, CM_N, gl_MatrixUseAccumulator>
#define CM_ROW gl_CooperativeMatrixLayoutRowMajor
#define CM_COL gl_CooperativeMatrixLayoutColumnMajor

// Splitting an f32 operand into two f16 ones: hi = v's leading 11
// significant bits (masked: exact in f16 within its range, v - hi exact, and
// integer ops, so that no compiler folds a round trip through f16 away), lo
// = (v - hi) * 2^11, scaled to v's own magnitude so that a device that
// flushes f16 subnormals (lavapipe does) keeps it; infinities and NaN stay
// in hi (lo 0), as the scalar kernels would see them.
const float LO_SCALE = 2048.0;
float hi_part1(float v) {
    return isnan(v) ? v : uintBitsToFloat(floatBitsToUint(v) & 0xFFFFE000u);
}
vec4 hi_part(vec4 v) {
    return vec4(hi_part1(v.x), hi_part1(v.y), hi_part1(v.z), hi_part1(v.w));
}
float lo_part(float v, float hi) { return isinf(v) || isnan(v) ? 0.0 : (v - hi) * LO_SCALE; }
vec4 lo_part4(vec4 v, vec4 hi) {
    return vec4(lo_part(v.x, hi.x), lo_part(v.y, hi.y), lo_part(v.z, hi.z), lo_part(v.w, hi.w));
}

#endif
