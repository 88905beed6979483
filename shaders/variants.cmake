# Every SPIR-V variant the library embeds (see cmake/shaders.cmake), named
# after its kernel and the storage types of its operands (tensor_io.glsl):
#   f32, f16 (16-bit storage), f16p (halves packed in 32-bit words), bf16
#   (bfloat16 pairs in 32-bit words): storage buffers; tex32 / tex16 /
#   texbf16: uniform texel buffers, rgba32f views of f32 data / rgba32ui
#   views of f16 or bf16 data (eight per texel); texq: rgba32ui views of
#   quantized blocks.
# Two rules hold for every kernel, and are written once, below:
#   - a device uses one f16 path, never both, so f16 never meets f16p;
#   - NEEDS_16BIT_STORAGE=1 where a storage-buffer operand is f16 (texel
#     operands need no 16-bit storage).

set(VKATTN_STORAGE_TYPES f32 f16 f16p)

# vkattn_storage_defines(<ok> <defines> <storage type>...): for a variant
# whose storage-buffer operands have these storage types, sets <ok> to
# whether it exists (f16 never meets f16p) and <defines> to what it needs.
function(vkattn_storage_defines ok defines)
  set(${ok} TRUE PARENT_SCOPE)
  set(${defines} "" PARENT_SCOPE)
  if("f16" IN_LIST ARGN)
    set(${defines} NEEDS_16BIT_STORAGE=1 PARENT_SCOPE)
    if("f16p" IN_LIST ARGN)
      set(${ok} FALSE PARENT_SCOPE)
    endif()
  endif()
endfunction()

# vkattn_texel_view(<out> <storage type>): the texel view of data stored as
# f32 (tex32), as f16 / f16p (tex16: the same bytes) or as bf16 (texbf16).
function(vkattn_texel_view out dt)
  if(dt STREQUAL "f32")
    set(${out} tex32 PARENT_SCOPE)
  elseif(dt STREQUAL "bf16")
    set(${out} texbf16 PARENT_SCOPE)
  else()
    set(${out} tex16 PARENT_SCOPE)
  endif()
endfunction()

# vkattn_attention_variants(<prefix> <family>... [NO_OUTPUT]): the variants of
# kernels <prefix>_<family>.comp that read a query operand q and key/value
# operands kv (k and v share a storage type) and write an output in q's
# storage type (O_DT; NO_OUTPUT: none):
#   <prefix>_<family>_<q>_<kv>      storage-buffer inputs, q and kv in
#                                   f32 | f16 | f16p | bf16
#   <prefix>_<family>_tex_<q>_<kv>  texel-buffer inputs (views by dtype,
#                                   see attention_io.glsl), kv in f32 | f16;
#                                   q names the output's storage type, or
#                                   with NO_OUTPUT q's dtype (f32 | f16)
function(vkattn_attention_variants prefix)
  cmake_parse_arguments(ARG "NO_OUTPUT" "" "" ${ARGN})
  # bf16 (pairs in 32-bit words, no texel view): storage inputs only, every
  # q and kv pair with a bf16 in it
  foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
    set(out O_DT=${q})
    if(ARG_NO_OUTPUT)
      set(out "")
    endif()
    foreach(kv IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
      if(NOT (q STREQUAL "bf16" OR kv STREQUAL "bf16"))
        continue()
      endif()
      vkattn_storage_defines(ok extra ${q} ${kv})
      foreach(family IN LISTS ARG_UNPARSED_ARGUMENTS)
        vkattn_shader(${prefix}_${family}_${q}_${kv} ${prefix}_${family}.comp
                      DEFINES Q_DT=${q} KV_DT=${kv} ${out} ${extra})
      endforeach()
    endforeach()
  endforeach()
  foreach(q IN LISTS VKATTN_STORAGE_TYPES)
    set(out O_DT=${q})
    if(ARG_NO_OUTPUT)
      set(out "")
    endif()
    foreach(kv IN LISTS VKATTN_STORAGE_TYPES)
      vkattn_storage_defines(ok extra ${q} ${kv})
      if(NOT ok)
        continue()
      endif()
      foreach(family IN LISTS ARG_UNPARSED_ARGUMENTS)
        vkattn_shader(${prefix}_${family}_${q}_${kv} ${prefix}_${family}.comp
                      DEFINES Q_DT=${q} KV_DT=${kv} ${out} ${extra})
      endforeach()
    endforeach()
  endforeach()
  set(tex_qs ${VKATTN_STORAGE_TYPES})
  if(ARG_NO_OUTPUT)
    set(tex_qs f32 f16)
  endif()
  foreach(q IN LISTS tex_qs)
    vkattn_texel_view(qtex ${q})
    vkattn_storage_defines(ok extra ${q}) # the output is the one storage buffer
    set(out O_DT=${q})
    if(ARG_NO_OUTPUT)
      set(out "")
      set(extra "")
    endif()
    foreach(kv f32 f16)
      vkattn_texel_view(kvtex ${kv})
      foreach(family IN LISTS ARG_UNPARSED_ARGUMENTS)
        vkattn_shader(${prefix}_${family}_tex_${q}_${kv} ${prefix}_${family}.comp
                      DEFINES Q_DT=${qtex} KV_DT=${kvtex} ${out} ${extra})
      endforeach()
    endforeach()
  endforeach()
endfunction()

# convert.comp: dst = scale * src (bf16 too, either side)
foreach(src IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  foreach(dst IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
    vkattn_storage_defines(ok extra ${src} ${dst})
    if(ok)
      vkattn_shader(convert_${src}_${dst} convert.comp DEFINES SRC_DT=${src} DST_DT=${dst} ${extra})
    endif()
  endforeach()
endforeach()

# linear_*.comp: y = x W^T + b with a head-split store (src/ops/linear/).
# Families: sg (subgroup GEMM), sh (shared-memory GEMM), gemvsg / gemvsh (few
# rows, reduced with subgroupAdd / shared memory). Input modes (INPUT_MODE,
# the position in the list): tex (texel buffers), vec (storage, vec4 loads),
# sca (storage, scalar loads), texp (texel buffers, f16 operands as rgba32ui
# views of 8 halves: X_PACKED / W_PACKED). x and y share a storage type, w
# and b share one.
set(linear_modes tex vec sca texp)
foreach(fam sg sh gemvsg gemvsh)
  set(src linear_${fam}.comp)
  set(famdefs "")
  if(fam STREQUAL "gemvsg")
    set(src linear_gemv.comp)
    set(famdefs GEMV_SUBGROUP=1)
  elseif(fam STREQUAL "gemvsh")
    set(src linear_gemv.comp)
    set(famdefs GEMV_SUBGROUP=0)
  endif()
  foreach(mode IN LISTS linear_modes)
    list(FIND linear_modes ${mode} mode_index)
    foreach(xdt IN LISTS VKATTN_STORAGE_TYPES)
      foreach(wdt IN LISTS VKATTN_STORAGE_TYPES)
        vkattn_storage_defines(ok extra ${xdt} ${wdt})
        # texp: CPU-driver families only, and only where an operand is f16.
        if(NOT ok OR (mode STREQUAL "texp" AND
                      (fam STREQUAL "sh" OR (xdt STREQUAL "f32" AND wdt STREQUAL "f32"))))
          continue()
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
                      DEFINES ${famdefs} INPUT_MODE=${mode_index} X_DT=${xdt} W_DT=${wdt} ${extra})
      endforeach()
    endforeach()
  endforeach()
  # bf16 operands: storage modes, and texp (rgba32ui views of 8 bfloat16:
  # X_PACKED_BF16 / W_PACKED_BF16) outside the shared-memory GEMM; every
  # pair with a bf16
  foreach(mode vec sca texp)
    if(mode STREQUAL "texp" AND fam STREQUAL "sh")
      continue()
    endif()
    list(FIND linear_modes ${mode} mode_index)
    foreach(xdt f32 f16 f16p bf16)
      foreach(wdt f32 f16 f16p bf16)
        if(NOT (xdt STREQUAL "bf16" OR wdt STREQUAL "bf16"))
          continue()
        endif()
        vkattn_storage_defines(ok extra ${xdt} ${wdt})
        if(xdt STREQUAL "f16p")
          list(APPEND extra Y_PACKED=1)
        elseif(xdt STREQUAL "bf16")
          list(APPEND extra Y_PACKED=1 Y_BF16=1)
        endif()
        if(mode STREQUAL "texp")
          foreach(op x w)
            set(dt ${${op}dt})
            string(TOUPPER ${op} OP)
            if(dt STREQUAL "bf16")
              list(APPEND extra ${OP}_PACKED=1 ${OP}_PACKED_BF16=1)
            elseif(NOT dt STREQUAL "f32")
              list(APPEND extra ${OP}_PACKED=1)
            endif()
          endforeach()
        endif()
        vkattn_shader(linear_${fam}_${mode}_${xdt}_${wdt} ${src}
                      DEFINES ${famdefs} INPUT_MODE=${mode_index} X_DT=${xdt} W_DT=${wdt} ${extra})
      endforeach()
    endforeach()
  endforeach()
  # q8_0 weights (ggml's blocks along K, f32 bias): mode vec only, any x
  list(FIND linear_modes vec mode_index)
  foreach(xdt f32 f16 f16p bf16)
    vkattn_storage_defines(ok extra ${xdt})
    if(xdt STREQUAL "f16p")
      list(APPEND extra Y_PACKED=1)
    elseif(xdt STREQUAL "bf16")
      list(APPEND extra Y_PACKED=1 Y_BF16=1)
    endif()
    vkattn_shader(linear_${fam}_vec_${xdt}_q8_0 ${src}
                  DEFINES ${famdefs} INPUT_MODE=${mode_index} X_DT=${xdt} W_DT=q8_0 W_Q8_0=1
                          B_DT=f32 ${extra})
    # the GEMVs also through texels: x rgba32f / rgba16f, w rgba32ui
    if(src STREQUAL "linear_gemv.comp" AND NOT xdt STREQUAL "bf16")
      vkattn_shader(linear_${fam}_tex_${xdt}_q8_0 ${src}
                    DEFINES ${famdefs} INPUT_MODE=0 X_DT=${xdt} W_DT=q8_0 W_Q8_0=1 B_DT=f32
                            ${extra})
    endif()
  endforeach()
endforeach()

# attention_sg.comp (subgroup family) and attention_sm.comp (shared-memory
# family): FlashAttention-2 forward; attention_weights.comp: the
# probabilities, when asked for.
vkattn_attention_variants(attention sg sm)
vkattn_attention_variants(attention weights NO_OUTPUT)
# ... with k and v in storage `any` (attention_io.glsl: 32-bit words read in
# the dtypes of specialization constants 11 and 12): k and v of different
# dtypes, and quantized k and v; q and out in any storage.
foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_storage_defines(ok extra ${q})
  foreach(family sg sm)
    vkattn_shader(attention_${family}_${q}_any attention_${family}.comp
                  DEFINES Q_DT=${q} KV_DT=any KV_ANY=1 O_DT=${q} ${extra})
  endforeach()
  # the weights kernel reads only k: `any` for a quantized k
  vkattn_shader(attention_weights_${q}_any attention_weights.comp
                DEFINES Q_DT=${q} KV_DT=any KV_ANY=1 ${extra})
endforeach()
# attention_merge.comp: two results merged by their LSE (by out storage).
foreach(dt IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16) # bf16: pairs in words
  vkattn_storage_defines(ok extra ${dt})
  vkattn_shader(attention_merge_${dt} attention_merge.comp DEFINES O_DT=${dt} ${extra})
endforeach()

# attention_bwd_{dkdv,dq}.comp: the backward (attention_bwd_<kernel>_<in>_<out>:
# q, k, v, out and dout in one storage type, dq, dk and dv in another);
# attention_bwd_dsinks.comp reads out and dout only (by their storage).
# attention_dropout.comp, the forward's dropout pass, shares their layout.
foreach(in IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  foreach(out IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
    vkattn_storage_defines(ok extra ${in} ${out})
    if(ok)
      foreach(kernel dkdv dq)
        vkattn_shader(attention_bwd_${kernel}_${in}_${out} attention_bwd_${kernel}.comp
                      DEFINES IN_DT=${in} OUT_DT=${out} ${extra})
      endforeach()
    endif()
  endforeach()
  vkattn_storage_defines(ok extra ${in})
  vkattn_shader(attention_bwd_dsinks_${in} attention_bwd_dsinks.comp DEFINES IN_DT=${in} ${extra})
  # the forward's dropout pass (attention_dropout.comp): out in q's storage
  vkattn_shader(attention_dropout_${in} attention_dropout.comp
                DEFINES IN_DT=${in} OUT_DT=${in} ${extra})
endforeach()

# kv_append.comp: K and V of a step copied into a KV cache's block pools
# (kv_append_<cache>_<src>: by the cache's storage and K and V's).
foreach(dt IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  foreach(src IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
    vkattn_storage_defines(ok extra ${dt} ${src})
    if(ok)
      vkattn_shader(kv_append_${dt}_${src} kv_append.comp DEFINES DT=${dt} SRC_DT=${src} ${extra})
    endif()
  endforeach()
endforeach()

# kv_append_quant.comp: the same into a quantized cache (QF: the format's
# index, src/spec/dtype.h's vka_quant_index), from K and V in any storage;
# _odd: head dims of an odd number of blocks, for the formats whose blocks
# share words (34, 18, 22 bytes).
set(VKATTN_QUANT_FORMATS q8_0 q4_0 q4_1 q5_0 q5_1 iq4_nl)
set(VKATTN_QUANT_SHARING q8_0 q4_0 q5_0 iq4_nl)
foreach(qf IN LISTS VKATTN_QUANT_FORMATS)
  list(FIND VKATTN_QUANT_FORMATS ${qf} qf_index)
  foreach(dt IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
    vkattn_storage_defines(ok extra ${dt})
    vkattn_shader(kv_append_${qf}_${dt} kv_append_quant.comp DEFINES DT=${dt} QF=${qf_index} ${extra})
    if(qf IN_LIST VKATTN_QUANT_SHARING)
      vkattn_shader(kv_append_${qf}_${dt}_odd kv_append_quant.comp
                    DEFINES DT=${dt} QF=${qf_index} ODD_BLOCKS=1 ${extra})
    endif()
  endforeach()
endforeach()

# kv_attention_sg.comp (subgroup family) / kv_attention_sm.comp (shared-memory
# family): attention over a KV cache through its block tables (kv: the
# cache's storage), writing either the output (one split) or split-KV partial
# results, which kv_attention_combine.comp merges (by out storage).
vkattn_attention_variants(kv_attention sg sm)
# ... over a quantized cache (kv: any format, read as words and dequantized
# in the kernel; storage inputs only), q and out in any storage
foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_storage_defines(ok extra ${q})
  foreach(kv IN LISTS VKATTN_QUANT_FORMATS)
    foreach(family sg sm)
      vkattn_shader(kv_attention_${family}_${q}_${kv} kv_attention_${family}.comp
                    DEFINES Q_DT=${q} KV_DT=${kv} O_DT=${q} ${extra})
    endforeach()
  endforeach()
endforeach()
foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_storage_defines(ok extra ${q})
  vkattn_shader(kv_attention_combine_${q} kv_attention_combine.comp DEFINES O_DT=${q} ${extra})
endforeach()

# kv_decode_sg.comp: the subgroup family's decode kernel (few rows, head dim
# in whole octets per lane; src/ops/kvcache/kv_attention_config.c), texel
# inputs only, by q/out storage x cache dtype; KV_TEX16 / KV_TEXBF16 fetch
# raw f16 / bf16 octets.
foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_texel_view(qtex ${q})
  vkattn_storage_defines(ok extra ${q}) # the output is the one storage buffer
  foreach(kv f32 f16 bf16)
    vkattn_texel_view(kvtex ${kv})
    set(raw "")
    if(kv STREQUAL "f16")
      set(raw KV_TEX16=1)
    elseif(kv STREQUAL "bf16")
      set(raw KV_TEXBF16=1)
    endif()
    vkattn_shader(kv_decode_sg_tex_${q}_${kv} kv_decode_sg.comp
                  DEFINES Q_DT=${qtex} KV_DT=${kvtex} O_DT=${q} ${raw} ${extra})
  endforeach()
endforeach()

# kv_decode_q_sg.comp: the same over a quantized cache (blocks through
# rgba32ui views, QF: the format's index), by q/out storage.
foreach(q IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_texel_view(qtex ${q})
  vkattn_storage_defines(ok extra ${q})
  foreach(qf IN LISTS VKATTN_QUANT_FORMATS)
    list(FIND VKATTN_QUANT_FORMATS ${qf} qf_index)
    vkattn_shader(kv_decode_q_sg_${q}_${qf} kv_decode_q_sg.comp
                  DEFINES Q_DT=${qtex} KV_DT=texq O_DT=${q} QF=${qf_index} ${extra})
  endforeach()
endforeach()

# head_gate.comp: the head mask on the attention output, in place (by x's
# storage).
foreach(dt IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_storage_defines(ok extra ${dt})
  vkattn_shader(head_gate_${dt} head_gate.comp DEFINES DT=${dt} ${extra})
endforeach()

# rope.comp: rotary position embeddings (src/ops/rope/), by the storage of x
# and out (one dtype).
foreach(dt IN LISTS VKATTN_STORAGE_TYPES ITEMS bf16)
  vkattn_storage_defines(ok extra ${dt})
  vkattn_shader(rope_${dt} rope.comp DEFINES DT=${dt} ${extra})
endforeach()

# gemm_grad.comp: the backward GEMMs and column sums (src/ops/linear/
# linear_grad.c); dtypes are push constants over 32-bit words, one variant.
# mha_heads_bwd.comp: the layer's backward through QK-norm and RoPE (f32).
vkattn_shader(gemm_grad gemm_grad.comp)
vkattn_shader(mha_heads_bwd mha_heads_bwd.comp)

# selftest_*.comp: the start-up self-test's probes (src/core/selftest_probes.c):
# the subgroup contract, the texel-buffer formats, 16-bit storage, shared
# memory with barriers.
foreach(probe subgroup texel storage16 shared)
  vkattn_shader(selftest_${probe} selftest_${probe}.comp)
endforeach()

# selftest_coopmat.comp: the coopmat family's check (vulkan1.3; only where
# the compiler has GL_KHR_cooperative_matrix, cmake/coopmat.cmake).
vkattn_coopmat_shader(selftest_coopmat selftest_coopmat.comp)

# linear_cm.comp: the GEMM on cooperative matrices (coopmat family; devices
# with 16-bit storage only, so no f16p): storage modes vec and sca, x and w
# in f32 | f16 | bf16, and q8_0 weights in mode vec. f32 operands (and q8_0's
# dequantized weights) are split into two halves (X_SPLIT_ON / W_SPLIT_ON).
foreach(mode vec sca)
  list(FIND linear_modes ${mode} mode_index)
  foreach(xdt f32 f16 bf16)
    foreach(wdt f32 f16 bf16 q8_0)
      if(wdt STREQUAL "q8_0" AND NOT mode STREQUAL "vec")
        continue()
      endif()
      set(extra "")
      if(xdt STREQUAL "f16" OR wdt STREQUAL "f16")
        list(APPEND extra NEEDS_16BIT_STORAGE=1)
      endif()
      if(xdt STREQUAL "bf16")
        list(APPEND extra Y_PACKED=1 Y_BF16=1)
      endif()
      if(xdt STREQUAL "f32")
        list(APPEND extra X_SPLIT_ON=1)
      endif()
      if(wdt STREQUAL "f32" OR wdt STREQUAL "q8_0")
        list(APPEND extra W_SPLIT_ON=1)
      endif()
      if(wdt STREQUAL "q8_0")
        list(APPEND extra W_Q8_0=1 B_DT=f32)
      endif()
      vkattn_coopmat_shader(linear_cm_${mode}_${xdt}_${wdt} linear_cm.comp
                            DEFINES INPUT_MODE=${mode_index} X_DT=${xdt} W_DT=${wdt} ${extra})
    endforeach()
  endforeach()
endforeach()

# attention_cm.comp (prefill attention) and kv_attention_cm.comp (attention
# over a KV cache) on cooperative matrices (coopmat family, attention_cm.glsl),
# storage inputs: q/out in f32 | f16 | bf16; k/v in the same, the cache also
# in any quantized format. f32 operands are split into two halves (Q_SPLIT_ON: q and
# the output's P; KV_SPLIT_ON: f32 and quantized k/v). bf16 q takes
# Q_SPLIT_ON too (its values split exactly, lo 0): P is then computed as for
# f32 q, so a bf16 output is the f32 output rounded, bit for bit, as in the
# other families (test_bf16).
function(vkattn_coopmat_attention_variants prefix)
  foreach(q f32 f16 bf16)
    foreach(kv IN LISTS ARGN)
      set(extra "")
      if(q STREQUAL "f16" OR kv STREQUAL "f16")
        list(APPEND extra NEEDS_16BIT_STORAGE=1)
      endif()
      if(q STREQUAL "f32" OR q STREQUAL "bf16")
        list(APPEND extra Q_SPLIT_ON=1)
      endif()
      if(kv STREQUAL "f32" OR kv IN_LIST VKATTN_QUANT_FORMATS)
        list(APPEND extra KV_SPLIT_ON=1)
      endif()
      vkattn_coopmat_shader(${prefix}_cm_${q}_${kv} ${prefix}_cm.comp
                            DEFINES Q_DT=${q} KV_DT=${kv} O_DT=${q} ${extra})
    endforeach()
  endforeach()
endfunction()
vkattn_coopmat_attention_variants(attention f32 f16 bf16)
foreach(q f32 f16 bf16) # k and v `any` (above): split, as f32 or quantized
  set(extra KV_SPLIT_ON=1)
  if(q STREQUAL "f16")
    list(APPEND extra NEEDS_16BIT_STORAGE=1)
  else()
    list(APPEND extra Q_SPLIT_ON=1)
  endif()
  vkattn_coopmat_shader(attention_cm_${q}_any attention_cm.comp
                        DEFINES Q_DT=${q} KV_DT=any KV_ANY=1 O_DT=${q} ${extra})
endforeach()
vkattn_coopmat_attention_variants(kv_attention f32 f16 bf16 ${VKATTN_QUANT_FORMATS})
