/*
 * fixture.c: the unit tests' shared setup and teardown (fixture.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <git2.h>
#include <sodium.h>

#include "config.h"
#include "fixture.h"
#include "ops.h"
#include "store.h"

int fx_group_setup(const char *ident, enum log_level level)
{
	if (sodium_init() < 0)
		return -1;
	git_libgit2_init();
	log_init(ident, false, level);
	return 0;
}

int fx_group_teardown(void **state)
{
	(void)state;
	git_libgit2_shutdown();
	return 0;
}

int fx_mkdtemp(char *dir, size_t size, const char *name, bool tmpfs)
{
	const char *tmp = getenv("TMPDIR");
	struct stat st;
	int n;

	if (tmpfs && stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode))
		tmp = "/dev/shm";
	n = snprintf(dir, size, "%s/%s.XXXXXX",
	             tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp", name);
	if (n < 0 || (size_t)n >= size || !mkdtemp(dir))
		return -1;
	return 0;
}

int fx_rmtree(const char *dir)
{
	char cmd[256];
	int n = snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);

	if (n < 0 || (size_t)n >= sizeof(cmd) || system(cmd) != 0)
		return -1;
	return 0;
}

int fx_store_open(struct store **s,
                  struct ops **o,
                  const char *dir,
                  const struct config *cfg,
                  const uint8_t *seal_key)
{
	char path[256];
	bool created = false;
	int n = snprintf(path, sizeof(path), "%s/store", dir);

	if (n < 0 || (size_t)n >= sizeof(path) ||
	    store_open(s, &created, path, seal_key) < 0)
		return -1;
	if (o && ops_open(o, *s, cfg, created) < 0)
		return -1;
	return 0;
}

void fx_store_close(struct store **s, struct ops **o)
{
	if (o)
		ops_destroy(o);
	store_destroy(s);
}
