/* Issue 33: a command's outputs are all or nothing. For every output option
 * of attention, mha and viz: a run that fails on another output keeps an
 * existing file at --out byte for byte and mode for mode, and the reverse
 * (a run failing on --out keeps the file at that option); a run that fails
 * after the work has begun (the library refuses the shapes) keeps every
 * existing output; a run that succeeds replaces every one, keeping their
 * modes. No temporary is ever left beside an output. --tuning and
 * --pipeline-cache naming a directory are refused before any work. */
#include "npy/npy.h"
#include "test_cli_util.h"
#include "test_util.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VKATTN_CLI_PATH
#error "VKATTN_CLI_PATH must name the vkattn executable"
#endif

/* One output option of a command, and what an earlier file at it holds. */
typedef struct output_case {
    const char *command; /* "attention", "mha", "viz" */
    const char *option;
    const char *name;  /* its file in cli_tmp */
    const char *extra; /* options it needs ("--tune" for --tuning) */
} output_case;

static const output_case cases[] = {
    {"attention", "--weights-out", "W.npy", ""},
    {"attention", "--lse-out", "L.npy", ""},
    {"attention", "--weights-png", "W.png", ""},
    {"attention", "--pipeline-cache", "P.bin", ""},
    {"attention", "--tuning", "T.txt", "--tune --quiet"},
    {"mha", "--weights-out", "W.npy", ""},
    {"mha", "--weights-png", "W.svg", ""},
    {"mha", "--save-weights", "S.safetensors", ""},
    {"mha", "--head-report-json", "H.json", ""},
    {"mha", "--pipeline-cache", "P.bin", ""},
    {"mha", "--tuning", "T.txt", "--tune --quiet"},
    {"viz", "--pipeline-cache", "P.bin", ""},
};

/* The command on the suite's inputs, without its outputs. */
static const char *base_of(const char *command)
{
    static char base[3][4096];
    int k = strcmp(command, "attention") == 0 ? 0 : strcmp(command, "mha") == 0 ? 1 : 2;
    if (!base[k][0]) {
        char q[512], kk[512], v[512], x[512], w[512];
        snprintf(q, sizeof q, "%s", cli_path_of("Q.npy"));
        snprintf(kk, sizeof kk, "%s", cli_path_of("K.npy"));
        snprintf(v, sizeof v, "%s", cli_path_of("V.npy"));
        snprintf(x, sizeof x, "%s", cli_path_of("X.npy"));
        snprintf(w, sizeof w, "%s", cli_path_of("WM.npy"));
        if (k == 0)
            snprintf(base[k], sizeof base[k], "attention --q %s --k %s --v %s", q, kk, v);
        else if (k == 1)
            snprintf(base[k], sizeof base[k],
                     "mha --x %s --heads 2 --wq %s --wk %s --wv %s --wo %s", x, w, w, w, w);
        else
            snprintf(base[k], sizeof base[k], "viz --q %s --k %s", q, kk);
    }
    return base[k];
}

/* What an earlier file at an output holds: for --pipeline-cache and
 * --tuning, a file of their kind (another kind is refused on its own). */
static const char *old_text(const char *option)
{
    if (strcmp(option, "--tuning") == 0)
        return "vkattn-tuning 1\ndevice an earlier one\n";
    if (strcmp(option, "--pipeline-cache") == 0)
        return "\x20\0\0\0\x01\0\0\0an earlier device's cache......";
    return "an earlier result, not to be lost";
}

static size_t old_size(const char *option)
{
    return strcmp(option, "--pipeline-cache") == 0 ? 40 : strlen(old_text(option));
}

static void put_file(const char *path, const char *bytes, size_t size, mode_t mode)
{
    unlink(path);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, size, f), size);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* The file at `path` holds exactly `size` bytes `bytes` with `mode`. */
static void expect_file(const char *path, const char *bytes, size_t size, mode_t mode,
                        const char *args)
{
    char got[256];
    struct stat st;
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(got, 1, sizeof got, f) : 0;
    if (f)
        fclose(f);
    if (!f || n != size || memcmp(got, bytes, size) != 0)
        fail_msg("vkattn %s: %s is gone or changed (%zu bytes)", args, path, n);
    assert_int_equal(stat(path, &st), 0);
    if ((st.st_mode & 07777) != mode)
        fail_msg("vkattn %s: %s has mode %o, expected %o", args, path,
                 (unsigned)(st.st_mode & 07777), (unsigned)mode);
}

/* No temporary of the tool's is left in cli_tmp. */
static void expect_no_temporaries(const char *args)
{
    DIR *d = opendir(cli_tmp);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".vkattn-") || strstr(e->d_name, ".tmp")) {
            closedir(d);
            fail_msg("vkattn %s left %s behind", args, e->d_name);
        }
    closedir(d);
}

/* Runs `args` and expects a failure whose message names `option`. */
static void expect_failure_naming(const char *args, const char *option)
{
    char err[8192];
    if (cli_run_with("", args, err, sizeof err) == 0)
        fail_msg("vkattn %s: exit 0, expected a failure", args);
    if (!strstr(err, option) || !strstr(err, "nothing was written"))
        fail_msg("vkattn %s: the message does not name %s and say nothing was written:\n%s", args,
                 option, err);
}

static int group_setup(void **state)
{
    if (cli_setup(state) != 0)
        return -1;
    int64_t q[4] = {1, 2, 5, 16}, kv[4] = {1, 2, 6, 16}, x[3] = {1, 5, 32}, w[2] = {32, 32};
    cli_write_f32("Q.npy", 4, q, 1, -1, 1);
    cli_write_f32("K.npy", 4, kv, 2, -1, 1);
    cli_write_f32("V.npy", 4, kv, 3, -1, 1);
    cli_write_f32("X.npy", 3, x, 4, -1, 1);
    cli_write_f32("WM.npy", 2, w, 5, -0.3f, 0.3f);
    /* 3 KV heads for 2 query heads: the library refuses it once the work began */
    int64_t k3[4] = {1, 3, 6, 16}, wk3[2] = {48, 32};
    cli_write_f32("K3.npy", 4, k3, 6, -1, 1);
    cli_write_f32("WK3.npy", 2, wk3, 7, -0.3f, 0.3f);
    /* directories where outputs go: dirs/<each output's name> */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", cli_path_of("adir"));
    if (mkdir(dir, 0755) != 0 || mkdir(cli_path_of("dirs"), 0755) != 0)
        return -1;
    const char *more[2] = {"O.npy", "O.png"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] + 2; c++) {
        snprintf(dir, sizeof dir, "%s/dirs/%s", cli_tmp,
                 c < sizeof cases / sizeof cases[0] ? cases[c].name
                                                    : more[c - sizeof cases / sizeof cases[0]]);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* Each output with a path that cannot be written beside --out, and --out
 * with one beside each output: the earlier file at the other stays. */
static void test_failing_output_keeps_the_others(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const output_case *o = &cases[c];
        char out[512], mine[512], args[8192];
        snprintf(out, sizeof out, "%s", cli_path_of(strcmp(o->command, "viz") ? "O.npy" : "O.png"));
        snprintf(mine, sizeof mine, "%s", cli_path_of(o->name));
        /* a missing folder, a directory (with the extension the option wants) */
        const char *bad[2] = {"no-such-folder", "dirs"};
        for (int b = 0; b < 2; b++) {
            char path[600];
            snprintf(path, sizeof path, "%s/%s/%s", cli_tmp, bad[b], o->name);
            /* --out has an earlier result; the other output cannot be written */
            put_file(out, "old --out", 9, 0640);
            snprintf(args, sizeof args, "%s --out %s %s %s %s", base_of(o->command), out, o->option,
                     path, o->extra);
            expect_failure_naming(args, o->option);
            expect_file(out, "old --out", 9, 0640, args);
            expect_no_temporaries(args);
            /* the reverse: the output has an earlier file; --out cannot be written */
            put_file(mine, old_text(o->option), old_size(o->option), 0600);
            snprintf(path, sizeof path, "%s/%s/%s", cli_tmp, bad[b], strrchr(out, '/') + 1);
            snprintf(args, sizeof args, "%s --out %s %s %s %s", base_of(o->command), path,
                     o->option, mine, o->extra);
            expect_failure_naming(args, "--out");
            expect_file(mine, old_text(o->option), old_size(o->option), 0600, args);
            expect_no_temporaries(args);
            unlink(mine);
        }
    }
}

/* Every output of a run given an earlier file; `late` names the inputs
 * the library refuses once the context is open, else the run succeeds. */
static void run_with_all_outputs(const char *command, bool late)
{
    char args[8192];
    int n = snprintf(args, sizeof args, "%s", base_of(command));
    if (late && strcmp(command, "attention") == 0) /* K with 3 heads for Q's 2 */
        n = snprintf(args, sizeof args, "attention --q %s --k %s --v %s", cli_path_of("Q.npy"),
                     cli_path_of("K3.npy"), cli_path_of("K3.npy"));
    if (late && strcmp(command, "mha") == 0)
        n += snprintf(args + n, sizeof args - (size_t)n, " --kv-heads 3 --wk %s --wv %s",
                      cli_path_of("WK3.npy"), cli_path_of("WK3.npy"));
    const char *out = strcmp(command, "viz") ? "O.npy" : "O.png";
    put_file(cli_path_of(out), "old --out", 9, 0640);
    n += snprintf(args + n, sizeof args - (size_t)n, " --out %s", cli_path_of(out));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        if (strcmp(cases[c].command, command) == 0) {
            const output_case *o = &cases[c];
            put_file(cli_path_of(o->name), old_text(o->option), old_size(o->option), 0600);
            n += snprintf(args + n, sizeof args - (size_t)n, " %s %s %s", o->option,
                          cli_path_of(o->name), o->extra);
        }
    char err[8192];
    int code = cli_run_with("", args, err, sizeof err);
    if (late != (code != 0))
        fail_msg("vkattn %s: exit %d:\n%s", args, code, err);
    if (late && (!strstr(err, "does not divide") || strstr(err, "nothing was written") == NULL))
        fail_msg("vkattn %s: not the expected refusal:\n%s", args, err);
    for (size_t c = 0; c <= sizeof cases / sizeof cases[0]; c++) {
        const output_case *o = c < sizeof cases / sizeof cases[0] ? &cases[c] : NULL;
        if (o && strcmp(o->command, command) != 0)
            continue;
        const char *path = cli_path_of(o ? o->name : out);
        mode_t mode = o ? 0600 : 0640;
        if (late) {
            expect_file(path, o ? old_text(o->option) : "old --out", o ? old_size(o->option) : 9,
                        mode, args);
            continue;
        }
        /* replaced by this run's result, with the earlier file's mode */
        char text[256] = "";
        size_t got = cli_read_text(path, text, sizeof text);
        size_t was = o ? old_size(o->option) : 9;
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        if ((st.st_mode & 07777) != mode || got == 0 ||
            (got == was && memcmp(text, o ? old_text(o->option) : "old --out", was) == 0))
            fail_msg("vkattn %s: %s was not replaced (mode %o)", args, path,
                     (unsigned)(st.st_mode & 07777));
    }
    expect_no_temporaries(args);
}

static void test_late_failure_keeps_everything(void **state)
{
    (void)state;
    run_with_all_outputs("attention", true);
    run_with_all_outputs("mha", true);
}

/* An output that fails as it is written, after others were: /dev/full
 * (a device: written as it is, every write ENOSPC) as attention's --lse-out
 * (after --out and --weights-out) and mha's --head-report-json (after --out,
 * --weights-out, --weights-png): the earlier files stay. */
static void test_failure_after_writing(void **state)
{
    (void)state;
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        skip();
    const char *runs[2][2] = {{"attention", "--weights-out W.npy --lse-out /dev/full"},
                              {"mha", "--weights-out W.npy --weights-png W.svg "
                                      "--head-report-json /dev/full --save-weights S.safetensors"}};
    const char *kept[3] = {"O.npy", "W.npy", "W.svg"};
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 3; k++)
            put_file(cli_path_of(kept[k]), "old output", 10, 0640);
        unlink(cli_path_of("S.safetensors"));
        char opts[1024] = "", args[8192], err[8192];
        size_t n = 0; /* the names in runs[r][1] as paths in cli_tmp */
        for (const char *p = runs[r][1]; *p;) {
            size_t len = strcspn(p, " ");
            char word[256];
            snprintf(word, sizeof word, "%.*s", (int)len, p);
            n += (size_t)snprintf(opts + n, sizeof opts - n, "%s ",
                                  word[0] == '-' || word[0] == '/' ? word : cli_path_of(word));
            p += len + (p[len] == ' ');
        }
        snprintf(args, sizeof args, "%s --out %s %s", base_of(runs[r][0]), cli_path_of("O.npy"),
                 opts);
        if (cli_run_with("", args, err, sizeof err) == 0 || !strstr(err, "/dev/full"))
            fail_msg("vkattn %s: expected a failure writing /dev/full:\n%s", args, err);
        for (int k = 0; k < 3; k++)
            expect_file(cli_path_of(kept[k]), "old output", 10, 0640, args);
        assert_false(cli_exists(cli_path_of("S.safetensors")));
        expect_no_temporaries(args);
    }
}

static void test_success_replaces_everything(void **state)
{
    (void)state;
    run_with_all_outputs("attention", false);
    npy_array o = cli_read_npy("O.npy");
    assert_int_equal(o.rank, 4);
    assert_int_equal(o.shape[2], 5);
    npy_free(&o);
    run_with_all_outputs("mha", false);
    o = cli_read_npy("O.npy");
    assert_int_equal(o.rank, 3);
    npy_free(&o);
    run_with_all_outputs("viz", false);
    char png[8];
    assert_int_equal(cli_read_text(cli_path_of("O.png"), png, sizeof png), 7);
    assert_memory_equal(png, "\x89PNG\r\n\x1a", 7);
}

/* --tuning and --pipeline-cache naming a directory: refused before any
 * work (with or without --tune), --out left as it was. */
static void test_state_paths_that_are_directories(void **state)
{
    (void)state;
    const char *opts[3] = {"--tuning", "--tune --quiet --tuning", "--pipeline-cache"};
    const char *named[3] = {"--tuning", "--tuning", "--pipeline-cache"};
    for (int k = 0; k < 3; k++) {
        char args[4096], err[4096];
        put_file(cli_path_of("O.npy"), "old --out", 9, 0640);
        snprintf(args, sizeof args, "%s --out %s %s %s", base_of("attention"), cli_path_of("O.npy"),
                 opts[k], cli_path_of("adir"));
        assert_int_equal(cli_run_with("", args, err, sizeof err), 1);
        if (!strstr(err, "a directory, not a") || !strstr(err, named[k]))
            fail_msg("vkattn %s:\n%s", args, err);
        expect_file(cli_path_of("O.npy"), "old --out", 9, 0640, args);
        expect_no_temporaries(args);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failing_output_keeps_the_others),
        cmocka_unit_test(test_late_failure_keeps_everything),
        cmocka_unit_test(test_failure_after_writing),
        cmocka_unit_test(test_success_replaces_everything),
        cmocka_unit_test(test_state_paths_that_are_directories),
    };
    return cmocka_run_group_tests(tests, group_setup, cli_teardown);
}
