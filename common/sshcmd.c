/*
 * sshcmd.c: SSH_ORIGINAL_COMMAND and SSH_CONNECTION as grant-shell reads
 * them.  Kept apart from grant-shell so the parser of untrusted input has
 * a contract, a unit test and a fuzz target of its own.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "addr.h"
#include "err.h"
#include "sshcmd.h"
#include "banned.h"

/* Split s into words in out (at least strlen(s) + SSHCMD_MAX_WORDS
 * bytes).  Returns the number of words, or -1. */
static int split_words(const char *s, char *out, char *words[SSHCMD_MAX_WORDS])
{
	int n = 0;

	while (*s) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		if (n == SSHCMD_MAX_WORDS)
			return -1;
		words[n++] = out;
		while (*s && *s != ' ' && *s != '\t') {
			if (*s == '\'' || *s == '"') {
				const char *e = strchr(s + 1, *s);
				if (!e)
					return -1;
				memcpy(out, s + 1, (size_t)(e - s - 1));
				out += e - s - 1;
				s = e + 1;
			} else if (*s == '\\' && s[1]) {
				*out++ = s[1];
				s += 2;
			} else {
				*out++ = *s++;
			}
		}
		*out++ = '\0';
	}
	return n;
}

static enum sshcmd_kind kind_of(const char *prog)
{
	if (!strcmp(prog, "2fa"))
		return SSHCMD_2FA;
	if (!strcmp(prog, "git-receive-pack"))
		return SSHCMD_PUSH;
	if (!strcmp(prog, "git-upload-pack"))
		return SSHCMD_FETCH;
	if (!strcmp(prog, "help"))
		return SSHCMD_HELP;
	return SSHCMD_UNKNOWN;
}

int sshcmd_parse(struct sshcmd *out, const char *line)
{
	memset(out, 0, sizeof(*out));
	out->kind = SSHCMD_EMPTY;
	out->args = out->words;
	if (!line)
		return 0;
	if (strnlen(line, SSHCMD_MAX_LEN + 1) > SSHCMD_MAX_LEN)
		return GD_ETOOBIG;
	int n = split_words(line, out->buf, out->words);
	if (n < 0) {
		memset(out->words, 0, sizeof(out->words));
		return GD_EINVAL;
	}
	out->n = n;
	if (n == 0)
		return 0;
	out->kind = kind_of(out->words[0]);
	out->args = out->words + 1;
	out->nargs = n - 1;
	if (out->kind == SSHCMD_2FA && n >= 2) {
		out->sub = out->words[1];
		out->args = out->words + 2;
		out->nargs = n - 2;
	}
	if ((out->kind == SSHCMD_PUSH || out->kind == SSHCMD_FETCH) && n == 2)
		out->repo = out->words[1];
	return 0;
}

/* A decimal port 1..65535 without a sign or leading zero. */
static bool port_ok(const char *s)
{
	unsigned long v = 0;
	size_t n = strlen(s);

	if (n == 0 || n > 5 || s[0] == '0')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v <= 65535;
}

static bool xdg_ok(const char *s)
{
	size_t n = strnlen(s, SSHCMD_XDG_MAX + 1);

	if (n > SSHCMD_XDG_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_' ||
		      s[i] == '.' || s[i] == '-'))
			return false;
	return true;
}

int sshcmd_session(char *out, size_t outlen, const char *conn, const char *xdg)
{
	char f[4][ADDR_STRLEN], extra;
	struct gd_net a;
	int k;

	if (outlen)
		out[0] = '\0';
	if (!conn || strnlen(conn, 256) >= 256 ||
	    sscanf(conn, "%63s %63s %63s %63s %c", f[0], f[1], f[2], f[3],
	           &extra) != 4)
		return GD_EINVAL;
	if (addr_parse(&a, f[0], false) < 0 || !port_ok(f[1]) ||
	    addr_parse(&a, f[2], false) < 0 || !port_ok(f[3]))
		return GD_EINVAL;
	if (xdg && *xdg && !xdg_ok(xdg))
		return GD_EINVAL;
	k = snprintf(out, outlen, "%s %s %s %s%s%s", f[0], f[1], f[2], f[3],
	             xdg && *xdg ? "/" : "", xdg && *xdg ? xdg : "");
	if (k < 0 || (size_t)k >= outlen || k > SSHCMD_SESSION_MAX) {
		if (outlen)
			out[0] = '\0';
		return GD_EINVAL;
	}
	return 0;
}
