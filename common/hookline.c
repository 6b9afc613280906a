/*
 * hookline.c: parsing a push's "OLD NEW REF" lines and its id.  The input
 * comes from git, from a spool file anyone with the repository's
 * permissions may have edited, or from a client of the user socket, so
 * every byte is checked and nothing is copied before its length is.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "err.h"
#include "hookline.h"
#include "banned.h"

static bool hex_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* One word of s: up to the next space or the end; its length. */
static size_t word(const char *s)
{
	return strcspn(s, " ");
}

int hookline_parse(struct hookline *out, const char *line)
{
	const char *p = line;
	size_t n;

	n = word(p);
	if (n != HOOKLINE_OID_HEX || !hex_ok(p, n) || p[n] != ' ')
		return GD_EINVAL;
	memcpy(out->old, p, n);
	out->old[n] = '\0';
	p += n + 1;
	n = word(p);
	if (n != HOOKLINE_OID_HEX || !hex_ok(p, n) || p[n] != ' ')
		return GD_EINVAL;
	memcpy(out->new_, p, n);
	out->new_[n] = '\0';
	p += n + 1;
	n = strlen(p);
	if (n == 0 || n > HOOKLINE_REF_MAX)
		return GD_EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] <= 0x20 || p[i] == 0x7f)
			return GD_EINVAL;
	memcpy(out->ref, p, n + 1);
	return 0;
}

bool hookline_id_ok(const char *s)
{
	return s && strnlen(s, HOOKLINE_ID_LEN + 1) == HOOKLINE_ID_LEN &&
	       hex_ok(s, HOOKLINE_ID_LEN);
}

int hookline_id_make(char out[HOOKLINE_ID_LEN + 1], uint64_t now_ms)
{
	uint64_t r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return GD_EIO;
	snprintf(out, HOOKLINE_ID_LEN + 1, "%016" PRIx64 "%016" PRIx64, now_ms,
		 r);
	return 0;
}

void hookline_req_id(char out[HOOKLINE_REQ_ID_MAX + 1], const char *id,
		     unsigned index)
{
	snprintf(out, HOOKLINE_REQ_ID_MAX + 1, "%.*s-%u", HOOKLINE_ID_LEN, id,
		 index);
}

bool hookline_req_id_ok(const char *s)
{
	size_t n = s ? strnlen(s, HOOKLINE_REQ_ID_MAX + 1) : 0;

	if (n < HOOKLINE_ID_LEN + 2 || n > HOOKLINE_REQ_ID_MAX ||
	    !hex_ok(s, HOOKLINE_ID_LEN) || s[HOOKLINE_ID_LEN] != '-')
		return false;
	s += HOOKLINE_ID_LEN + 1;
	/* decimal, no leading zero but for "0", at most 10 digits */
	if (strspn(s, "0123456789") != strlen(s) || (s[0] == '0' && s[1]))
		return false;
	return true;
}

void hooklines_free(struct hooklines *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static void add(struct hooklines *l, const char *s, size_t n)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	char *c = malloc(n + 1);
	if (!c)
		abort();
	memcpy(c, s, n);
	c[n] = '\0';
	l->v[l->n++] = c;
}

/* One line of a push (n bytes at s, no newline): the id or a ref line. */
static int one_line(struct hooklines *l, const char *s, size_t n, bool first)
{
	char line[HOOKLINE_LINE_MAX + 1];
	struct hookline hl;

	if (n > 0 && s[n - 1] == '\r')
		n--;
	if (n == 0)
		return 0;
	if (n > HOOKLINE_LINE_MAX || memchr(s, '\0', n))
		return GD_EINVAL;
	memcpy(line, s, n);
	line[n] = '\0';
	if (first && !strncmp(line, "id ", 3)) {
		if (!hookline_id_ok(line + 3))
			return GD_EINVAL;
		memcpy(l->id, line + 3, HOOKLINE_ID_LEN + 1);
		return 0;
	}
	if (hookline_parse(&hl, line) < 0)
		return GD_EINVAL;
	if (l->n == HOOKLINE_MAX_LINES)
		return GD_ETOOBIG;
	add(l, line, n);
	return 0;
}

int hooklines_parse(struct hooklines *l, const char *text, size_t len,
		    size_t *bad_line)
{
	size_t no = 0;
	int rc = 0;

	for (size_t off = 0; off < len;) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		no++;
		if ((rc = one_line(l, text + off, n, no == 1)) < 0) {
			if (bad_line)
				*bad_line = no;
			hooklines_free(l);
			return rc;
		}
		off += n + (nl ? 1 : 0);
	}
	return 0;
}
