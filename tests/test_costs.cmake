# Seconds each of the longest runs took in a cold CI run on a 2-core machine
# (tools/test.sh, Mesa's shader caches empty). ctest starts the costliest
# tests first when it has no timings of its own (a fresh clone), so that no
# long run starts last and keeps one core busy while the other idles; the
# figures only order the runs. Refresh them from
# build/Testing/Temporary/CTestCostData.txt after a cold run.
set(_vkattn_test_costs
  test_gpu_assisted.lavapipe=545
  test_linear.lavapipe=233
  test_cli_mods.lavapipe=155
  test_decode.lavapipe=129
  test_cli_golden.lavapipe26cm=116
  test_tuning.lavapipe=114
  test_cli.swiftshader=101
  test_linear.lavapipe26cm.coopmat=99
  test_attention_mods.lavapipe=97
  test_cli_golden.swiftshader=94
  test_decode.swiftshader=87
  test_attention.lavapipe=86
  test_attention_kv_dtypes.swiftshader=80
  test_kv_cache_types.lavapipe=150
  test_attention_kv_dtypes.lavapipe=55
  test_attention_kv_dtypes.lavapipe26cm.coopmat=45
  test_attention_mods.swiftshader=82
  test_mha_weight_dtypes.lavapipe=75
  test_torch_parity.lavapipe26=74
  test_decode.lavapipe512.texel_subgroup=73
  test_decode.lavapipe512.storage_subgroup=70
  test_linear.lavapipe512.texel_subgroup=68
  test_torch_parity.lavapipe26avx=66
  test_torch_parity.lavapipe25=65
  test_attention_mods.lavapipe26cm.coopmat=65
  test_cli.lavapipe=63
  test_kv_attention.lavapipe=61
  test_heads.lavapipe25=60
  test_attention_head_dims.lavapipe=59
  test_kv_quant.lavapipe=59
  test_kv_quant_formats.lavapipe=74
  test_kv_quant_formats.swiftshader=60
  test_mha.lavapipe1024=56
  test_tuning.swiftshader=54
  test_kv_mask.lavapipe=54
  test_bf16.lavapipe=53
  test_bf16.swiftshader=52
  test_attention.lavapipe512.storage_subgroup=51
  test_linear.swiftshader=51
  test_kv_mods.lavapipe=50
  test_cli_heads.swiftshader=49
  test_mha_weight_dtypes.swiftshader=49
  test_mha.lavapipe25=46
  test_linear_q8_0.lavapipe=45
  test_attention_mask.swiftshader=41
  test_attention.lavapipe26cm.coopmat=40
  test_cli_golden.lavapipe512=40
  test_linear_q8_0.lavapipe26cm.coopmat=40
  test_attention_head_dims.swiftshader=40
  test_cli_golden.lavapipe=39
  test_linear.lavapipe512.storage_subgroup=39
  test_attention_mask.lavapipe25=39
  test_attention.swiftshader=38
  test_bf16.lavapipe26cm.coopmat=38
  test_heads.swiftshader=37
  test_attention.lavapipe512.texel_subgroup=36
  test_torch_parity.swiftshader=35
  test_cli_weights.lavapipe=34
  test_cli_golden.lavapipe26avx=33
  test_torch_parity.lavapipe512=33
  test_cli_rope.lavapipe=32
  test_cli_golden.lavapipe26=32
  test_cli_golden.lavapipe25=32
  test_heads.lavapipe26cm.coopmat=31
  test_linear_cache.lavapipe=28
  test_coopmat_shapes=28
  test_torch_parity.lavapipe1024=27
  test_kv_attention.swiftshader=27
  test_torch_parity.lavapipe=27
  test_mha.lavapipe26cm.coopmat=26
  test_cli_outputs.swiftshader=26
  test_cli_heads.lavapipe25=25
  test_kv_mods.lavapipe26cm.coopmat=24
  test_kv_mask.lavapipe26cm.coopmat=24
  test_heads.lavapipe=23
  test_attention_mask.lavapipe=23
  test_cli_golden.lavapipe1024=22
  test_kv_mask.swiftshader=21
  test_cli_selftest.lavapipe25=21
)
foreach(entry IN LISTS _vkattn_test_costs)
  string(REPLACE "=" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 seconds)
  if(TEST ${name})
    set_tests_properties(${name} PROPERTIES COST ${seconds})
  endif()
endforeach()
