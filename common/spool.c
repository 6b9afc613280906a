/* spool.c: the names of grant-hook's spool (spool.h). */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "spool.h"
#include "banned.h"

void spool_path(struct buf *out, const char *git_dir)
{
	buf_reset(out);
	buf_printf(out, "%s/" SPOOL_DIR, git_dir);
}

bool spool_is_file(const char *name)
{
	size_t n = strlen(name), s = strlen(SPOOL_SUFFIX);

	return n > s && !strcmp(name + n - s, SPOOL_SUFFIX);
}

bool spool_exists(const char *git_dir)
{
	struct buf path = BUF_INIT;
	struct stat st;
	bool yes;

	spool_path(&path, git_dir);
	yes = stat(path.p, &st) == 0;
	buf_free(&path);
	return yes;
}

bool spool_pending(const char *git_dir)
{
	struct buf path = BUF_INIT;
	struct dirent *de;
	bool any = false;
	DIR *d;

	spool_path(&path, git_dir);
	if ((d = opendir(path.p))) {
		while (!any && (de = readdir(d)))
			any = spool_is_file(de->d_name);
		closedir(d);
	}
	buf_free(&path);
	return any;
}
