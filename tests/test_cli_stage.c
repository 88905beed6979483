/* The CLI's all-or-nothing outputs (tools/cli/cli_stage.c) on their own:
 * refusals before any work, temporaries beside each target, placing them
 * all, and putting the earlier files back (bytes and mode) when one cannot
 * be placed after others were. */
#include "cli_stage.h"
#include "test_util.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char *path_of(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* The file holds `text` with `mode`. */
static void expect(const char *path, const char *text, mode_t mode)
{
    char got[256] = "";
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    got[n] = '\0';
    assert_string_equal(got, text);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, mode);
}

/* Entries of the directory besides the ones named (NULL-terminated). */
static int others_in_dir(const char *const *names)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int others = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        bool known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
        for (int k = 0; names[k] && !known; k++)
            known = strcmp(e->d_name, names[k]) == 0;
        if (!known) {
            fprintf(stderr, "left behind: %s\n", e->d_name);
            others++;
        }
    }
    closedir(d);
    return others;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/vkattn-stage-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* A directory, a missing folder and a file in a directory: refused; a
 * device is written as it is; nothing is created while checking. */
static void test_checks_before_work(void **state)
{
    (void)state;
    cli_stage s = {0};
    assert_int_equal(mkdir(path_of("sub"), 0755), 0);
    assert_int_equal(cli_stage_add(&s, "test", "--out", path_of("sub")), -1);
    assert_true(s.refused);
    assert_int_equal(cli_stage_add(&s, "test", "--out", path_of("missing/o.npy")), -1);
    put(path_of("plain"), "x", 0644);
    assert_int_equal(cli_stage_add(&s, "test", "--out", path_of("plain/o.npy")), -1);
    assert_int_equal(s.n, 0);
    assert_int_equal(cli_stage_add(&s, "test", "--out", "/dev/null"), 0);
    assert_string_equal(cli_stage_path(&s, "/dev/null"), "/dev/null");
    const char *o = path_of("o.npy");
    assert_int_equal(cli_stage_add(&s, "test", "--out", o), 0);
    const char *temp = cli_stage_path(&s, o);
    assert_string_not_equal(temp, o);
    assert_int_equal(strncmp(temp, dir, strlen(dir)), 0); /* beside it */
    assert_int_equal(access(temp, F_OK), -1);             /* reserved, not left there */
    assert_int_equal(cli_stage_finish(&s, "test", 1), 1);
    assert_int_equal(s.n, 0);
    const char *known[] = {"sub", "plain", NULL};
    assert_int_equal(others_in_dir(known), 0);
    rmdir(path_of("sub"));
    unlink(path_of("plain"));
}

/* Two outputs written; the second's path becomes a directory before they
 * are placed: the first is put back as it was, nothing is left behind. */
static void test_second_rename_fails(void **state)
{
    (void)state;
    const char *a = path_of("a.npy"), *b = path_of("b.npy");
    char a_path[512], b_path[512];
    snprintf(a_path, sizeof a_path, "%s", a);
    snprintf(b_path, sizeof b_path, "%s", b);
    put(a_path, "old a", 0640);
    cli_stage s = {0};
    assert_int_equal(cli_stage_add(&s, "test", "--out", a_path), 0);
    assert_int_equal(cli_stage_add(&s, "test", "--lse-out", b_path), 0);
    put(cli_stage_path(&s, a_path), "new a", 0644);
    put(cli_stage_path(&s, b_path), "new b", 0644);
    assert_int_equal(mkdir(b_path, 0755), 0); /* rename(file, directory) fails */
    put(path_of("b.npy/inside"), "keeps the directory non-empty", 0644);
    assert_int_equal(cli_stage_finish(&s, "test", 0), 1);
    expect(a_path, "old a", 0640);
    struct stat st;
    assert_int_equal(stat(b_path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    const char *known[] = {"a.npy", "b.npy", NULL};
    assert_int_equal(others_in_dir(known), 0);
    unlink(path_of("b.npy/inside"));
    rmdir(b_path);
    unlink(a_path);
}

/* Placed: the new bytes with the earlier file's mode; a new file with the
 * writer's; an output never written leaves its earlier file alone; no
 * temporaries or backups stay. A failed command places nothing. */
static void test_place_all(void **state)
{
    (void)state;
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, "%s", path_of("a.npy"));
    snprintf(b, sizeof b, "%s", path_of("b.npy"));
    snprintf(c, sizeof c, "%s", path_of("c.npy"));
    put(a, "old a", 0600);
    put(c, "old c", 0640);
    for (int status = 1; status >= 0; status--) {
        cli_stage s = {0};
        assert_int_equal(cli_stage_add(&s, "test", "--out", a), 0);
        assert_int_equal(cli_stage_add(&s, "test", "--weights-out", b), 0);
        assert_int_equal(cli_stage_add(&s, "test", "--lse-out", c), 0);
        put(cli_stage_path(&s, a), "new a", 0644);
        put(cli_stage_path(&s, b), "new b", 0644);
        assert_int_equal(cli_stage_finish(&s, "test", status), status);
        expect(a, status ? "old a" : "new a", 0600);
        assert_int_equal(access(b, F_OK), status ? -1 : 0);
        expect(c, "old c", 0640);
    }
    expect(b, "new b", 0644);
    const char *known[] = {"a.npy", "b.npy", "c.npy", NULL};
    assert_int_equal(others_in_dir(known), 0);
    unlink(a);
    unlink(b);
    unlink(c);
}

int main(void)
{
    umask(022);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks_before_work),
        cmocka_unit_test(test_second_rename_fails),
        cmocka_unit_test(test_place_all),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
