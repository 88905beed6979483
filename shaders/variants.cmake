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

# linear_*.comp: y = x W^T + b with a head-split store (src/linear.c).
# Families: sg (subgroup GEMM), sh (shared-memory GEMM), gemvsg / gemvsh (few
# rows, reduced with subgroupAdd / shared memory). Input modes: tex (texel
# buffers), vec (storage, vec4 loads), sca (storage, scalar loads), texp
# (texel buffers, f16 operands as uint views of 8 halves). x and y share a
# storage type, w and b share one; f16 and f16p never meet.
foreach(fam sg sh gemvsg gemvsh)
  if(fam STREQUAL "sg")
    set(src linear_sg.comp)
    set(famdefs "")
  elseif(fam STREQUAL "sh")
    set(src linear_sh.comp)
    set(famdefs "")
  elseif(fam STREQUAL "gemvsg")
    set(src linear_gemv.comp)
    set(famdefs GEMV_SUBGROUP=1)
  else()
    set(src linear_gemv.comp)
    set(famdefs GEMV_SUBGROUP=0)
  endif()
  foreach(mode tex vec sca texp)
    if(mode STREQUAL "tex")
      set(modedef INPUT_MODE=0)
    elseif(mode STREQUAL "vec")
      set(modedef INPUT_MODE=1)
    elseif(mode STREQUAL "sca")
      set(modedef INPUT_MODE=2)
    else()
      set(modedef INPUT_MODE=3)
    endif()
    foreach(xdt f32 f16 f16p)
      foreach(wdt f32 f16 f16p)
        if((xdt STREQUAL "f16" AND wdt STREQUAL "f16p") OR (xdt STREQUAL "f16p" AND wdt STREQUAL "f16"))
          continue()
        endif()
        # texp (texel inputs, f16 operands 8 halves per fetch): CPU-driver
        # families only, and only where an operand is f16.
        if(mode STREQUAL "texp" AND (fam STREQUAL "sh" OR (xdt STREQUAL "f32" AND wdt STREQUAL "f32")))
          continue()
        endif()
        set(extra "")
        if(xdt STREQUAL "f16" OR wdt STREQUAL "f16")
          list(APPEND extra NEEDS_16BIT_STORAGE=1)
        endif()
        if(xdt STREQUAL "f16p")
          list(APPEND extra Y_PACKED=1)
        endif()
        if(mode STREQUAL "texp" AND NOT xdt STREQUAL "f32")
          list(APPEND extra X_PACKED=1)
        endif()
        if(mode STREQUAL "texp" AND NOT wdt STREQUAL "f32")
          list(APPEND extra W_PACKED=1)
        endif()
        vkattn_shader(linear_${fam}_${mode}_${xdt}_${wdt} ${src}
                      DEFINES ${famdefs} ${modedef} X_DT=${xdt} W_DT=${wdt} ${extra})
      endforeach()
    endforeach()
  endforeach()
endforeach()

# attention_sg.comp (subgroup family) and attention_sm.comp (shared-memory
# family): FlashAttention-2 forward; attention_weights.comp: the
# probabilities, when asked for. Variants by q/out storage x k/v storage
# (storage-buffer inputs; a device uses one f16 path, so f16 never meets
# f16p), and for texel-buffer inputs by q/out storage x k/v dtype (rgba32f
# views of f32 data, rgba32ui views of f16 data: see attention_io.glsl).
foreach(q f32 f16 f16p)
  foreach(kv f32 f16 f16p)
    if((q STREQUAL "f16" AND kv STREQUAL "f16p") OR (q STREQUAL "f16p" AND kv STREQUAL "f16"))
      continue()
    endif()
    set(extra "")
    if(q STREQUAL "f16" OR kv STREQUAL "f16")
      set(extra NEEDS_16BIT_STORAGE=1)
    endif()
    foreach(family sg sm)
      vkattn_shader(attention_${family}_${q}_${kv} attention_${family}.comp
                    DEFINES Q_DT=${q} KV_DT=${kv} O_DT=${q} ${extra})
    endforeach()
    vkattn_shader(attention_weights_${q}_${kv} attention_weights.comp
                  DEFINES Q_DT=${q} KV_DT=${kv} ${extra})
  endforeach()
  set(extra "")
  set(qtex tex16)
  if(q STREQUAL "f16")
    set(extra NEEDS_16BIT_STORAGE=1)
  elseif(q STREQUAL "f32")
    set(qtex tex32)
  endif()
  foreach(kv f32 f16)
    set(kvtex tex16)
    if(kv STREQUAL "f32")
      set(kvtex tex32)
    endif()
    foreach(family sg sm)
      vkattn_shader(attention_${family}_tex_${q}_${kv} attention_${family}.comp
                    DEFINES Q_DT=${qtex} KV_DT=${kvtex} O_DT=${q} ${extra})
    endforeach()
  endforeach()
endforeach()
foreach(q f32 f16)
  foreach(kv f32 f16)
    set(qtex tex32)
    set(kvtex tex32)
    if(q STREQUAL "f16")
      set(qtex tex16)
    endif()
    if(kv STREQUAL "f16")
      set(kvtex tex16)
    endif()
    vkattn_shader(attention_weights_tex_${q}_${kv} attention_weights.comp
                  DEFINES Q_DT=${qtex} KV_DT=${kvtex})
  endforeach()
endforeach()

# kv_append.comp: K and V of a step copied into a KV cache's block pools.
foreach(dt f32 f16 f16p)
  set(extra "")
  if(dt STREQUAL "f16")
    set(extra NEEDS_16BIT_STORAGE=1)
  endif()
  vkattn_shader(kv_append_${dt} kv_append.comp DEFINES DT=${dt} ${extra})
endforeach()

# kv_attention_sg.comp (subgroup family) / kv_attention_sm.comp (shared-memory
# family): attention over a KV cache through its block tables, writing either
# the output (one split) or split-KV partial results, which
# kv_attention_combine.comp merges. Variants as for attention_*: q/out storage
# x cache storage, or texel inputs by q/out storage x cache dtype.
foreach(q f32 f16 f16p)
  foreach(kv f32 f16 f16p)
    if((q STREQUAL "f16" AND kv STREQUAL "f16p") OR (q STREQUAL "f16p" AND kv STREQUAL "f16"))
      continue()
    endif()
    set(extra "")
    if(q STREQUAL "f16" OR kv STREQUAL "f16")
      set(extra NEEDS_16BIT_STORAGE=1)
    endif()
    foreach(family sg sm)
      vkattn_shader(kv_attention_${family}_${q}_${kv} kv_attention_${family}.comp
                    DEFINES Q_DT=${q} KV_DT=${kv} O_DT=${q} ${extra})
    endforeach()
  endforeach()
  set(extra "")
  set(qtex tex16)
  if(q STREQUAL "f16")
    set(extra NEEDS_16BIT_STORAGE=1)
  elseif(q STREQUAL "f32")
    set(qtex tex32)
  endif()
  foreach(kv f32 f16)
    set(kvtex tex16)
    if(kv STREQUAL "f32")
      set(kvtex tex32)
    endif()
    foreach(family sg sm)
      vkattn_shader(kv_attention_${family}_tex_${q}_${kv} kv_attention_${family}.comp
                    DEFINES Q_DT=${qtex} KV_DT=${kvtex} O_DT=${q} ${extra})
    endforeach()
  endforeach()
  vkattn_shader(kv_attention_combine_${q} kv_attention_combine.comp DEFINES O_DT=${q} ${extra})
endforeach()

# kv_decode_sg.comp: the subgroup family's decode kernel (few rows, head dim
# in whole octets per lane; src/kv_attention_plan.c), texel inputs only, by
# q/out storage x cache dtype; KV_TEX16 fetches raw f16 octets.
foreach(q f32 f16 f16p)
  set(extra "")
  set(qtex tex16)
  if(q STREQUAL "f16")
    set(extra NEEDS_16BIT_STORAGE=1)
  elseif(q STREQUAL "f32")
    set(qtex tex32)
  endif()
  vkattn_shader(kv_decode_sg_tex_${q}_f32 kv_decode_sg.comp
                DEFINES Q_DT=${qtex} KV_DT=tex32 O_DT=${q} ${extra})
  vkattn_shader(kv_decode_sg_tex_${q}_f16 kv_decode_sg.comp
                DEFINES Q_DT=${qtex} KV_DT=tex16 O_DT=${q} KV_TEX16=1 ${extra})
endforeach()
