/*
 * standalone_driver.c: runs a fuzz target's LLVMFuzzerTestOneInput over
 * every file named on the command line, or in a directory named there, once.
 *
 * Builds without clang (the idea of libgit2's fuzzers/standalone_driver.c),
 * so gcc builds replay the seed corpus and any crash files added to it as
 * an ordinary unit test.  An input that crashes crashes this program; one
 * that returns non-zero is reported and fails the run.  An empty corpus
 * fails too: a replay that ran nothing proves nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t len = 0, cap = 0;
	int rc = -1;

	if (!fp) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			uint8_t *p = realloc(data, cap);
			if (!p)
				goto done;
			data = p;
		}
		size_t n = fread(data + len, 1, cap - len, fp);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(fp)) {
		fprintf(stderr, "%s: read error\n", path);
		goto done;
	}
	/* A heap copy of exactly len bytes, so ASan catches reads past it. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact)
		goto done;
	memcpy(exact, data, len);
	rc = LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	if (rc)
		fprintf(stderr, "%s: target returned %d\n", path, rc);
done:
	free(data);
	fclose(fp);
	return rc;
}

static int run_path(const char *path, int *count)
{
	struct stat st;
	int failed = 0;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		(*count)++;
		return run_file(path) ? 1 : 0;
	}
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		size_t n = strlen(path) + strlen(e->d_name) + 2;
		char *sub = malloc(n);
		if (!sub) {
			failed++;
			break;
		}
		snprintf(sub, n, "%s/%s", path, e->d_name);
		failed += run_path(sub, count);
		free(sub);
	}
	closedir(d);
	return failed;
}

int main(int argc, char **argv)
{
	int count = 0, failed = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++)
		failed += run_path(argv[i], &count);
	printf("%d inputs, %d failed\n", count, failed);
	return failed || count == 0 ? 1 : 0;
}
