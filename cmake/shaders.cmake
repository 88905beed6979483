# GLSL compute shaders -> SPIR-V (glslangValidator, with a depfile so edits to
# included .glsl files rebuild their users) -> spirv-val -> C arrays, all in
# the build directory. Each variant is one SPIR-V module:
#   vkattn_shader(<name> <source.comp> [DEFINES A=1 B=2 ...])
# and is reachable from C as `extern const vka_spirv vka_spirv_<name>`
# (declared in the generated vka_spirv.h). vkattn_shader may be called from
# inside other functions (shaders/variants.cmake wraps it): the lists of
# variants are global properties, copied into VKATTN_SPIRV_SOURCES and
# VKATTN_SPIRV_NAMES once variants.cmake has run.

set(VKATTN_SPIRV_DIR ${CMAKE_CURRENT_BINARY_DIR}/spirv)
# Another build directory of this source tree whose shaders this build
# reuses instead of compiling the same SPIR-V again: its vkattn_shaders
# target is brought up to date first, on every build, and its embedded
# <name>.c files compile here (tools/test.sh points its shared, sanitizer and
# fuzz builds at build/).
set(VKATTN_SHADERS_FROM "" CACHE PATH
    "A configured build directory of this source whose shaders to reuse; empty: compile them here")
if(VKATTN_SHADERS_FROM)
  if(NOT EXISTS ${VKATTN_SHADERS_FROM}/CMakeCache.txt)
    message(FATAL_ERROR "VKATTN_SHADERS_FROM=${VKATTN_SHADERS_FROM} is not a configured build directory")
  endif()
  get_filename_component(_from_bin "${VKATTN_SHADERS_FROM}" REALPATH)
  get_filename_component(_this_bin "${CMAKE_BINARY_DIR}" REALPATH)
  if(_from_bin STREQUAL _this_bin)
    message(FATAL_ERROR "VKATTN_SHADERS_FROM=${VKATTN_SHADERS_FROM} is this build directory itself")
  endif()
  load_cache(${VKATTN_SHADERS_FROM} READ_WITH_PREFIX _from_ CMAKE_HOME_DIRECTORY)
  get_filename_component(_from_src "${_from_CMAKE_HOME_DIRECTORY}" REALPATH)
  get_filename_component(_this_src "${PROJECT_SOURCE_DIR}" REALPATH)
  if(NOT _from_src STREQUAL _this_src)
    message(FATAL_ERROR "VKATTN_SHADERS_FROM=${VKATTN_SHADERS_FROM} builds ${_from_src}, "
                        "not this source tree (${_this_src})")
  endif()
endif()
set(VKATTN_SPIRV_TARGET_ENV vulkan1.2)
file(MAKE_DIRECTORY ${VKATTN_SPIRV_DIR})
set_property(GLOBAL PROPERTY VKATTN_SPIRV_SOURCES "")
set_property(GLOBAL PROPERTY VKATTN_SPIRV_NAMES "")

# vkattn_embed_shader(<source.comp> <out-dir> <name> <C type> <type header>
#                     [INCLUDE <dir>] [DEFINES A=1 ...]): the rule chain of one
# module, shared with bench/CMakeLists.txt (its limit kernels embed with a
# type of their own). Sets <name>_csrc in the caller to the generated C file.
function(vkattn_embed_shader src dir name type header)
  cmake_parse_arguments(ARG "" "INCLUDE" "DEFINES" ${ARGN})
  set(flags "")
  foreach(d IN LISTS ARG_DEFINES)
    list(APPEND flags "-D${d}")
  endforeach()
  if(ARG_INCLUDE)
    list(APPEND flags "-I${ARG_INCLUDE}")
  endif()
  set(spv ${dir}/${name}.spv)
  set(csrc ${dir}/${name}.c)
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${GLSLANG_VALIDATOR} --quiet --target-env ${VKATTN_SPIRV_TARGET_ENV} ${flags}
            --depfile ${dir}/${name}.d -o ${spv} ${src}
    COMMAND ${SPIRV_VAL} --target-env ${VKATTN_SPIRV_TARGET_ENV} ${spv}
    DEPENDS ${src}
    DEPFILE ${dir}/${name}.d
    COMMENT "glslang + spirv-val: ${name}"
    VERBATIM)
  add_custom_command(
    OUTPUT ${csrc}
    COMMAND ${CMAKE_COMMAND} -DIN=${spv} -DOUT=${csrc} -DNAME=${name} -DTYPE=${type}
            -DHEADER=${header} -P ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
    DEPENDS ${spv} ${PROJECT_SOURCE_DIR}/cmake/embed_spirv.cmake
    VERBATIM)
  set(${name}_csrc ${csrc} PARENT_SCOPE)
endfunction()

function(vkattn_shader name source)
  cmake_parse_arguments(ARG "" "" "DEFINES" ${ARGN})
  if(VKATTN_SHADERS_FROM)
    set(${name}_csrc ${VKATTN_SHADERS_FROM}/spirv/${name}.c)
  else()
    vkattn_embed_shader(${PROJECT_SOURCE_DIR}/shaders/${source} ${VKATTN_SPIRV_DIR} ${name} vka_spirv
                        core/spirv.h INCLUDE ${PROJECT_SOURCE_DIR}/shaders DEFINES ${ARG_DEFINES})
  endif()
  set_property(GLOBAL APPEND PROPERTY VKATTN_SPIRV_SOURCES ${${name}_csrc})
  set_property(GLOBAL APPEND PROPERTY VKATTN_SPIRV_NAMES ${name})
endfunction()

# vkattn_coopmat_shader(<name> <source.comp> [DEFINES ...]): a variant of
# the coopmat family (cmake/coopmat.cmake), compiled for Vulkan 1.3 (SPIR-V
# 1.6) and validated as such; nothing when VKATTN_HAVE_COOPMAT is off. Its
# name also goes to VKATTN_COOPMAT_NAMES (test_coopmat_shapes).
function(vkattn_coopmat_shader name source)
  if(NOT VKATTN_HAVE_COOPMAT)
    return()
  endif()
  set(VKATTN_SPIRV_TARGET_ENV ${VKATTN_COOPMAT_TARGET_ENV})
  vkattn_shader(${name} ${source} ${ARGN})
  set_property(GLOBAL APPEND PROPERTY VKATTN_COOPMAT_NAMES ${name})
endfunction()
set_property(GLOBAL PROPERTY VKATTN_COOPMAT_NAMES "")

include(${CMAKE_CURRENT_SOURCE_DIR}/shaders/variants.cmake)
get_property(VKATTN_SPIRV_SOURCES GLOBAL PROPERTY VKATTN_SPIRV_SOURCES)
get_property(VKATTN_SPIRV_NAMES GLOBAL PROPERTY VKATTN_SPIRV_NAMES)

# The declarations header, rewritten only when the list of variants changes.
set(decls "/* Generated by cmake/shaders.cmake. Do not edit. */\n#include \"core/spirv.h\"\n")
foreach(n IN LISTS VKATTN_SPIRV_NAMES)
  string(APPEND decls "extern const vka_spirv vka_spirv_${n};\n")
endforeach()
file(CONFIGURE OUTPUT ${VKATTN_SPIRV_DIR}/vka_spirv.h CONTENT "${decls}")
if(VKATTN_SHADERS_FROM)
  set_source_files_properties(${VKATTN_SPIRV_SOURCES} PROPERTIES GENERATED TRUE)
  add_custom_target(vkattn_shaders
    COMMAND ${CMAKE_COMMAND} --build ${VKATTN_SHADERS_FROM} --target vkattn_shaders
    BYPRODUCTS ${VKATTN_SPIRV_SOURCES}
    COMMENT "shaders of ${VKATTN_SHADERS_FROM}"
    VERBATIM)
else()
  add_custom_target(vkattn_shaders DEPENDS ${VKATTN_SPIRV_SOURCES})
endif()
