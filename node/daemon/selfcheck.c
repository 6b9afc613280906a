/*
 * selfcheck.c: `grantd -t` beyond the syntax.  Each check asks the kernel
 * as the account the node will run as (access(2) after becoming it), so
 * that a key file root may read but git may not, or a directory git
 * cannot write, is found here and not by a restart loop.
 */
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "err.h"
#include "selfcheck.h"
#include "banned.h"

struct selfcheck {
	const struct config *c;
	FILE *out;
	uid_t uid;
	char user[64];
	int errors;
	bool for_account; /* root, checking as the files' owner */
};

/* The account the node will run as, and which file says so. */
struct account {
	uid_t uid;
	gid_t gid;
	char name[64];
	const char *why; /* the path whose owner it is; NULL: the caller */
};

static void say(struct selfcheck *s, bool error, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void say(struct selfcheck *s, bool error, const char *fmt, ...)
{
	va_list ap;

	fprintf(s->out, "grantd: %s: %s", s->c->path, error ? "" : "warning: ");
	va_start(ap, fmt);
	vfprintf(s->out, fmt, ap);
	va_end(ap);
	fputc('\n', s->out);
	s->errors += error;
}

static void user_name(char *out, size_t n, uid_t uid)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(out, n, "%s", pw->pw_name);
	else
		snprintf(out, n, "%u", (unsigned)uid);
}

/* Who owns the node's files: data_dir's owner, else repo_dir's, else the
 * key file's, when that is not root.  Returns 1 with *a filled, 0 if none
 * of them exists or all are root's. */
static int files_account(const struct config *c, struct account *a)
{
	const char *paths[] = {c->data_dir, c->repo_dir, c->secret_key};
	struct stat st;

	for (size_t i = 0; i < GD_ARRAY_SIZE(paths); i++) {
		if (!paths[i] || stat(paths[i], &st) < 0 || st.st_uid == 0)
			continue;
		struct passwd *pw = getpwuid(st.st_uid);
		a->uid = st.st_uid;
		a->gid = pw ? pw->pw_gid : st.st_gid;
		user_name(a->name, sizeof(a->name), st.st_uid);
		a->why = paths[i];
		return 1;
	}
	return 0;
}

/* The files of dir not owned by the account: the first one is named,
 * with the chown that mends them all (a start as root leaves LOCK,
 * CURRENT and *.log root's; libgit2 refuses a repository of another
 * user). */
static void check_owners(struct selfcheck *s, const char *key, const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	char path[4096], owner[64];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0 || st.st_uid == s->uid)
			continue;
		user_name(owner, sizeof(owner), st.st_uid);
		say(s, true,
		    "%s: %s belongs to %s, not to %s, the account the "
		    "node runs as (started once as %s?); run: chown -R %s: %s",
		    key, path, owner, s->user, owner, s->user, dir);
		break;
	}
	closedir(d);
}

/* dir exists and the account may create files in it, or it does not
 * exist and the start can make it (its parent is writable). */
static void
check_dir(struct selfcheck *s, const char *key, const char *dir, bool owners)
{
	struct stat st;
	char parent[4096];
	char *slash;

	if (dir[0] != '/') {
		say(s, true,
		    "%s '%s' is a relative path (give an absolute "
		    "one: under systemd the node starts in /)",
		    key, dir);
		return;
	}
	if (stat(dir, &st) < 0) {
		if (errno != ENOENT) {
			say(s, true, "%s %s: %s", key, dir, strerror(errno));
			return;
		}
		snprintf(parent, sizeof(parent), "%s", dir);
		slash = strrchr(parent, '/');
		if (slash == parent)
			slash[1] = '\0';
		else
			*slash = '\0';
		/* root checking for the account: systemd's RuntimeDirectory=
		 * and StateDirectory= may make it before the start */
		if (access(parent, W_OK | X_OK) < 0)
			say(s, !s->for_account,
			    "%s %s does not exist, and %s cannot make it (%s: "
			    "%s); run: install -d -o %s -m 0750 %s%s",
			    key, dir, s->user, parent, strerror(errno), s->user,
			    dir,
			    s->for_account ? " (under systemd, the unit's "
			                     "RuntimeDirectory= or "
			                     "StateDirectory= makes it)"
			                   : "");
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		say(s, true, "%s %s is not a directory", key, dir);
		return;
	}
	if (access(dir, W_OK | X_OK) < 0) {
		say(s, true,
		    "%s %s: %s may not write it (%s); run: chown %s: "
		    "%s",
		    key, dir, s->user, strerror(errno), s->user, dir);
		return;
	}
	if (owners)
		check_owners(s, key, dir);
}

static void check_socket(struct selfcheck *s, const char *key, const char *path)
{
	struct sockaddr_un sa;
	struct stat st;
	char dir[4096], what[64];

	if (strlen(path) >= sizeof(sa.sun_path)) {
		say(s, true,
		    "%s %s is longer than %zu characters, the limit "
		    "of a unix socket's path (use a shorter one)",
		    key, path, sizeof(sa.sun_path) - 1);
		return;
	}
	if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode)) {
		say(s, true,
		    "%s %s exists and is not a socket (the node "
		    "would replace it)",
		    key, path);
		return;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0'; /* absolute: config_load checked */
	if (!dir[0])
		return;
	snprintf(what, sizeof(what), "the directory of %s", key);
	check_dir(s, what, dir, false);
}

static void check_key(struct selfcheck *s)
{
	const struct config *c = s->c;
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	struct buf err = BUF_INIT;
	struct stat st;

	if (config_read_keyfile(c->secret_key, pub, sec, &err) < 0)
		say(s, true, "secret_key (line %d): %s%s", c->secret_key_line,
		    buf_str(&err),
		    access(c->secret_key, R_OK) < 0 && errno == EACCES
		            ? " (the node reads it as the account it runs as)"
		            : "");
	else if (stat(c->secret_key, &st) == 0 && st.st_uid != s->uid)
		say(s, false,
		    "secret_key %s belongs to uid %u, not to %s "
		    "(run: chown %s: %s)",
		    c->secret_key, (unsigned)st.st_uid, s->user, s->user,
		    c->secret_key);
	explicit_bzero(sec, sizeof(sec));
	buf_free(&err);
}

static void check_peers(struct selfcheck *s)
{
	const struct config *c = s->c;
	uint8_t raw[32];

	if (c->publish && c->sync && !strcmp(c->publish, c->sync))
		say(s, true,
		    "publish and sync are the same endpoint %s (give "
		    "each its own port)",
		    c->publish);
	for (int i = 0; i < c->npeers; i++) {
		const struct config_peer *p = &c->peers[i];
		if (!zmq_z85_decode(raw, p->public_key))
			say(s, true,
			    "line %d: [peer %s] public_key is not a "
			    "Z85 key (want the 40 characters grantctl keygen "
			    "prints)",
			    p->key_line, p->site);
		if ((c->publish && !strcmp(p->publish, c->publish)) ||
		    (c->sync && !strcmp(p->sync, c->sync)))
			say(s, true,
			    "line %d: [peer %s] has this node's own "
			    "endpoint (publish %s, sync %s)",
			    p->line, p->site, p->publish, p->sync);
	}
}

/* The sockets are given group git if it exists (readers.c); an account
 * not in it cannot, and logs so at every start. */
static void check_group(struct selfcheck *s)
{
	struct group *g = getgrnam("git");
	struct passwd *pw = getpwuid(s->uid);

	if (!g || s->uid == 0 || !pw || pw->pw_gid == g->gr_gid)
		return;
	for (char **m = g->gr_mem; *m; m++)
		if (!strcmp(*m, pw->pw_name))
			return;
	say(s, false,
	    "a group git exists and %s is not in it: the sockets "
	    "cannot be given group git (grant-shell and grant-keys reach "
	    "them only as %s or its group)",
	    s->user, s->user);
}

static int checks(struct selfcheck *s)
{
	const struct config *c = s->c;

	check_dir(s, "data_dir", c->data_dir, true);
	check_dir(s, "repo_dir", c->repo_dir, !c->gitolite_home);
	check_socket(s, "user_socket", c->user_socket);
	check_socket(s, "admin_socket", c->admin_socket);
	check_socket(s, "keys_socket", c->keys_socket);
	if (!strcmp(c->user_socket, c->admin_socket))
		say(s, true, "user_socket and admin_socket are one path %s",
		    c->user_socket);
	if (c->secret_key)
		check_key(s);
	check_peers(s);
	check_group(s);
	return s->errors ? GD_EINVAL : 0;
}

/* As root for another account: the checks in a child that has become
 * it, whose exit status says how they went. */
static int checks_as(struct selfcheck *s, const struct account *a)
{
	pid_t pid;
	int st;

	fprintf(s->out, "grantd: %s: checking as %s, the owner of %s\n",
	        s->c->path, a->name, a->why);
	fflush(s->out);
	if ((pid = fork()) < 0) {
		say(s, true, "cannot fork to check as %s: %s", a->name,
		    strerror(errno));
		return GD_EIO;
	}
	if (pid == 0) {
		if (initgroups(a->name, a->gid) < 0 || setgid(a->gid) < 0 ||
		    setuid(a->uid) < 0) {
			say(s, true, "cannot become %s to check: %s", a->name,
			    strerror(errno));
			fflush(s->out);
			_exit(2);
		}
		s->uid = a->uid;
		s->for_account = true;
		snprintf(s->user, sizeof(s->user), "%s", a->name);
		st = checks(s);
		fflush(s->out);
		_exit(st < 0 ? 2 : 0);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return GD_EIO;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : GD_EINVAL;
}

int selfcheck_run(const struct config *c, FILE *report)
{
	struct selfcheck s = {.c = c, .out = report, .uid = geteuid()};
	struct account a;

	user_name(s.user, sizeof(s.user), s.uid);
	if (s.uid == 0 && files_account(c, &a))
		return checks_as(&s, &a);
	return checks(&s);
}

int selfcheck_root(const struct config *c, FILE *report)
{
	struct account a;

	if (geteuid() != 0 || !files_account(c, &a))
		return 0;
	fprintf(report,
	        "grantd: %s: refusing to run as root: %s belongs to "
	        "%s, and a start as root would leave files there that %s "
	        "cannot open at its next start; run it as %s (systemctl start "
	        "grantd, or runuser -u %s -- grantd --config %s)\n",
	        c->path, a.why, a.name, a.name, a.name, a.name, c->path);
	return GD_EINVAL;
}
