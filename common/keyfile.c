/*
 * keyfile.c: SSH public key files (keyfile.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "keyfile.h"
#include "names.h"
#include "banned.h"

#define KEYFILE_MAX (1 << 20) /* a keydir file is a few hundred bytes */

int keyfile_parse(char **out, size_t *n, const char *text, const char **why)
{
	struct buf b = BUF_INIT, line = BUF_INIT;
	const char *p = text;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*why = NULL;
	while (*p) {
		const char *e = p + strcspn(p, "\n");
		const char *s = p;
		p = *e ? e + 1 : e;
		while (s < e && (*s == ' ' || *s == '\t'))
			s++;
		while (e > s && strchr(" \t\r", e[-1]))
			e--;
		if (s == e || *s == '#')
			continue;
		buf_reset(&line);
		buf_add(&line, s, (size_t)(e - s));
		if (!name_pubkey_ok(buf_str(&line))) {
			*why = "a line is no SSH public key ('TYPE BASE64 "
			       "[comment]', no options)";
			rc = GD_EINVAL;
			break;
		}
		if ((*n)++)
			buf_puts(&b, "\n");
		buf_add(&b, line.p, line.len);
	}
	if (rc == 0 && !*n) {
		*why = "no key in it";
		rc = GD_EINVAL;
	}
	buf_free(&line);
	if (rc == 0)
		*out = buf_detach(&b);
	else
		*n = 0;
	buf_free(&b);
	return rc;
}

int keyfile_load(char **out, size_t *n, const char *path, const char **why)
{
	struct buf b = BUF_INIT;
	char chunk[4096];
	size_t got;
	int rc = 0;
	FILE *fp = fopen(path, "r");

	*out = NULL;
	*n = 0;
	*why = NULL;
	if (!fp)
		return GD_EIO;
	while ((got = fread(chunk, 1, sizeof(chunk), fp)) > 0 &&
	       b.len < KEYFILE_MAX)
		buf_add(&b, chunk, got);
	if (ferror(fp))
		rc = GD_EIO;
	else if (b.len >= KEYFILE_MAX)
		*why = "larger than 1 MiB", rc = GD_EINVAL;
	fclose(fp);
	if (rc == 0)
		rc = keyfile_parse(out, n, buf_str(&b), why);
	buf_free(&b);
	if (rc == GD_EIO && !errno)
		errno = EIO;
	return rc;
}

int keyfile_gitolite_user(char *out, size_t len, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n <= 4 || strcmp(base + n - 4, ".pub"))
		return GD_EINVAL;
	n -= 4;
	/* s/(\@[^.]+)?\.pub$// : the first '@' after which no '.' comes */
	size_t at = n;
	for (size_t i = n; i-- > 0 && base[i] != '.';)
		if (base[i] == '@' && i + 1 < n)
			at = i;
	n = at;
	if (!n || n >= len)
		return GD_EINVAL;
	memcpy(out, base, n);
	out[n] = '\0';
	return 0;
}
