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

#endif
