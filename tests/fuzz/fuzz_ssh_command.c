/*
 * fuzz_ssh_command.c: grant-shell's reading of what sshd hands it.
 *
 * SSH_ORIGINAL_COMMAND is chosen by the SSH client, so sshcmd_parse() must
 * be safe on any bytes, and what it accepts must keep sshcmd.h's promises:
 * at most SSHCMD_MAX_WORDS words, each inside the struct's own buffer and
 * no longer than the input, the kind named by the first word, a repository
 * only for git's two commands with exactly one argument.  The same bytes
 * are tried as SSH_CONNECTION (sshcmd_session): a key is formed only from
 * four valid fields and never exceeds SSHCMD_SESSION_MAX.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "names.h"
#include "sshcmd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_cmd(const struct sshcmd *c, size_t inlen)
{
	const char *lo = c->buf, *hi = c->buf + sizeof(c->buf);
	static const struct {
		const char *name;
		enum sshcmd_kind kind;
	} kinds[] = {{"2fa", SSHCMD_2FA},
	             {"git-receive-pack", SSHCMD_PUSH},
	             {"git-upload-pack", SSHCMD_FETCH},
	             {"help", SSHCMD_HELP}};
	enum sshcmd_kind want = SSHCMD_UNKNOWN;
	size_t total = 0;

	if (c->n < 0 || c->n > SSHCMD_MAX_WORDS)
		abort();
	if (c->n == 0) {
		if (c->kind != SSHCMD_EMPTY || c->nargs || c->sub || c->repo)
			abort();
		return;
	}
	for (int i = 0; i < c->n; i++) {
		const char *w = c->words[i];
		if (!w || w < lo || w >= hi ||
		    !memchr(w, '\0', (size_t)(hi - w)))
			abort();
		total += strlen(w);
	}
	if (total > inlen)
		abort();
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(c->words[0], kinds[i].name))
			want = kinds[i].kind;
	if (c->kind != want)
		abort();
	if (c->args < c->words || c->nargs < 0 ||
	    c->args + c->nargs != c->words + c->n)
		abort();
	if (c->kind == SSHCMD_2FA && (c->n >= 2) != (c->sub != NULL))
		abort();
	bool git = c->kind == SSHCMD_PUSH || c->kind == SSHCMD_FETCH;
	if ((git && c->n == 2) != (c->repo != NULL))
		abort();
	if (c->repo) {
		char name[NAME_REPO_MAX + 1];
		int rc = name_repo_norm(name, sizeof(name), c->repo);
		if (rc != 0 && rc != GD_EINVAL)
			abort();
		/* never a part that is or starts with "." (".." above all) */
		if (rc == 0 && (name[0] == '.' || strstr(name, "/.")))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sshcmd c;
	char session[SSHCMD_SESSION_MAX + 1];
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = '\0';
	int rc = sshcmd_parse(&c, s);
	if (rc == 0)
		check_cmd(&c, strlen(s));
	else if (rc != GD_EINVAL && rc != GD_ETOOBIG)
		abort();
	if (rc == GD_ETOOBIG && strlen(s) <= SSHCMD_MAX_LEN)
		abort();

	/* the same bytes as SSH_CONNECTION, the part after a '|' as
	 * XDG_SESSION_ID */
	char *bar = strchr(s, '|');
	if (bar)
		*bar = '\0';
	rc = sshcmd_session(session, sizeof(session), s, bar ? bar + 1 : NULL);
	if (rc == 0) {
		size_t n = strlen(session);
		if (n == 0 || n > SSHCMD_SESSION_MAX)
			abort();
	} else if (rc != GD_EINVAL || session[0]) {
		abort();
	}
	free(s);
	return 0;
}
