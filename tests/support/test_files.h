/* Scratch-directory clean-up shared by the test suites and the fuzz
 * harnesses (no cmocka, no vkattn: the fuzz build links it alone). */
#ifndef VKATTN_TEST_FILES_H
#define VKATTN_TEST_FILES_H

/* Removes `dir` and what it holds, descending at most `max_depth` levels of
 * subdirectories; links are removed, never followed. */
void test_remove_tree(const char *dir, int max_depth);

#endif
