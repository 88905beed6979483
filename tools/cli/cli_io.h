/* .npy inputs and outputs of the CLI commands, and their device copies. */
#ifndef VKATTN_CLI_IO_H
#define VKATTN_CLI_IO_H

#include "npy/npy.h"
#include "vkattn.h"

#include <stdbool.h>

/* One input file given by a flag ("--q"); `array` empty until loaded. */
typedef struct cli_input {
    const char *flag;
    const char *path; /* NULL: not given */
    npy_array array;
    bool keep_f32;  /* stored as f32 whatever --dtype (per-head logits and slopes) */
    bool mask;      /* an attention mask: float32 (additive) or bool/uint8, rank 2-4 */
    bool external;  /* a file the command reads itself (--weights), not one array */
    bool bf16_bits; /* --input-bf16: a uint16 array holds bf16 bits (widened exactly) */
    /* The library's name of it in messages ("args-><arg>"), when not the
     * flag's ("q_offsets" for --seq-offsets); NULL: the flag's. */
    const char *arg;
    /* Dimensions exchanged between the file and the library's view of it
     * (--layout bthd: 1 and 2; --seq-first: 0 and 1), for messages; equal:
     * none. Set by cli_input_swap_dims. */
    int8_t swapped[2];
} cli_input;

/* Exchanges dims i and j of a loaded input's shape (the library sees the
 * file's [B,T,H,D] as [B,H,T,D] through strides) and remembers it, so that
 * messages name the file's own dimensions. */
void cli_input_swap_dims(cli_input *in, int i, int j);

/* Reads the input's file into in->array; a dtype no .npy reader takes is
 * refused with `accepted` (what this input takes: "a mask is ..."). Prints
 * the error naming the flag and file and returns -1 on failure. */
int cli_read_npy(cli_input *in, const char *accepted);
/* Loads a float32 or float16 input (with in->bf16_bits, unless keep_f32: a
 * uint16 array of bf16 bits, and nothing else), widened exactly, of rank
 * `rank` (0: any 1..4). Prints the error naming the file and returns -1 on
 * failure. */
int cli_load_f32(cli_input *in, uint32_t rank);
/* A loaded float16 (or uint16 bf16 bits) array widened to float32 in its
 * place (exact); -1 after printing when out of memory. */
int cli_widen_f16(cli_input *in);
/* Loads an attention mask: float32 or float16 (additive) or uint8/bool (boolean),
 * rank 2 to 4 (the library checks the shape). */
int cli_load_mask(cli_input *in);
/* Loads a key-padding input: uint8 or bool, rank 2. */
int cli_load_mask_u8(cli_input *in);
/* "[i, j, k]": the index of element `flat` of a row-major array. */
void cli_element_text(uint32_t rank, const int64_t *shape, int64_t flat, char *buf, size_t size);
/* The index of the first NaN or infinite value, or -1. */
int64_t cli_first_nonfinite(const float *data, int64_t n);
/* Fails, naming the input's flag, file and the element ("--wq W.npy:
 * element [3, 5] is NaN; <rule>"), when a loaded float32 input holds a value
 * that is not finite. 0, or -1 after printing. */
int cli_check_finite(const cli_input *in, const char *rule);
/* Fails, naming the file, when a dimension is not `want` (skipped when
 * want < 0). `what` describes the dimension ("embed_dim"). */
int cli_expect_dim(const cli_input *in, uint32_t dim, int64_t want, const char *what);
int64_t cli_numel(const npy_array *a);
/* "(2, 3, 4)": an array's shape for messages, as numpy prints it. */
void cli_shape_text(const npy_array *a, char *buf, size_t size);

/* The library's dtype of a loaded array: `f32_as` for float32 data, I32
 * for int32 (positions), U8 for uint8 and bool. */
vkattn_dtype cli_array_dtype(const npy_array *a, vkattn_dtype f32_as);
/* A device buffer with the array's values in `dtype` (f32 data converted to
 * f16 on the host when dtype is f16; u8 and int32 copied). NULL on failure
 * (printed). */
vkattn_buffer *cli_upload(vkattn_context *ctx, const npy_array *a, vkattn_dtype dtype);
/* A tensor over a whole uploaded array. */
vkattn_tensor cli_tensor(vkattn_buffer *b, const npy_array *a, vkattn_dtype dtype);
/* Reads `count` elements of `dtype` from the buffer as f32 (malloc'd). */
float *cli_download_f32(vkattn_context *ctx, vkattn_buffer *b, int64_t count, vkattn_dtype dtype);
/* The values the device actually saw: f32 data rounded to f16 and back when
 * dtype is f16 (so the CPU reference gets the same inputs; not for inputs
 * that keep f32). In place. A
 * value f16 cannot hold (NaN, inf, |x| > 65504) is refused: -1 after
 * printing the input's flag, file and largest |value|. */
int cli_round_to_dtype(cli_input *in, vkattn_dtype dtype);

/* Writes float32 data; prints the error and returns -1 on failure. */
int cli_write_f32(const char *path, uint32_t rank, const int64_t *shape, const float *data);

/* --check's tolerance on the elementwise error for a device dtype: 2e-4
 * for f32, 1.5e-2 for f16 and bf16 (fp32 accumulation either way). */
double cli_tolerance(vkattn_dtype dtype);
/* Parses "f32" / "f16" / "bf16" into *dtype; prints an error and returns -1
 * otherwise. */
int cli_parse_dtype(const char *text, vkattn_dtype *dtype);
/* The dtype a cache-type name names (f32, f16, bf16, q8_0, q4_0, q4_1,
 * q5_0, q5_1, iq4_nl: mha's --kv-dtype, attention's --k-dtype / --v-dtype);
 * `fallback` for NULL or another name. */
vkattn_dtype cli_dtype_named(const char *name, vkattn_dtype fallback);
/* Parses a float option value: the whole text, finite and, unless 0, a
 * normal float; prints an error naming the option and returns -1 if not. */
int cli_parse_float(const char *flag, const char *text, float *out);
/* cli_parse_float, and the value must be > 0 (--scale, --softcap). */
int cli_parse_positive(const char *flag, const char *text, float *out);
/* Parses a positive integer option value. */
int cli_parse_uint(const char *flag, const char *text, uint32_t *out);

/* Max over elements of |got - want| / (1 + |want|) and whether anything is
 * not finite (for --check). */
double cli_max_rel_error(const float *got, const float *want, int64_t n, bool *nonfinite);
/* --check: prints the max elementwise errors of the output (and of the
 * attention weights when `weights` is not NULL) against the CPU reference
 * and returns 0, or prints why the check failed and returns 1. */
int cli_check_report(const float *out, const float *ref, int64_t n, const float *weights,
                     const float *ref_weights, int64_t weights_n, vkattn_dtype dtype);
/* One float32 output file; data NULL: not asked for. */
typedef struct cli_output_file {
    const char *path;
    uint32_t rank;
    const int64_t *shape;
    const float *data;
} cli_output_file;
/* Writes the files in order (to their staged temporaries: cli_stage.h,
 * which removes them when the command fails). 0, or 1 after printing. */
int cli_write_outputs(const cli_output_file *files, int n);

/* A tensor stored with dims i and j exchanged ([B,T,H,D] for [B,H,T,D],
 * [T,B,E] for [B,T,E]): cli_swap_dims swaps them in a shape (either way),
 * cli_swapped_strides gives the strides, in elements, of the logical
 * `shape` (rank `rank`) over that contiguous storage. No data moves. */
void cli_swap_dims(int64_t *shape, int i, int j);
void cli_swapped_strides(const int64_t *shape, uint32_t rank, int i, int j, int64_t *strides);

#endif
