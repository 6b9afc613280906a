/*
 * import_2fa.c: grantctl import gitolite-2fa DIR, DIR being gitolite's
 * $GL_ADMIN_BASE/2fa as kernel.org's 2fa command (totp-cgi) left it.
 *
 * One user per secrets/USER.totp, with its state/USER.json and
 * validations/USER.js when they exist.  A user any of whose files cannot
 * be read or parsed is skipped whole, named: imported without its state,
 * a token it already used would work again.  A val-session grant is not
 * carried over (grantd binds one to the SSH connection, which the file
 * does not record): its user runs val-session again.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "err.h"
#include "ga2fa.h"
#include "import.h"
#include "names.h"
#include "xalloc.h"
#include "banned.h"

#define TOTP_PERIOD 30 /* totp-cgi's (pyotp's default) */
#define FILE_MAX    (1 << 20)

/* DIR/SUB/USER.EXT into out. */
static void path_of(struct buf *out,
                    const char *dir,
                    const char *sub,
                    const char *user,
                    const char *ext)
{
	buf_reset(out);
	buf_printf(out, "%s/%s/%s.%s", dir, sub, user, ext);
}

/* The text of path into *out; 0, GD_ENOTFOUND when it does not exist,
 * GD_EIO (errno set) when it cannot be read. */
static int read_text(struct buf *out, const char *path)
{
	char chunk[4096];
	size_t got;
	FILE *fp = fopen(path, "r");
	int rc = 0;

	buf_reset(out);
	if (!fp)
		return errno == ENOENT ? GD_ENOTFOUND : GD_EIO;
	while ((got = fread(chunk, 1, sizeof(chunk), fp)) > 0 &&
	       out->len < FILE_MAX)
		buf_add(out, chunk, got);
	if (ferror(fp) || out->len >= FILE_MAX) {
		errno = ferror(fp) ? errno : EFBIG;
		rc = GD_EIO;
	}
	fclose(fp);
	buf_str(out);
	return rc;
}

/* Read and parse the three files of user; 0, or 1 when skipped (named). */
static int read_user(struct import_ctx *ic,
                     const char *dir,
                     const char *user,
                     struct ga2fa_secret *sec,
                     struct ga2fa_state *st,
                     struct ga2fa_val **vals,
                     size_t *nvals)
{
	struct buf path = BUF_INIT, text = BUF_INIT;
	const char *why = NULL;
	int rc;

	path_of(&path, dir, "secrets", user, "totp");
	if ((rc = read_text(&text, path.p)) < 0)
		why = strerror(errno);
	else if (ga2fa_parse_secret(sec, text.p, &why) < 0)
		rc = GD_EINVAL;
	if (text.p)
		explicit_bzero(text.p, text.len);
	if (rc == 0) {
		path_of(&path, dir, "state", user, "json");
		rc = read_text(&text, path.p);
		if (rc == GD_ENOTFOUND)
			rc = ga2fa_parse_state(st, "{}", &why);
		else if (rc < 0)
			why = strerror(errno);
		else
			rc = ga2fa_parse_state(st, text.p, &why);
	}
	if (rc == 0) {
		path_of(&path, dir, "validations", user, "js");
		rc = read_text(&text, path.p);
		if (rc == GD_ENOTFOUND)
			rc = 0;
		else if (rc < 0)
			why = strerror(errno);
		else
			rc = ga2fa_parse_validations(vals, nvals, text.p, &why);
	}
	if (rc < 0) {
		import_skip(ic, path.p, why ? why : "cannot be read", user);
		ga2fa_secret_clear(sec);
	}
	buf_free(&path);
	buf_free(&text);
	return rc < 0 ? 1 : 0;
}

static void add(char **args, size_t *n, const char *a, const char *v)
{
	args[(*n)++] = xstrdup(a);
	if (v)
		args[(*n)++] = xstrdup(v);
}

static bool used_scratch(const struct ga2fa_state *st, const char *code)
{
	for (size_t i = 0; i < st->nused; i++)
		if (!strcmp(st->used[i], code))
			return true;
	return false;
}

/* The request of one user: args (room for every option) and their count. */
static size_t user_args(char **args,
                        const char *user,
                        const struct ga2fa_secret *sec,
                        const struct ga2fa_state *st,
                        const struct ga2fa_val *vals,
                        size_t nvals)
{
	char num[160];
	size_t n = 0;

	add(args, &n, user, NULL);
	add(args, &n, sec->hotp ? "--hotp" : "--totp", NULL);
	add(args, &n, "--secret", sec->secret);
	if (sec->hotp) {
		/* the state's counter is the newer (totp-cgi: it wins) */
		uint64_t c =
		        st->counter >= 0 && (uint64_t)st->counter > sec->counter
		                ? (uint64_t)st->counter
		                : sec->counter;
		snprintf(num, sizeof(num), "%llu", (unsigned long long)c);
		add(args, &n, "--counter", num);
	} else if (st->has_success) {
		snprintf(num, sizeof(num), "%lld",
		         (long long)(st->last_success / TOTP_PERIOD));
		add(args, &n, "--used-step", num);
	}
	for (size_t i = 0; i < sec->nscratch; i++)
		add(args, &n,
		    used_scratch(st, sec->scratch[i]) ? "--used-scratch"
		                                      : "--scratch",
		    sec->scratch[i]);
	for (size_t i = 0; i < nvals; i++) {
		if (vals[i].session) {
			printf("user %s: val-session grant %s not carried "
			       "over (grantd binds one to the SSH connection; "
			       "the user runs val-session again)\n",
			       user, vals[i].net);
			continue;
		}
		snprintf(num, sizeof(num), "%s,%lld,%lld", vals[i].net,
		         (long long)vals[i].added, (long long)vals[i].expires);
		add(args, &n, "--grant", num);
	}
	return n;
}

static int only_totp(const struct dirent *d)
{
	size_t n = strlen(d->d_name);
	return d->d_name[0] != '.' && n > 5 &&
	       !strcmp(d->d_name + n - 5, ".totp");
}

static int one_user(struct import_ctx *ic, const char *dir, const char *user)
{
	struct ga2fa_secret sec;
	struct ga2fa_state st;
	struct ga2fa_val *vals = NULL;
	size_t nvals = 0;
	char **args;
	int rc;

	if (!name_user_ok(user)) {
		struct buf p = BUF_INIT;
		path_of(&p, dir, "secrets", user, "totp");
		import_skip(ic, p.p,
		            "not a grantd user name "
		            "([a-z_][a-z0-9_.-]*)",
		            NULL);
		buf_free(&p);
		return 0;
	}
	if (read_user(ic, dir, user, &sec, &st, &vals, &nvals))
		return 0;
	/* NAME, kind, secret, counter or step: 7; a scratch code 2; a grant
	 * 2; --dry-run 1 */
	args = xcalloc(8 + 2 * (sec.nscratch + nvals), sizeof(*args));
	size_t n = user_args(args, user, &sec, &st, vals, nvals);
	ga2fa_secret_clear(&sec);
	free(vals);
	rc = import_user(ic, args, n);
	free(args);
	return rc;
}

int import_2fa(struct import_ctx *ic, const char *dir)
{
	struct buf sdir = BUF_INIT;
	struct dirent **ents = NULL;
	int n, rc = 0;

	buf_printf(&sdir, "%s/secrets", dir);
	n = scandir(sdir.p, &ents, only_totp, alphasort);
	if (n < 0) {
		fprintf(stderr,
		        "%s: cannot read %s: %s (want gitolite's "
		        "$GL_ADMIN_BASE/2fa)\n",
		        ic->prog, sdir.p, strerror(errno));
		buf_free(&sdir);
		return GD_EXIT_USAGE;
	}
	for (int i = 0; i < n; i++) {
		char user[256];
		size_t len = strlen(ents[i]->d_name) - 5;
		snprintf(user, sizeof(user), "%.*s", (int)len, ents[i]->d_name);
		if (rc == 0)
			rc = one_user(ic, dir, user);
		free(ents[i]);
	}
	free(ents);
	buf_free(&sdir);
	return rc;
}
