# Cooperative-matrix kernels (the coopmat family, GL_KHR_cooperative_matrix):
# built only when the shader compiler can compile them. A one-line feature
# test at configure time, as llama.cpp's CMake does for glslc, sets
# VKATTN_HAVE_COOPMAT; without it the library builds as before and says so
# (vkattn info: "coopmat kernels: not built"). A build that reuses another's
# shaders (VKATTN_SHADERS_FROM) takes that build's answer.
option(VKATTN_COOPMAT "Build the cooperative-matrix kernels where the shader compiler can" ON)
set(VKATTN_COOPMAT_TARGET_ENV vulkan1.3)

function(vkattn_coopmat_feature_test out)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/coopmat_feature_test)
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/test.comp [=[
#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 32) in;
layout(set = 0, binding = 0) buffer B { float16_t data[]; };
void main() {
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a;
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b;
    coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> c =
        coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
    coopMatLoad(a, data, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(b, data, 0, 16, gl_CooperativeMatrixLayoutColumnMajor);
    c = coopMatMulAdd(a, b, c);
    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> h =
        coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(c);
    coopMatStore(h, data, 0, 16, gl_CooperativeMatrixLayoutRowMajor);
}
]=])
  execute_process(
    COMMAND ${GLSLANG_VALIDATOR} --quiet --target-env ${VKATTN_COOPMAT_TARGET_ENV}
            -o ${dir}/test.spv ${dir}/test.comp
    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(rc EQUAL 0)
    execute_process(COMMAND ${SPIRV_VAL} --target-env ${VKATTN_COOPMAT_TARGET_ENV} ${dir}/test.spv
                    RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  endif()
  string(STRIP "${log}" log)
  string(REGEX REPLACE "\n.*" "" log "${log}")
  set(${out} ${rc} PARENT_SCOPE)
  set(${out}_log "${log}" PARENT_SCOPE)
endfunction()

if(VKATTN_SHADERS_FROM)
  load_cache(${VKATTN_SHADERS_FROM} READ_WITH_PREFIX _from_ VKATTN_HAVE_COOPMAT)
  set(_have ${_from_VKATTN_HAVE_COOPMAT})
  set(_why "as the build whose shaders this one reuses (${VKATTN_SHADERS_FROM})")
elseif(NOT VKATTN_COOPMAT)
  set(_have OFF)
  set(_why "VKATTN_COOPMAT=OFF")
else()
  vkattn_coopmat_feature_test(_rc)
  if(_rc EQUAL 0)
    set(_have ON)
    set(_why "${GLSLANG_VALIDATOR} compiles GL_KHR_cooperative_matrix")
  else()
    set(_have OFF)
    set(_why "${GLSLANG_VALIDATOR} cannot compile GL_KHR_cooperative_matrix (${_rc_log}): tools/build.sh brings Debian 13's glslang, or set VKATTN_GLSLANG")
  endif()
endif()
set(VKATTN_HAVE_COOPMAT ${_have} CACHE INTERNAL "the coopmat kernels are built")
if(VKATTN_HAVE_COOPMAT)
  message(STATUS "vkattn: coopmat kernels built: ${_why}")
else()
  message(STATUS "vkattn: coopmat kernels NOT built: ${_why}")
endif()
