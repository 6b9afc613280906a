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
#include "xalloc.h"
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
	GD_GROW(l->v, l->cap, l->n + 1);
	char *c = xmalloc(n + 1);
	memcpy(c, s, n);
	c[n] = '\0';
	l->v[l->n++] = c;
}

static bool value_ok(const char *v, size_t n)
{
	if (n == 0 || n > HOOKLINE_BY_VALUE_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || v[i] == 0x7f)
			return false;
	return true;
}

bool hookline_by_ok(const char *words)
{
	size_t len = strlen(words);

	if (len > HOOKLINE_BY_MAX)
		return false;
	for (const char *w = words; *w;) {
		const char *sp = strchr(w, ' ');
		size_t n = sp ? (size_t)(sp - w) : strlen(w);
		const char *eq = memchr(w, '=', n);
		if (!eq || eq == w || !value_ok(eq + 1, n - (size_t)(eq - w) - 1))
			return false;
		for (const char *k = w; k < eq; k++)
			if (!((*k >= 'a' && *k <= 'z') || *k == '_'))
				return false;
		if (sp && !sp[1])
			return false; /* a trailing space */
		w = sp ? sp + 1 : w + n;
	}
	return true;
}

bool hookline_by_add(char *by, const char *key, const char *value)
{
	size_t len = strlen(by);
	char word[HOOKLINE_BY_MAX + 2];
	int n;

	if (!value || !value_ok(value, strlen(value)))
		return false;
	n = snprintf(word, sizeof(word), "%s%s=%s", len ? " " : "", key,
		     value);
	if (n < 0 || len + (size_t)n > HOOKLINE_BY_MAX)
		return false;
	memcpy(by + len, word, (size_t)n + 1);
	if (!hookline_by_ok(by)) {
		by[len] = '\0';
		return false;
	}
	return true;
}

bool hookline_by_get(char out[HOOKLINE_BY_VALUE_MAX + 1], const char *by,
		     const char *key)
{
	size_t kl = strlen(key);

	out[0] = '\0';
	for (const char *w = by; w && *w;) {
		const char *sp = strchr(w, ' ');
		size_t n = sp ? (size_t)(sp - w) : strlen(w);
		if (n > kl + 1 && !strncmp(w, key, kl) && w[kl] == '=' &&
		    n - kl - 1 <= HOOKLINE_BY_VALUE_MAX) {
			memcpy(out, w + kl + 1, n - kl - 1);
			out[n - kl - 1] = '\0';
			return true;
		}
		w = sp ? sp + 1 : NULL;
	}
	return false;
}

/* One line of a push (n bytes at s, no newline): the id, who pushed, or
 * a ref line.  head: no ref line came before it. */
static int one_line(struct hooklines *l, const char *s, size_t n, bool first,
		    bool head)
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
	if (head && !l->by[0] && !strncmp(line, "by ", 3)) {
		if (!line[3] || !hookline_by_ok(line + 3))
			return GD_EINVAL;
		memcpy(l->by, line + 3, n - 3 + 1);
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
		if ((rc = one_line(l, text + off, n, no == 1,
				   l->n == 0 && no <= 2)) < 0) {
			if (bad_line)
				*bad_line = no;
			hooklines_free(l);
			return rc;
		}
		off += n + (nl ? 1 : 0);
	}
	return 0;
}
