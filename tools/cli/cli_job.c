/* The steps attention and mha share, in the order that leaves no output
 * file behind when any of them fails. */
#include "cli_job.h"
#include "cli_messages.h"
#include "cli_mods.h"
#include "cli_rope.h"

#include <stdlib.h>
#include <string.h>

int cli_job_load(cli_job *j, const uint32_t *ranks, int pad)
{
    cli_input *in = j->inputs;
    for (int k = 0; k < j->n_inputs; k++)
        in[k].bf16_bits = j->input_bf16;
    for (int k = 0; k < j->n_inputs; k++)
        if (in[k].path && !in[k].external && !in[k].array.data &&
            (k == pad                         ? cli_load_mask_u8(&in[k])
             : in[k].mask                     ? cli_load_mask(&in[k])
             : ranks[k] == CLI_POSITIONS_RANK ? cli_load_positions(&in[k])
             : ranks[k] == CLI_HEADS_RANK     ? cli_mods_load_heads(&in[k])
                                              : cli_load_f32(&in[k], ranks[k])) != 0)
            return -1;
    for (int k = 0; k < j->n_inputs; k++)
        if (in[k].path && in[k].mask && j->mask_true_blocks && in[k].array.dtype == NPY_F32) {
            cli_error("%s %s: --mask-true-blocks is for a boolean (bool or uint8) mask; this one "
                      "is float32 (additive)",
                      in[k].flag, in[k].path);
            return -1;
        }
    return 0;
}

/* Whether a mask input is given. */
static bool mask_given(const cli_job *j)
{
    for (int k = 0; k < j->n_inputs; k++)
        if (j->inputs[k].mask && j->inputs[k].path)
            return true;
    return false;
}

vkattn_bool_mask cli_job_bool_mask(const cli_job *j)
{
    return j->mask_true_blocks ? VKATTN_BOOL_MASK_TRUE_BLOCKS : VKATTN_BOOL_MASK_TRUE_ATTENDS;
}

int cli_job_upload(cli_job *j, vkattn_tensor *const *slots, int mask)
{
    const cli_input *in = j->inputs;
    for (int k = 0; k < j->n_inputs; k++) {
        if (!in[k].path || !slots[k])
            continue;
        vkattn_dtype dt = k == mask || in[k].keep_f32 ? VKATTN_DTYPE_F32 : j->dtype;
        if (!(j->bufs[k] = cli_upload(j->ctx, &in[k].array, dt)))
            return -1;
        *slots[k] = cli_tensor(j->bufs[k], &in[k].array, dt);
    }
    return 0;
}

void cli_job_host_inputs(const cli_job *j, vkattn_host_tensor *const *slots)
{
    for (int k = 0; k < j->n_inputs; k++) {
        const npy_array *a = &j->inputs[k].array;
        if (j->inputs[k].path && slots[k])
            *slots[k] = vkattn_host_tensor_make(a->data, cli_array_dtype(a, VKATTN_DTYPE_F32),
                                                a->rank, a->shape);
    }
}

/* Takes argv[*i] when it is an option of cli_job and returns 1; returns -1
 * after printing an error (a missing value); returns 0 for an option of the
 * command's own, with *value its value (*i advanced past it). */
static int parse_job_option(cli_job *j, int argc, char **argv, int *i, const char **value)
{
    const char *a = argv[*i];
    bool *flag = strcmp(a, "--causal") == 0             ? &j->causal
                 : strcmp(a, "--causal-top-left") == 0  ? &j->causal_top_left
                 : strcmp(a, "--per-head") == 0         ? &j->per_head
                 : strcmp(a, "--mask-true-blocks") == 0 ? &j->mask_true_blocks
                 : strcmp(a, "--seq-first") == 0        ? &j->seq_first
                 : strcmp(a, "--input-bf16") == 0       ? &j->input_bf16
                 : strcmp(a, "--check") == 0            ? &j->check
                                                        : NULL;
    if (flag) {
        *flag = true;
        return 1;
    }
    if (*i + 1 >= argc) {
        cli_error("%s: %s needs a value (see vkattn %s --help)", j->command, a, j->command);
        return -1;
    }
    const char *val = argv[++*i];
    bool known = false;
    for (int k = 0; k < j->n_inputs; k++)
        if (strcmp(a, j->inputs[k].flag) == 0) {
            j->inputs[k].path = val;
            known = true;
        }
    if (known)
        return 1;
    if (strcmp(a, "--out") == 0)
        j->out_path = val;
    else if (strcmp(a, "--weights-out") == 0)
        j->weights_path = val;
    else if (strcmp(a, "--lse-out") == 0)
        j->lse_path = val;
    else if (strcmp(a, "--dtype") == 0)
        return cli_parse_dtype(val, &j->dtype) != 0 ? -1 : 1;
    else {
        *value = val;
        return 0;
    }
    return 1;
}

/* cli_job_parse's arguments, for its cli_option_parser. */
typedef struct job_parser {
    cli_job *job;
    cli_value_option own;
    void *user;
} job_parser;

static int parse_option(void *user, int argc, char **argv, int *i)
{
    const job_parser *p = user;
    if (p->job->own_switch && p->job->own_switch(p->user, argv[*i]))
        return 0;
    const char *val = NULL;
    int taken = parse_job_option(p->job, argc, argv, i, &val);
    if (taken == 0)
        taken = p->own(p->user, argv[*i - 1], val);
    if (taken == 0)
        cli_error("%s: unknown option \"%s\" (see vkattn %s --help)", p->job->command, argv[*i - 1],
                  p->job->command);
    return taken > 0 ? 0 : 2;
}

int cli_job_parse(cli_job *j, int argc, char **argv, const char *help, cli_value_option own,
                  void *user)
{
    job_parser p = {j, own, user};
    return cli_parse_args(argc, argv, &j->device, help, parse_option, &p);
}

/* The job's output files: the device's, its own, the command's own. */
static int job_outputs(const cli_job *j, cli_path_use *uses)
{
    const cli_path_use mine[5] = {
        {"--out", j->out_path, true},         {"--weights-out", j->weights_path, true},
        {"--lse-out", j->lse_path, true},     {"--pipeline-cache", j->device.pipeline_cache, true},
        {"--tuning", j->device.tuning, true},
    };
    int n = 0;
    for (int k = 0; k < 5; k++)
        uses[n++] = mine[k];
    for (int k = 0; k < j->n_own_outputs; k++)
        uses[n++] = j->own_outputs[k];
    return n;
}

/* Every output against the other outputs and the inputs, before any work. */
static int check_paths(const cli_job *j)
{
    cli_path_use uses[CLI_MAX_PATH_USES];
    int n = job_outputs(j, uses);
    for (int k = 0; k < j->n_inputs && n < CLI_MAX_PATH_USES; k++)
        uses[n++] = (cli_path_use){j->inputs[k].flag, j->inputs[k].path, false};
    return cli_check_path_collisions(j->command, uses, n);
}

int cli_job_stage_outputs(cli_job *j)
{
    if (cli_stage_device_outputs(&j->device, j->command) != 0)
        return -1;
    cli_path_use uses[CLI_MAX_PATH_USES];
    int n = job_outputs(j, uses);
    for (int k = 0; k < n; k++) /* the device's are staged: the same path again is a no-op */
        if (strcmp(uses[k].option, "--pipeline-cache") != 0 &&
            strcmp(uses[k].option, "--tuning") != 0 &&
            cli_stage_add(&j->device.outputs, j->command, uses[k].option, uses[k].path) != 0)
            return -1;
    return 0;
}

const char *cli_job_output_path(const cli_job *j, const char *path)
{
    return cli_stage_path(&j->device.outputs, path);
}

int cli_job_check_required(const cli_job *j, const int *required, int n_required,
                           const char *missing)
{
    for (int k = 0; k < n_required; k++)
        if (!j->inputs[required[k]].path) {
            cli_error("%s: %s is required (see vkattn %s --help)", j->command,
                      j->inputs[required[k]].flag, j->command);
            return -1;
        }
    if (!missing && !j->out_path)
        missing = "--out";
    if (missing) {
        cli_error("%s: %s is required", j->command, missing);
        return -1;
    }
    if (j->per_head && !j->weights_path) {
        cli_error("%s: --per-head needs --weights-out", j->command);
        return -1;
    }
    if (j->mask_true_blocks && !mask_given(j)) {
        cli_error("%s: --mask-true-blocks needs --mask", j->command);
        return -1;
    }
    return check_paths(j);
}

void cli_job_shape_outputs(cli_job *j, uint32_t rank, const int64_t *shape, int64_t heads,
                           int64_t tq, int64_t tk)
{
    cli_outputs *r = &j->out;
    *r = (cli_outputs){.dtype = j->dtype, .rank = rank, .n = 1};
    for (uint32_t k = 0; k < rank; k++) {
        r->shape[k] = shape[k];
        r->n *= shape[k];
    }
    if (j->lse_path) {
        r->lse_shape[0] = shape[0];
        r->lse_shape[1] = heads;
        r->lse_shape[2] = tq;
        r->lse_n = shape[0] * heads * tq;
    }
    if (!j->weights_path)
        return;
    int64_t ws[4] = {shape[0], j->per_head ? heads : tq, j->per_head ? tq : tk, tk};
    r->weights_rank = j->per_head ? 4 : 3;
    r->weights_n = 1;
    for (uint32_t k = 0; k < r->weights_rank; k++) {
        r->weights_shape[k] = ws[k];
        r->weights_n *= ws[k];
    }
}

int cli_job_create_outputs(cli_job *j, vkattn_tensor *out, vkattn_tensor *weights,
                           vkattn_tensor *lse)
{
    cli_outputs *r = &j->out;
    vkattn_buffer_desc od = {.size = (uint64_t)r->n * vkattn_dtype_size(r->dtype)};
    vkattn_buffer_desc wd = {.size = (uint64_t)r->weights_n * 4};
    vkattn_buffer_desc ld = {.size = (uint64_t)r->lse_n * 4};
    vkattn_result res = vkattn_buffer_create(j->ctx, &od, &r->buffer);
    if (res == VKATTN_SUCCESS && r->weights_rank)
        res = vkattn_buffer_create(j->ctx, &wd, &r->weights_buffer);
    if (res == VKATTN_SUCCESS && r->lse_n && lse)
        res = vkattn_buffer_create(j->ctx, &ld, &r->lse_buffer);
    if (res != VKATTN_SUCCESS) { /* the library's result as it is: a size past the
                                    device's limit is not out of memory */
        cli_report_error(j->ctx, res, j->inputs, j->n_inputs);
        return -1;
    }
    *out = vkattn_tensor_make(r->buffer, 0, r->dtype, r->rank, r->shape);
    if (r->weights_buffer)
        *weights = vkattn_tensor_make(r->weights_buffer, 0, VKATTN_DTYPE_F32, r->weights_rank,
                                      r->weights_shape);
    if (r->lse_buffer)
        *lse = vkattn_tensor_make(r->lse_buffer, 0, VKATTN_DTYPE_F32, 3, r->lse_shape);
    return 0;
}

int cli_job_download(cli_job *j)
{
    cli_outputs *r = &j->out;
    if (!(r->out = cli_download_f32(j->ctx, r->buffer, r->n, r->dtype)))
        return -1;
    if (r->weights_buffer &&
        !(r->weights = cli_download_f32(j->ctx, r->weights_buffer, r->weights_n, VKATTN_DTYPE_F32)))
        return -1;
    if (r->lse_buffer &&
        !(r->lse = cli_download_f32(j->ctx, r->lse_buffer, r->lse_n, VKATTN_DTYPE_F32)))
        return -1;
    return 0;
}

int cli_job_reference(cli_job *j, vkattn_host_tensor *out, vkattn_host_tensor *weights,
                      vkattn_host_tensor *lse)
{
    cli_outputs *r = &j->out;
    r->ref = malloc((size_t)r->n * 4);
    r->ref_weights = r->weights ? malloc((size_t)r->weights_n * 4) : NULL;
    r->ref_lse = r->lse ? malloc((size_t)r->lse_n * 4) : NULL;
    if (!r->ref || (r->weights && !r->ref_weights) || (r->lse && !r->ref_lse)) {
        cli_error("CPU reference failed: out of memory");
        return -1;
    }
    *out = vkattn_host_tensor_make(r->ref, VKATTN_DTYPE_F32, r->rank, r->shape);
    if (r->ref_weights)
        *weights = vkattn_host_tensor_make(r->ref_weights, VKATTN_DTYPE_F32, r->weights_rank,
                                           r->weights_shape);
    if (r->ref_lse)
        *lse = vkattn_host_tensor_make(r->ref_lse, VKATTN_DTYPE_F32, 3, r->lse_shape);
    return 0;
}

int cli_job_compare(const cli_job *j)
{
    const cli_outputs *r = &j->out;
    if (cli_check_report(r->out, r->ref, r->n, r->weights, r->ref_weights, r->weights_n,
                         r->dtype) != 0)
        return 1;
    return r->lse ? cli_mods_check_lse(r->lse, r->ref_lse, r->lse_n, cli_tolerance(r->dtype)) : 0;
}

int cli_job_run(cli_job *j, cli_job_step load, cli_job_step run, cli_job_step check, void *user)
{
    if (cli_job_stage_outputs(j) != 0 || load(user) != 0 || !(j->ctx = cli_open(&j->device)) ||
        run(user) != 0)
        return 1;
    if (j->check && check(user) != 0)
        return 1;
    const cli_outputs *r = &j->out;
    const cli_output_file files[3] = {
        {cli_job_output_path(j, j->out_path), r->rank, r->shape, r->out},
        {cli_job_output_path(j, j->weights_path), r->weights_rank, r->weights_shape, r->weights},
        {cli_job_output_path(j, j->lse_path), 3, r->lse_shape, r->lse}};
    return cli_write_outputs(files, 3) != 0;
}

int cli_job_end(cli_job *j, int status)
{
    for (int k = 0; k < j->n_inputs; k++) {
        vkattn_buffer_destroy(j->bufs[k]);
        npy_free(&j->inputs[k].array);
    }
    cli_outputs *r = &j->out;
    vkattn_buffer_destroy(r->buffer);
    vkattn_buffer_destroy(r->weights_buffer);
    vkattn_buffer_destroy(r->lse_buffer);
    free(r->out);
    free(r->weights);
    free(r->lse);
    free(r->ref);
    free(r->ref_weights);
    free(r->ref_lse);
    return cli_close(j->ctx, &j->device, status);
}
