/* test_xalloc.c: common/xalloc.c */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xalloc.h"

static void test_grow(void **state)
{
	int *v = NULL;
	size_t cap = 0;

	GD_GROW(v, cap, 1);
	assert_non_null(v);
	assert_int_equal(cap, 16);
	for (int i = 0; i < 16; i++)
		v[i] = i;
	GD_GROW(v, cap, 16); /* room: unchanged */
	assert_int_equal(cap, 16);
	GD_GROW(v, cap, 17);
	assert_int_equal(cap, 32);
	GD_GROW(v, cap, 1000);
	assert_int_equal(cap, 1024);
	for (int i = 0; i < 16; i++)
		assert_int_equal(v[i], i); /* kept */
	free(v);
}

static void test_dups(void **state)
{
	char *a = xstrdup("grantd"), *b = xstrndup("grantd", 5);
	char *c = xmemdup("", 0);

	assert_string_equal(a, "grantd");
	assert_string_equal(b, "grant");
	free(a);
	free(b);
	free(c);
	a = xcalloc(0, 0); /* a pointer to free, never NULL */
	assert_non_null(a);
	free(a);
}

/* the child's end: killed by SIGABRT (the one out-of-memory path) */
static int died_of_abort(void (*fn)(void))
{
	int st = 0;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		signal(SIGABRT, SIG_DFL);
		fn();
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void overflow(void)
{
	void *p = xreallocarray(NULL, SIZE_MAX / 2, 4);
	free(p);
}

static volatile int two = 2;
static void broken(void)
{
	GD_ASSERT(two == 3);
}

static void test_overflow_dies(void **state)
{
	assert_true(died_of_abort(overflow));
}

static void test_assert_stays(void **state)
{
	GD_ASSERT(two == 2);
	assert_true(died_of_abort(broken));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow),
		cmocka_unit_test(test_dups),
		cmocka_unit_test(test_overflow_dies),
		cmocka_unit_test(test_assert_stays),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
