/* vkattn: the start-up self-test and the driver-quirk table. Included by
 * vkattn.h; not meant to be included on its own.
 *
 * Drivers have bugs: a subgroup size reported but not run, shuffles that
 * read the wrong lane, a texel format that reads zeros, a JIT that crashes
 * on a texel fetch. So that vkattn notices such a driver before it computes
 * garbage, every context checks, when it is created, what its kernels rely
 * on, with a few tiny known-answer dispatches ("checks", one or a few per
 * probe shader), and switches off what fails:
 *
 *   feature                     checks                          off: the kernels use
 *   subgroup kernels            subgroup.ids, subgroup.add_one, the shared-memory family
 *                               subgroup.reduce, subgroup.broadcast,
 *                               subgroup.shuffle, subgroup.shuffle_xor
 *   shared-memory kernels       shared.barrier                  the subgroup family
 *   texel-buffer inputs         texel.rgba32f, texel.rgba16f,   storage-buffer reads
 *                               texel.rgba32ui
 *   16-bit storage              storage16.load_store            halves packed in 32-bit
 *                                                               words (VKATTN_F16_PACKED)
 *   cooperative-matrix kernels  coopmat.muladd                  the subgroup or shared-
 *                                                               memory family
 *
 * Each check runs only where the device offers the feature (shuffles and
 * subgroup arithmetic, the texel formats, 16-bit storage). The subgroup
 * checks run at the size the device reports, with the pipeline pinned to it
 * where the device has subgroup size control: a driver that reports 32 lanes
 * but runs 16 fails subgroup.add_one. The context goes on with what passed;
 * vkattn_device_info's texel_inputs, subgroup_kernels, storage_16bit and
 * f16_path say what its kernels use.
 *
 * What a check cannot survive - a driver that crashes - is in the quirk
 * table: each entry names a driver (VkDriverId), a range of its versions
 * and, where it matters, host CPU features, and the features it switches
 * off, with the reason and a reproducer (docs/drivers.md lists them). A
 * quirk's feature is off without being checked. VKATTN_CONTEXT_NO_QUIRKS
 * ignores the table.
 *
 * The result travels with the pipeline cache: vkattn_context_pipeline_cache_data
 * (and _save_pipeline_cache) append it to the driver's cache data, and a
 * context created from that data on the same device, driver (driver UUID and
 * version, pipeline-cache UUID) and vkattn version takes it instead of
 * running the checks again: a warm start runs nothing. The bytes appended
 * (32) come after the driver's data, whose header stays first.
 *
 * Cost: four small pipelines and four dispatches when the checks run (five
 * where the device offers cooperative matrices), each
 * submitted and waited for on the context's queue during
 * vkattn_context_create (a borrowed context's: the host's queue), a few
 * milliseconds on GPUs and 8 to 70 ms on CPU drivers (docs/drivers.md);
 * nothing with a warm pipeline cache.
 * VKATTN_CONTEXT_NO_SELF_TEST skips the checks (the device's kernel choice
 * stands as queried; quirks still apply).
 */
#ifndef VKATTN_SELFTEST_H
#define VKATTN_SELFTEST_H

/* What the kernels rely on, each checked (or switched off by a quirk). */
typedef enum vkattn_feature {
    VKATTN_FEATURE_SUBGROUP_KERNELS = 0, /* the subgroup-shuffle kernel family */
    VKATTN_FEATURE_SHARED_KERNELS = 1,   /* the shared-memory kernel family */
    VKATTN_FEATURE_TEXEL_INPUTS = 2,     /* inputs read through uniform texel buffers */
    VKATTN_FEATURE_STORAGE_16BIT = 3,    /* f16 tensors as float16_t in storage buffers */
    VKATTN_FEATURE_COOPMAT_KERNELS = 4,  /* the cooperative-matrix kernel family */
    VKATTN_FEATURE_COUNT = 5
} vkattn_feature;

/* "subgroup kernels", "shared-memory kernels", "texel-buffer inputs",
 * "16-bit storage", "coopmat kernels"; "?" for other values. */
VKATTN_API const char *vkattn_feature_name(vkattn_feature feature);

/* One feature of one context. */
typedef struct vkattn_feature_report {
    bool offered; /* the device has what it needs (extensions, formats, features) */
    bool works;   /* offered, its checks passed (now or in the cached run; or they did
                     not run: VKATTN_CONTEXT_NO_SELF_TEST) and no quirk switched it off */
    bool on;      /* the context's kernels use it */
    /* Why it is not on, or not working: "check subgroup.add_one failed:
     * subgroupAdd(1.0) gave 16 in a pipeline built for 32", "quirk
     * lavapipe-26.1-avx512-texel: ...", "VKATTN_CONTEXT_NO_TEXEL_BUFFERS",
     * "the device has no subgroup shuffles", "GPUs use the shared-memory
     * family"; "" when on. */
    char why[224];
} vkattn_feature_report;

/* One check. */
typedef struct vkattn_self_test_check {
    char name[32];          /* "subgroup.add_one", "texel.rgba16f", ... */
    vkattn_feature feature; /* what it guards */
    bool checked;           /* it ran (now, or in the run the cached result is from) */
    bool passed;
    double ms;        /* wall time of its probe (pipeline, dispatch, read-back); 0 if cached */
    char detail[160]; /* a failure: what was seen against what was expected */
} vkattn_self_test_check;

/* A quirk of the table that applies to this device and host. */
typedef struct vkattn_quirk_info {
    char id[48];          /* "lavapipe-26.1-avx512-texel" */
    uint32_t turns_off;   /* bits 1 << vkattn_feature */
    bool applied;         /* false with VKATTN_CONTEXT_NO_QUIRKS */
    char why[256];        /* the driver bug */
    char reproducer[256]; /* how to see it without vkattn */
} vkattn_quirk_info;

typedef enum vkattn_self_test_source {
    VKATTN_SELF_TEST_RAN = 0,     /* the checks ran for this context */
    VKATTN_SELF_TEST_CACHED = 1,  /* taken from the pipeline cache data it was created with */
    VKATTN_SELF_TEST_SKIPPED = 2, /* VKATTN_CONTEXT_NO_SELF_TEST */
} vkattn_self_test_source;

#define VKATTN_SELF_TEST_MAX_CHECKS 16
#define VKATTN_MAX_QUIRKS 8

typedef struct vkattn_self_test_report {
    vkattn_self_test_source source;
    double ms; /* the checks' wall time when they ran */
    uint32_t check_count;
    vkattn_self_test_check checks[VKATTN_SELF_TEST_MAX_CHECKS];
    vkattn_feature_report features[VKATTN_FEATURE_COUNT];
    /* Every op has a working kernel family: the subgroup or the
     * shared-memory one works. When false the context still works but
     * its results cannot be trusted. */
    bool every_op_has_a_family;
    uint32_t quirk_count;
    vkattn_quirk_info quirks[VKATTN_MAX_QUIRKS];
} vkattn_self_test_report;

/* The context's self-test: what ran (or came from the cache), each
 * feature's state and why, the quirks that apply. */
VKATTN_API vkattn_result vkattn_context_self_test(const vkattn_context *ctx,
                                                  vkattn_self_test_report *out);
/* Runs every check now - whatever the cache held or the flags skipped -
 * applies the result to the context as creation does (features that fail
 * are switched off, ones that pass come back on unless a flag or quirk
 * keeps them off), and reports it. Not while another thread records with
 * the context, nor while its recorded work is pending. */
VKATTN_API vkattn_result vkattn_context_run_self_test(vkattn_context *ctx,
                                                      vkattn_self_test_report *out);

#endif
