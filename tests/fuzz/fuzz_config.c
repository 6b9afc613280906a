/*
 * fuzz_config.c: the INI configuration reader.
 *
 * config_load() reads a file, so each input is written to one temporary
 * file (made once per process, rewritten in place) and loaded from there.
 * A load either succeeds with a config or fails with a message that names
 * the file, as config.h promises.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[64];

static void cleanup(void)
{
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct config *cfg = NULL;
	struct buf err = BUF_INIT;

	if (fd < 0) {
		const char *tmp = getenv("TMPDIR");
		snprintf(path, sizeof(path), "%s/fuzz-config-XXXXXX",
			 tmp && *tmp && strlen(tmp) < 32 ? tmp : "/tmp");
		fd = mkstemp(path);
		if (fd < 0)
			abort();
		atexit(cleanup);
	}
	if (ftruncate(fd, 0) < 0 ||
	    pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();

	int rc = config_load(&cfg, path, &err);
	if (rc == 0) {
		if (!cfg || !cfg->site || !cfg->data_dir || !cfg->repo_dir)
			abort();
		config_free(&cfg);
		if (cfg)
			abort();
	} else {
		if (cfg || !strstr(buf_str(&err), path))
			abort();
	}
	buf_free(&err);
	return 0;
}
