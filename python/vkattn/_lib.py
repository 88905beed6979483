"""ctypes mirror of the C API (include/vkattn.h and its parts) and the loader.

Every Structure below mirrors a C struct field by field, in order, with the
same types (enums are int, bool is c_bool). tests/python/test_layout.py
compiles a C program against the header and compares sizes and offsets, so a
change of the header that is not made here fails a test.
"""
import ctypes
import ctypes.util
import os
import sys

# ------------------------------------------------------------------ constants
SUCCESS = 0
ERROR_INVALID_ARGUMENT = -1
ERROR_OUT_OF_RANGE = -10
ERROR_SHAPE_MISMATCH = -11
ERROR_UNSUPPORTED_DTYPE = -12

DTYPE_F32, DTYPE_F16, DTYPE_U8, DTYPE_I32, DTYPE_BF16 = 0, 1, 2, 3, 4
DTYPE_Q8_0, DTYPE_Q4_0 = 5, 6
DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q5_1, DTYPE_IQ4_NL = 7, 8, 9, 10
CONTEXT_VALIDATION = 1 << 0
CONTEXT_NO_TEXEL_BUFFERS = 1 << 2
CONTEXT_NO_SUBGROUP_KERNELS = 1 << 3
CONTEXT_NO_SELF_TEST = 1 << 5
CONTEXT_NO_QUIRKS = 1 << 6
CONTEXT_SUBGROUP_KERNELS = 1 << 7
CONTEXT_COOPMAT_KERNELS = 1 << 10
CONTEXT_NO_COOPMAT_KERNELS = 1 << 11
FEATURES = ("subgroup_kernels", "shared_kernels", "texel_inputs", "storage_16bit",
            "coopmat_kernels")
SELF_TEST_SOURCES = ("ran", "cached", "skipped")
CAUSAL_BOTTOM_RIGHT, CAUSAL_TOP_LEFT = 0, 1
BOOL_MASK_TRUE_ATTENDS, BOOL_MASK_TRUE_BLOCKS = 0, 1
LOG_DEBUG, LOG_INFO, LOG_WARNING, LOG_ERROR = 0, 1, 2, 3
MAX_RANK = 4

_u32, _u64, _i64, _f32, _bool, _int = (ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64,
                                       ctypes.c_float, ctypes.c_bool, ctypes.c_int)
_i32 = ctypes.c_int32
_ptr = ctypes.c_void_p

LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class CoopmatShape(ctypes.Structure):
    _fields_ = [("m", _u32), ("n", _u32), ("k", _u32)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("index", _u32),
        ("name", ctypes.c_char * 256),
        ("driver_name", ctypes.c_char * 256),
        ("driver_info", ctypes.c_char * 256),
        ("type", _int),
        ("vendor_id", _u32), ("device_id", _u32),
        ("api_version", _u32),
        ("subgroup_size", _u32), ("subgroup_size_min", _u32), ("subgroup_size_max", _u32),
        ("subgroup_shuffle", _bool), ("subgroup_arithmetic", _bool),
        ("subgroup_size_control", _bool),
        ("max_shared_memory", _u32),
        ("max_workgroup_invocations", _u32),
        ("max_workgroup_size", _u32 * 3),
        ("max_workgroup_count", _u32 * 3),
        ("fp16_arithmetic", _bool), ("storage_16bit", _bool),
        ("f16_path", _int),
        ("max_storage_buffer_range", _u64),
        ("max_texel_buffer_elements", _u64),
        ("min_storage_buffer_offset_alignment", _u64),
        ("min_texel_buffer_offset_alignment", _u64),
        ("max_allocation_size", _u64),
        ("device_local_bytes", _u64),
        ("unified_memory", _bool), ("timestamps", _bool),
        ("timestamp_period_ns", _f32),
        ("push_constant_bytes", _u32),
        ("texel_inputs", _bool), ("subgroup_kernels", _bool),
        ("supported", _bool),
        ("unsupported_reason", ctypes.c_char * 128),
        ("driver_id", _u32), ("driver_version", _u32),
        ("coopmat_shape_count", _u32),
        ("coopmat_shapes", CoopmatShape * 8),
        ("coopmat_shape", CoopmatShape),
        ("coopmat_kernels", _bool),
        ("coopmat_why", ctypes.c_char * 128),
    ]


class FeatureReport(ctypes.Structure):
    _fields_ = [("offered", _bool), ("works", _bool), ("on", _bool),
                ("why", ctypes.c_char * 224)]


class SelfTestCheck(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("feature", _int), ("checked", _bool),
                ("passed", _bool), ("ms", ctypes.c_double), ("detail", ctypes.c_char * 160)]


class QuirkInfo(ctypes.Structure):
    _fields_ = [("id", ctypes.c_char * 48), ("turns_off", _u32), ("applied", _bool),
                ("why", ctypes.c_char * 256), ("reproducer", ctypes.c_char * 256)]


class SelfTestReport(ctypes.Structure):
    _fields_ = [("source", _int), ("ms", ctypes.c_double), ("check_count", _u32),
                ("checks", SelfTestCheck * 16), ("features", FeatureReport * len(FEATURES)),
                ("every_op_has_a_family", _bool), ("quirk_count", _u32),
                ("quirks", QuirkInfo * 8)]


class ContextDesc(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_char_p),
        ("flags", _u32),
        ("log", LOG_FN),
        ("log_user", _ptr),
        ("allocator", _ptr),
        ("borrow", _ptr),
        ("vulkan_allocator", _ptr),
        ("pipeline_cache_path", ctypes.c_char_p),
        ("pipeline_cache_data", _ptr),
        ("pipeline_cache_size", ctypes.c_size_t),
        ("tuning_path", ctypes.c_char_p),
        ("tuning_data", _ptr),
        ("tuning_size", ctypes.c_size_t),
        ("get_instance_proc_addr", _ptr),
    ]


class BufferDesc(ctypes.Structure):
    _fields_ = [("size", _u64), ("extra_usage", _u32)]


class Tensor(ctypes.Structure):
    _fields_ = [
        ("buffer", _ptr),
        ("offset", _u64),
        ("dtype", _int),
        ("rank", _u32),
        ("shape", _i64 * MAX_RANK),
        ("strides", _i64 * MAX_RANK),
    ]


class HostTensor(ctypes.Structure):
    _fields_ = [
        ("data", _ptr),
        ("dtype", _int),
        ("rank", _u32),
        ("shape", _i64 * MAX_RANK),
        ("strides", _i64 * MAX_RANK),
    ]


class AttentionArgs(ctypes.Structure):
    _fields_ = [
        ("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
        ("mask", Tensor), ("key_padding", Tensor), ("weights", Tensor),
        ("causal", _bool),
        ("scale", _f32),
        ("bool_mask", _int),
        ("causal_align", _int),
        ("window", _u32),
        ("softcap", _f32),
        ("sinks", Tensor),
        ("alibi_slopes", Tensor),
        ("alibi_max_bias", _f32),
        ("lse", Tensor),
        ("head_mask", Tensor),
        ("sequences", _u32),
        ("q_offsets", ctypes.POINTER(_i32)), ("k_offsets", ctypes.POINTER(_i32)),
        ("dropout_p", _f32), ("dropout_seed", ctypes.c_uint64),
    ]


class RefAttentionArgs(ctypes.Structure):
    _fields_ = [
        ("q", HostTensor), ("k", HostTensor), ("v", HostTensor), ("out", HostTensor),
        ("mask", HostTensor), ("key_padding", HostTensor), ("weights", HostTensor),
        ("causal", _bool),
        ("scale", _f32),
        ("bool_mask", _int),
        ("causal_align", _int),
        ("window", _u32),
        ("softcap", _f32),
        ("sinks", HostTensor),
        ("alibi_slopes", HostTensor),
        ("alibi_max_bias", _f32),
        ("lse", HostTensor),
        ("head_mask", HostTensor),
        ("sequences", _u32),
        ("q_offsets", ctypes.POINTER(_i32)), ("k_offsets", ctypes.POINTER(_i32)),
        ("dropout_p", _f32), ("dropout_seed", ctypes.c_uint64),
    ]


class AttentionBackwardArgs(ctypes.Structure):
    _fields_ = [("forward", AttentionArgs), ("dout", Tensor), ("dq", Tensor), ("dk", Tensor),
                ("dv", Tensor), ("dsinks", Tensor)]


class RefAttentionBackwardArgs(ctypes.Structure):
    _fields_ = [("forward", RefAttentionArgs), ("dout", HostTensor), ("dq", HostTensor),
                ("dk", HostTensor), ("dv", HostTensor), ("dsinks", HostTensor)]


class RopeDesc(ctypes.Structure):
    _fields_ = [
        ("theta", _f32),
        ("dims", _u32),
        ("style", _int),
        ("scaling", _int),
        ("factor", _f32),
        ("low_freq_factor", _f32),
        ("high_freq_factor", _f32),
        ("original_max_positions", _u32),
        ("reserved", _f32 * 8),
    ]


class MhaDesc(ctypes.Structure):
    _fields_ = [
        ("embed_dim", _u32), ("num_heads", _u32), ("num_kv_heads", _u32),
        ("head_dim", _u32), ("v_head_dim", _u32), ("kv_dim", _u32),
        ("bias", _bool),
        ("dtype", _int),
        ("scale", _f32),
        ("rope", RopeDesc),
        ("qk_norm", _bool),
        ("norm_eps", _f32),
        ("window", _u32),
        ("softcap", _f32),
        ("sinks", _bool),
        ("alibi", _bool),
        ("alibi_max_bias", _f32),
        ("weight_dtype", _int),
        ("value_dim", _u32),
        ("add_bias_kv", _bool),
        ("add_zero_attn", _bool),
    ]


class MhaWeights(ctypes.Structure):
    _fields_ = [(n, _ptr) for n in ("wq", "wk", "wv", "wqkv", "wo", "bq", "bk", "bv", "bqkv",
                                    "bo", "q_norm", "k_norm", "sinks", "alibi_slopes")]
    _fields_ = _fields_ + [("dtype", _int), ("bias_k", _ptr), ("bias_v", _ptr)]


class MhaForwardArgs(ctypes.Structure):
    _fields_ = [
        ("x", Tensor), ("kv", Tensor), ("y", Tensor),
        ("mask", Tensor), ("key_padding", Tensor), ("weights", Tensor),
        ("causal", _bool),
        ("bool_mask", _int),
        ("positions", Tensor),
        ("causal_align", _int),
        ("scratch", _ptr),
        ("scratch_offset", _u64),
        ("head_mask", Tensor),
        ("value", Tensor),
        ("sequences", _u32),
        ("q_offsets", ctypes.POINTER(_i32)), ("k_offsets", ctypes.POINTER(_i32)),
        ("dropout_p", _f32), ("dropout_seed", _u64),
    ]


class RefMhaArgs(ctypes.Structure):
    _fields_ = [
        ("x", HostTensor), ("kv", HostTensor), ("y", HostTensor),
        ("mask", HostTensor), ("key_padding", HostTensor), ("weights", HostTensor),
        ("causal", _bool),
        ("bool_mask", _int),
        ("positions", HostTensor),
        ("causal_align", _int),
        ("kv_cache_dtype", _int),
        ("head_mask", HostTensor),
        ("value", HostTensor),
        ("sequences", _u32),
        ("q_offsets", ctypes.POINTER(_i32)), ("k_offsets", ctypes.POINTER(_i32)),
        ("dropout_p", _f32), ("dropout_seed", _u64),
    ]


_MHA_GRAD_NAMES = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "q_norm", "k_norm", "sinks")


class MhaGrads(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in _MHA_GRAD_NAMES]


class MhaBackwardArgs(ctypes.Structure):
    _fields_ = [("forward", MhaForwardArgs), ("dy", Tensor), ("dx", Tensor), ("dkv", Tensor),
                ("dvalue", Tensor), ("grads", MhaGrads), ("accumulate", _bool)]


class RefMhaGrads(ctypes.Structure):
    _fields_ = [(n, HostTensor) for n in _MHA_GRAD_NAMES]


class RefMhaBackwardArgs(ctypes.Structure):
    _fields_ = [("forward", RefMhaArgs), ("dy", HostTensor), ("dx", HostTensor),
                ("dkv", HostTensor), ("dvalue", HostTensor), ("grads", RefMhaGrads)]


class KvCacheDesc(ctypes.Structure):
    _fields_ = [
        ("num_kv_heads", _u32), ("num_heads", _u32), ("head_dim", _u32),
        ("v_head_dim", _u32),
        ("dtype", _int),
        ("max_sequences", _u32), ("capacity", _u32), ("block_size", _u32),
        ("num_blocks", _u32), ("window", _u32),
    ]


class MhaStepArgs(ctypes.Structure):
    _fields_ = [
        ("cache", _ptr),
        ("batch", _u32),
        ("sequences", ctypes.POINTER(_u32)),
        ("x", Tensor), ("y", Tensor),
        ("kv_splits", _u32),
        ("scratch", _ptr),
        ("scratch_offset", _u64),
        ("mask", Tensor),
        ("head_mask", Tensor),
    ]


class KvAttentionArgs(ctypes.Structure):
    _fields_ = [
        ("cache", _ptr),
        ("batch", _u32),
        ("sequences", ctypes.POINTER(_u32)),
        ("q", Tensor), ("out", Tensor),
        ("scale", _f32),
        ("kv_splits", _u32),
        ("window", _u32),
        ("softcap", _f32),
        ("sinks", Tensor),
        ("alibi_slopes", Tensor),
        ("alibi_max_bias", _f32),
        ("lse", Tensor),
        ("mask", Tensor),
        ("q_offsets", ctypes.POINTER(_i32)),
    ]


# The structs the layout test checks against the C compiler.
STRUCTS = {
    "vkattn_device_info": DeviceInfo,
    "vkattn_feature_report": FeatureReport,
    "vkattn_self_test_check": SelfTestCheck,
    "vkattn_quirk_info": QuirkInfo,
    "vkattn_self_test_report": SelfTestReport,
    "vkattn_context_desc": ContextDesc,
    "vkattn_buffer_desc": BufferDesc,
    "vkattn_tensor": Tensor,
    "vkattn_host_tensor": HostTensor,
    "vkattn_attention_args": AttentionArgs,
    "vkattn_ref_attention_args": RefAttentionArgs,
    "vkattn_attention_backward_args": AttentionBackwardArgs,
    "vkattn_ref_attention_backward_args": RefAttentionBackwardArgs,
    "vkattn_rope_desc": RopeDesc,
    "vkattn_mha_desc": MhaDesc,
    "vkattn_mha_weights": MhaWeights,
    "vkattn_mha_forward_args": MhaForwardArgs,
    "vkattn_ref_mha_args": RefMhaArgs,
    "vkattn_mha_grads": MhaGrads,
    "vkattn_mha_backward_args": MhaBackwardArgs,
    "vkattn_ref_mha_grads": RefMhaGrads,
    "vkattn_ref_mha_backward_args": RefMhaBackwardArgs,
    "vkattn_kv_cache_desc": KvCacheDesc,
    "vkattn_mha_step_args": MhaStepArgs,
    "vkattn_kv_attention_args": KvAttentionArgs,
}

# ------------------------------------------------------------------ functions
_R = ctypes.c_int
_P = ctypes.POINTER
class TuneProgress(ctypes.Structure):
    _fields_ = [("op", ctypes.c_char_p), ("shape", ctypes.c_char_p), ("candidate", _u32),
                ("count", _u32), ("done", _bool), ("best_ms", _f32)]


TUNE_PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.POINTER(TuneProgress), ctypes.c_void_p)


class LinearTuneArgs(ctypes.Structure):
    _fields_ = [("m", _u32), ("n", _u32), ("k", _u32), ("x_dtype", _int), ("w_dtype", _int),
                ("progress", TUNE_PROGRESS_FN), ("progress_user", _ptr)]


class AttentionTuneArgs(ctypes.Structure):
    _fields_ = [("batch", _u32), ("num_heads", _u32), ("num_kv_heads", _u32), ("q_len", _u32),
                ("kv_len", _u32), ("head_dim", _u32), ("causal", _bool), ("q_dtype", _int),
                ("kv_dtype", _int), ("progress", TUNE_PROGRESS_FN), ("progress_user", _ptr),
                ("v_head_dim", _u32)]


class MhaTuneArgs(ctypes.Structure):
    _fields_ = [("batch", _u32), ("q_len", _u32), ("kv_len", _u32),
                ("progress", TUNE_PROGRESS_FN), ("progress_user", _ptr)]


class KvAttentionTuneArgs(ctypes.Structure):
    _fields_ = [("cache", _ptr), ("batch", _u32), ("new_tokens", _u32), ("length", _u32),
                ("progress", TUNE_PROGRESS_FN), ("progress_user", _ptr)]


class MhaParamCounts(ctypes.Structure):
    _fields_ = [("wq", _u64), ("wk", _u64), ("wv", _u64), ("wo", _u64),
                ("bq", _u64), ("bk", _u64), ("bv", _u64), ("bo", _u64),
                ("weights", _u64), ("biases", _u64), ("total", _u64), ("bytes", _u64),
                ("bias_k", _u64), ("bias_v", _u64)]


class MhaWeightCopy(ctypes.Structure):
    _fields_ = [(n, _ptr) for n in ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "bias_k",
                                    "bias_v")]


STRUCTS.update({
    "vkattn_mha_param_counts": MhaParamCounts,
    "vkattn_mha_weight_copy": MhaWeightCopy,
    "vkattn_tune_progress": TuneProgress,
    "vkattn_linear_tune_args": LinearTuneArgs,
    "vkattn_attention_tune_args": AttentionTuneArgs,
    "vkattn_mha_tune_args": MhaTuneArgs,
    "vkattn_kv_attention_tune_args": KvAttentionTuneArgs,
})

_FUNCS = {
    "vkattn_linear_tune": (_R, [_ptr, _P(LinearTuneArgs)]),
    "vkattn_attention_tune": (_R, [_ptr, _P(AttentionTuneArgs)]),
    "vkattn_mha_tune": (_R, [_ptr, _P(MhaTuneArgs)]),
    "vkattn_mha_step_tune": (_R, [_ptr, _P(KvAttentionTuneArgs)]),
    "vkattn_version": (_u32, []),
    "vkattn_version_string": (ctypes.c_char_p, []),
    "vkattn_result_name": (ctypes.c_char_p, [_int]),
    "vkattn_result_message": (ctypes.c_char_p, [_int]),
    "vkattn_list_devices": (_R, [ctypes.c_char_p, _P(DeviceInfo), _u32, _P(_u32), _P(_u32),
                                 LOG_FN, _ptr]),
    "vkattn_device_type_name": (ctypes.c_char_p, [_int]),
    "vkattn_context_create": (_R, [_P(ContextDesc), _P(_ptr)]),
    "vkattn_context_destroy": (None, [_ptr]),
    "vkattn_context_last_error": (ctypes.c_char_p, [_ptr]),
    "vkattn_context_device_info": (_P(DeviceInfo), [_ptr]),
    "vkattn_context_self_test": (_R, [_ptr, _P(SelfTestReport)]),
    "vkattn_context_run_self_test": (_R, [_ptr, _P(SelfTestReport)]),
    "vkattn_context_validation_counts": (None, [_ptr, _P(_u32), _P(_u32)]),
    "vkattn_buffer_create": (_R, [_ptr, _P(BufferDesc), _P(_ptr)]),
    "vkattn_buffer_destroy": (None, [_ptr]),
    "vkattn_buffer_upload": (_R, [_ptr, _u64, _ptr, _u64]),
    "vkattn_buffer_download": (_R, [_ptr, _u64, _ptr, _u64]),
    "vkattn_attention": (_R, [_ptr, _P(AttentionArgs)]),
    "vkattn_ref_attention": (_R, [_P(RefAttentionArgs), ctypes.c_char_p, ctypes.c_size_t]),
    "vkattn_attention_backward": (_R, [_ptr, _P(AttentionBackwardArgs)]),
    "vkattn_ref_attention_backward": (_R, [_P(RefAttentionBackwardArgs), ctypes.c_char_p,
                                           ctypes.c_size_t]),
    "vkattn_dropout_bits": (_u32, [_u64, _u32, _u32, _u32, _u32]),
    "vkattn_dropout_threshold": (_u32, [_f32]),
    "vkattn_ref_mha": (_R, [_P(MhaDesc), _P(MhaWeights), _P(RefMhaArgs), ctypes.c_char_p,
                            ctypes.c_size_t]),
    "vkattn_mha_create": (_R, [_ptr, _P(MhaDesc), _P(_ptr)]),
    "vkattn_mha_destroy": (None, [_ptr]),
    "vkattn_mha_config": (_P(MhaDesc), [_ptr]),
    "vkattn_mha_set_weights": (_R, [_ptr, _P(MhaWeights)]),
    "vkattn_mha_forward": (_R, [_ptr, _P(MhaForwardArgs)]),
    "vkattn_mha_scratch_size": (_R, [_ptr, _u32, _u32, _u32, _P(_u64)]),
    "vkattn_mha_reserve": (_R, [_ptr, _u32, _u32, _u32]),
    "vkattn_mha_backward_scratch_size": (_R, [_ptr, _u32, _u32, _u32, _P(_u64)]),
    "vkattn_mha_reserve_backward": (_R, [_ptr, _u32, _u32, _u32]),
    "vkattn_mha_backward": (_R, [_ptr, _P(MhaBackwardArgs)]),
    "vkattn_ref_mha_backward": (_R, [_P(MhaDesc), _P(MhaWeights), _P(RefMhaBackwardArgs),
                                     ctypes.c_char_p, ctypes.c_size_t]),
    "vkattn_kv_cache_create": (_R, [_ptr, _P(KvCacheDesc), _P(_ptr)]),
    "vkattn_kv_cache_destroy": (None, [_ptr]),
    "vkattn_kv_cache_config": (_P(KvCacheDesc), [_ptr]),
    "vkattn_kv_cache_length": (_R, [_ptr, _u32, _P(_u32)]),
    "vkattn_kv_cache_truncate": (_R, [_ptr, _u32, _u32]),
    "vkattn_mha_step": (_R, [_ptr, _P(MhaStepArgs)]),
    "vkattn_mha_prune_heads": (_R, [_ptr, _P(_u32), _u32]),
    "vkattn_mha_head_importance": (_R, [_ptr, _P(MhaForwardArgs), _P(_f32)]),
    "vkattn_mha_get_weights": (_R, [_ptr, _P(MhaWeightCopy)]),
    "vkattn_mha_param_count": (_R, [_P(MhaDesc), _P(MhaParamCounts), ctypes.c_char_p,
                                    ctypes.c_size_t]),
    "vkattn_kv_cache_memory": (_R, [_P(KvCacheDesc), _P(_u64), _P(_u64), ctypes.c_char_p,
                                    ctypes.c_size_t]),
    "vkattn_dtype_row_bytes": (_u64, [_int, _u64]),
    "vkattn_ref_dequantize": (_R, [_int, _ptr, _u64, _P(_f32), ctypes.c_char_p,
                                   ctypes.c_size_t]),
}


def _candidates():
    """Where the shared library may be, in order (see python/README.md)."""
    env = os.environ.get("VKATTN_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:  # written by CMake: the build tree's library, or the install's libdir
        from . import _location
        if getattr(_location, "LIBRARY", None):
            yield _location.LIBRARY
        if getattr(_location, "LIBDIR_FROM_PACKAGE", None):
            yield os.path.normpath(os.path.join(here, _location.LIBDIR_FROM_PACKAGE,
                                                "libvkattn.so.0"))
    except ImportError:
        pass
    yield os.path.join(here, "libvkattn.so.0")
    # pip-installed without the location file: the usual install prefixes
    # (a venv's own prefix first, for `cmake --install --prefix $VIRTUAL_ENV`)
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        for lib in ("lib", "lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu"):
            yield os.path.join(prefix, lib, "libvkattn.so.0")
    found = ctypes.util.find_library("vkattn")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        for name, (restype, argtypes) in _FUNCS.items():
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = argtypes
        lib.path = path
        return lib
    raise ImportError("vkattn: cannot find libvkattn.so (set VKATTN_LIBRARY to its path); tried: "
                      + "; ".join(tried))


lib = _load()
