# Every SPIR-V variant the library embeds (see cmake/shaders.cmake).
# Storage types: f32, f16 (16-bit storage), f16p (halves packed in 32-bit words).

# convert.comp: dst = scale * src
foreach(src f32 f16 f16p)
  foreach(dst f32 f16 f16p)
    if((src STREQUAL "f16" AND dst STREQUAL "f16p") OR (src STREQUAL "f16p" AND dst STREQUAL "f16"))
      continue() # a device uses one f16 path, never both at once
    endif()
    set(extra "")
    if(src STREQUAL "f16" OR dst STREQUAL "f16")
      set(extra NEEDS_16BIT_STORAGE=1)
    endif()
    vkattn_shader(convert_${src}_${dst} convert.comp DEFINES SRC_DT=${src} DST_DT=${dst} ${extra})
  endforeach()
endforeach()
