# Seconds each of the longest runs took in a cold CI run on a 2-core machine
# (tools/test.sh, Mesa's shader caches empty). ctest starts the costliest
# tests first when it has no timings of its own (a fresh clone), so that no
# long run starts last and keeps one core busy while the other idles; the
# figures only order the runs. Refresh them from
# build/Testing/Temporary/CTestCostData.txt after a cold run.
set(_vkattn_test_costs
  test_kv_cache_types.lavapipe=293
  test_gpu_assisted.lavapipe=233
  test_linear.lavapipe=188
  test_decode.lavapipe=170
  test_tuning.lavapipe=141
  test_torch_parity.lavapipe25=140
  test_cli_golden.lavapipe26cm=111
  test_torch_parity.lavapipe26=106
  test_cli.swiftshader=101
  test_attention.lavapipe=100
  test_attention_mods.lavapipe=100
  test_cli_golden.lavapipe512=93
  test_kv_quant_formats.lavapipe=93
  test_cli_mods.lavapipe=90
  test_attention_kv_dtypes.lavapipe=86
  test_kv_quant.lavapipe=77
  test_decode.lavapipe512.texel_subgroup=73
  test_decode.lavapipe512.storage_subgroup=70
  test_linear.lavapipe512.texel_subgroup=68
  test_linear.lavapipe26cm.coopmat=66
  test_cli.lavapipe=66
  test_cli_golden.swiftshader=62
  test_attention_head_dims.lavapipe=60
  test_kv_mods.lavapipe=60
  test_kv_mask.lavapipe=60
  test_attention_mods.lavapipe26cm.coopmat=59
  test_torch_parity.lavapipe26avx=59
  test_mha.lavapipe1024=56
  test_kv_attention.lavapipe=56
  test_decode.swiftshader=55
  test_heads.lavapipe25=52
  test_attention.lavapipe512.storage_subgroup=51
  test_mha_weight_dtypes.lavapipe=51
  test_linear_q8_0.lavapipe=51
  test_attention_head_dims.lavapipe26cm.coopmat=51
  test_torch_parity.lavapipe1024=50
  test_cli_heads.swiftshader=49
  test_bf16.lavapipe=48
  test_linear_q8_0.lavapipe26cm.coopmat=44
  test_cli_golden.lavapipe=44
  test_mha_appended.lavapipe=43
  test_attention_kv_dtypes.lavapipe26cm.coopmat=42
  test_kv_mask.lavapipe26cm.coopmat=41
  test_linear.lavapipe512.storage_subgroup=39
  test_mha_value_input.lavapipe=37
  test_attention.lavapipe512.texel_subgroup=37
  test_attention_mask.lavapipe25=37
  test_tuning.swiftshader=37
  test_mha.lavapipe25=36
  test_attention.lavapipe26cm.coopmat=34
  test_linear_cache.lavapipe=34
  test_torch_parity.swiftshader=33
  test_attention_mods.swiftshader=32
  test_attention_mask.lavapipe=32
  test_bf16.lavapipe26cm.coopmat=32
  test_heads.lavapipe26cm.coopmat=31
  test_attention_kv_dtypes.swiftshader=31
  test_kv_mods.lavapipe26cm.coopmat=29
  test_mha.lavapipe26cm.coopmat=26
  test_cli_outputs.swiftshader=26
  test_kv_attention.lavapipe512.texel_subgroup=24
  test_kv_attention.lavapipe26cm.coopmat=24
  test_linear.swiftshader=21
  test_attention_varlen.lavapipe=21
  test_heads.lavapipe=21
  test_torch_parity.lavapipe512=21
  test_cli_golden.lavapipe25=21
  test_cli_golden.lavapipe1024=21
  test_attention_mask.swiftshader=20
  test_kv_cache_types.swiftshader=20
)
foreach(entry IN LISTS _vkattn_test_costs)
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 seconds)
  if(TEST ${name})
    set_tests_properties(${name} PROPERTIES COST ${seconds})
  endif()
endforeach()
