/*
 * grant-log: checks a grantd site's push log from outside, over its HTTP
 * log alone (http://HOST:PORT/log/SITE/: the C2SP checkpoint, tiles and
 * entry bundles; SPEC 9, issue 21 point 3, docs/push-log.md "Checking the
 * log from outside: grant-log").
 *
 * Every command first checks the site's checkpoint: its origin's
 * signature and a quorum of witness cosignatures by the keys given, and
 * its consistency with the last checkpoint this program kept for that
 * origin (in the state directory), which it then replaces.  Then:
 * `verify` recomputes the tree and every tile from all the entries,
 * `prove` proves one entry's inclusion and prints it, `tip` finds the
 * newest entry that moved a ref.  What is concluded is in glog.c; here
 * are only the fetching (libcurl), the files and the output.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "err.h"
#include "glog.h"
#include "glog_cmds.h"
#include "glog_http.h"
#include "names.h"
#include "version.h"
#include "xalloc.h"
#include "banned.h"

static const char prog[] = GLOG_CMDS_PROG;

/* Exit codes: GD_EXIT_OK, _REFUSED (the log failed a check, or tip found
 * another value), _USAGE, and _UNREACHABLE: the log could not be read. */

/* The text as it prints. */
/* clang-format off */
static void usage(FILE *fp)
{
	fprintf(fp,
"usage: grant-log [--key VKEY]... [--keys FILE] [--witness VKEY]...\n"
"                 [--quorum N] [--state DIR] URL SITE COMMAND [ARGS]\n"
"\n"
"Check a grantd site's push log from its HTTP log alone (URL/log/SITE/).\n"
"Every command first checks the site's checkpoint: signed by the origin\n"
"key named as its origin line (HOST/grantd/SITE), cosigned by at least\n"
"N witness keys, and consistent with the checkpoint kept for that origin\n"
"from the last run, which it then replaces.\n"
"\n"
"Commands\n"
"  checkpoint        print the checked checkpoint: origin, size, root, the\n"
"                    witnesses that cosigned and the size kept before\n"
"  verify            recompute the tree and every tile from all the entries\n"
"                    and compare them with the checkpoint and the server's\n"
"  prove INDEX       prove that entry INDEX is in the checkpoint's tree;\n"
"                    print the entry\n"
"  tip REPO REF OID  exit 0 when the newest entry moving REF in REPO sets\n"
"                    it to OID, else 1 naming what the log holds\n"
"\n"
"  --key VKEY        an origin key (NAME+HEXID+BASE64, as `grantctl log key`\n"
"                    prints it); the one named as the checkpoint's origin\n"
"                    must have signed it\n"
"  --keys FILE       keys from FILE: lines \"key VKEY\" or \"witness VKEY\"\n"
"  --witness VKEY    a witness key (cosignature/v1; a site's `grantctl log\n"
"                    key` line stands for its cosigning key)\n"
"  --quorum N        cosignatures needed (default: every witness given)\n"
"  --state DIR       where the last checkpoint of each origin is kept\n"
"                    (default $XDG_STATE_HOME/grant-log, then\n"
"                    ~/.local/state/grant-log)\n"
"  -h, --help        this text\n"
"  --version         print the version and exit\n"
"\n"
"Exit status: 0 the log checks (tip: OID is the logged value), 1 the log\n"
"fails a check, named (a fork: both checkpoints kept; tip: another value\n"
"or none), 2 usage or input error, 3 the log could not be read.\n");
}
/* clang-format on */

/* ---- files -----------------------------------------------------------------
 */

static int read_file(const char *path, size_t max, struct buf *out)
{
	FILE *f = fopen(path, "rb");
	char chunk[4096];
	size_t n;
	int rc = 0;

	buf_reset(out);
	if (!f)
		return errno == ENOENT ? GD_ENOTFOUND : GD_EIO;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && rc == 0) {
		buf_add(out, chunk, n);
		if (out->len > max)
			rc = GD_ETOOBIG;
	}
	if (ferror(f))
		rc = GD_EIO;
	fclose(f);
	return rc;
}

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* dir/name holds data[0..len), or its old content: written to a
 * temporary file, fsynced, renamed over it, the directory fsynced. */
static int
write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
	struct buf tmp = BUF_INIT, dst = BUF_INIT;
	int fd, rc = -1;

	buf_printf(&tmp, "%s/.%s.tmp.%ld", dir, name, (long)getpid());
	buf_printf(&dst, "%s/%s", dir, name);
	fd = open(tmp.p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto done;
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			goto unlink;
		}
		off += (size_t)w;
	}
	if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp.p, dst.p) != 0)
		goto unlink;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		rc = fsync(fd);
		close(fd);
	}
	goto done;
unlink:
	unlink(tmp.p);
done:
	buf_free(&tmp);
	buf_free(&dst);
	return rc;
}

/* ---- options ---------------------------------------------------------------
 */

static int add_keys_file(struct glog_run *r, const char *path)
{
	struct buf b = BUF_INIT;
	size_t line = 0;
	int rc = read_file(path, 1 << 20, &b);

	if (rc != 0) {
		fprintf(stderr, "%s: cannot read %s: %s\n", prog, path,
		        rc == GD_ETOOBIG ? "too large" : strerror(errno));
		buf_free(&b);
		return GD_EXIT_USAGE;
	}
	rc = glog_keys_file(&r->keys, b.p ? b.p : "", b.len, &line);
	buf_free(&b);
	if (rc != 0) {
		fprintf(stderr, "%s: %s line %zu: %s\n", prog, path, line,
		        rc == GD_ETOOBIG
		                ? "too many keys"
		                : "not \"key VKEY\" or \"witness VKEY\"");
		return GD_EXIT_USAGE;
	}
	return 0;
}

/* One option at argv[*i] (with its value); -1 when it was one. */
static int option(struct glog_run *r, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
	char *end;
	int rc;

	if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
		usage(stdout);
		return GD_EXIT_OK;
	}
	if (!strcmp(a, "--version")) {
		printf("%s %s\n", prog, GRANTD_VERSION);
		return GD_EXIT_OK;
	}
	if (!v)
		return glog_cmds_usage("unknown option or missing value", a);
	++*i;
	if (!strcmp(a, "--key") || !strcmp(a, "--witness")) {
		rc = glog_keys_add(&r->keys, v, strlen(v), a[2] == 'w');
		if (rc != 0)
			return glog_cmds_usage(
			        rc == GD_ETOOBIG ? "too many keys"
			        : a[2] == 'w'    ? "not a verifier key"
			                      : "not an Ed25519 verifier key",
			        v);
	} else if (!strcmp(a, "--keys")) {
		if ((rc = add_keys_file(r, v)) != 0)
			return rc;
	} else if (!strcmp(a, "--quorum")) {
		errno = 0;
		r->quorum = strtol(v, &end, 10);
		if (errno || end == v || *end || r->quorum < 0 ||
		    r->quorum > GLOG_MAX_KEYS)
			return glog_cmds_usage("--quorum: not a number 0..64",
			                       v);
	} else if (!strcmp(a, "--state")) {
		r->state = v;
	} else {
		return glog_cmds_usage("unknown option", a);
	}
	return -1;
}

static int parse_args(struct glog_run *r, int argc, char **argv)
{
	size_t nwit = 0;
	int i = 1, rc;

	r->quorum = -1;
	for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++)
		if ((rc = option(r, argc, argv, &i)) >= 0)
			return rc;
	if (argc - i < 3)
		return glog_cmds_usage("need URL SITE COMMAND", NULL);
	r->url = argv[i], r->site = argv[i + 1], r->cmd = argv[i + 2];
	r->args = argv + i + 3, r->nargs = argc - i - 3;
	if (strncmp(r->url, "http://", 7) && strncmp(r->url, "https://", 8))
		return glog_cmds_usage("not an http:// or https:// URL",
		                       r->url);
	if (!name_site_ok(r->site))
		return glog_cmds_usage("not a site name", r->site);
	for (size_t k = 0; k < r->keys.n; k++)
		nwit += r->keys.witness[k];
	if (r->quorum < 0)
		r->quorum = (long)nwit;
	if ((size_t)r->quorum > nwit)
		return glog_cmds_usage(
		        "--quorum is more than the witness keys given", NULL);
	if (r->keys.n == nwit)
		return glog_cmds_usage(
		        "no origin key (--key or a \"key\" line of --keys)",
		        NULL);
	return -1;
}

static int state_dir(struct glog_run *r)
{
	const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	struct buf lock = BUF_INIT;
	int fd;

	if (r->state)
		buf_puts(&r->dir, r->state);
	else if (xdg && xdg[0] == '/')
		buf_printf(&r->dir, "%s/grant-log", xdg);
	else if (home && home[0] == '/')
		buf_printf(&r->dir, "%s/.local/state/grant-log", home);
	else
		return glog_cmds_usage("no HOME: give --state DIR", NULL);
	if (mkdirs(r->dir.p) != 0) {
		fprintf(stderr, "%s: cannot make %s: %s\n", prog, r->dir.p,
		        strerror(errno));
		return GD_EXIT_USAGE;
	}
	/* one run at a time reads and replaces the kept checkpoints: held
	 * until exit (each request times out, so a wait is bounded) */
	buf_printf(&lock, "%s/.lock", r->dir.p);
	fd = open(lock.p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) != 0) {
		fprintf(stderr, "%s: cannot lock %s: %s\n", prog, lock.p,
		        strerror(errno));
		buf_free(&lock);
		return GD_EXIT_USAGE;
	}
	buf_free(&lock);
	return -1;
}

static int fork_found(struct glog_run *r,
                      const char *name,
                      const struct note_checkpoint *old)
{
	const struct note_checkpoint *c = &r->ck.c;
	struct buf fname = BUF_INIT;
	char ro[GLOG_CMDS_B64_LEN], rn[GLOG_CMDS_B64_LEN];
	int rc = GD_EXIT_REFUSED;

	glog_cmds_b64(ro, &old->root), glog_cmds_b64(rn, &c->root);
	buf_printf(&fname, "%s.fork-%lld-%02x%02x%02x%02x", name,
	           (long long)c->size, c->root.b[0], c->root.b[1], c->root.b[2],
	           c->root.b[3]);
	if (write_atomic(r->dir.p, fname.p, r->msg.p, r->msg.len) != 0) {
		fprintf(stderr, "%s: cannot write %s/%s: %s\n", prog, r->dir.p,
		        fname.p, strerror(errno));
		rc = GD_EXIT_USAGE;
	}
	fprintf(stderr,
	        "%s: fork: checkpoint of '%s' size %lld root %s is not "
	        "consistent with the kept size %lld root %s; both kept: "
	        "%s/%s and %s/%s\n",
	        prog, c->origin, (long long)c->size, rn, (long long)old->size,
	        ro, r->dir.p, name, r->dir.p, fname.p);
	buf_free(&fname);
	return rc;
}

/* Relates the served checkpoint to the kept one and keeps the newer;
 * *prev: the kept size, -1 for none. */
static int keep(struct glog_run *r, int64_t *prev)
{
	const struct note_checkpoint *c = &r->ck.c;
	struct note_checkpoint old;
	struct buf name = BUF_INIT, kept = BUF_INIT, path = BUF_INIT;
	enum glog_rel rel = GLOG_NEWER;
	int rc;

	*prev = -1;
	glog_state_name(&name, c->origin);
	buf_printf(&path, "%s/%s", r->dir.p, name.p);
	rc = read_file(path.p, NOTE_MAX_LEN, &kept);
	if (rc != 0 && rc != GD_ENOTFOUND) {
		fprintf(stderr, "%s: cannot read %s\n", prog, path.p);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	if (rc == 0) {
		if (glog_ckpt_parse_kept(&old, kept.p, kept.len) != 0) {
			fprintf(stderr, "%s: %s: not a checkpoint\n", prog,
			        path.p);
			rc = GD_EXIT_USAGE;
			goto done;
		}
		*prev = old.size;
		rc = glog_relate(&rel, old.size, &old.root, c->size, &c->root,
		                 glog_http_tile, &r->h);
		if (rc != 0) {
			rc = glog_cmds_fail(r, rc, "consistency proof");
			goto done;
		}
	}
	rc = -1;
	if (rel == GLOG_FORK)
		rc = fork_found(r, name.p, &old);
	else if (rel == GLOG_NEWER &&
	         write_atomic(r->dir.p, name.p, r->msg.p, r->msg.len) != 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, path.p,
		        strerror(errno));
		rc = GD_EXIT_USAGE;
	}
done:
	buf_free(&name);
	buf_free(&kept);
	buf_free(&path);
	return rc;
}

/* Fetches and checks the checkpoint; -1 when it passed, else the exit
 * code.  *prev: see keep(). */
static int check_checkpoint(struct glog_run *r, int64_t *prev)
{
	struct buf why = BUF_INIT;
	int rc = glog_http_get(&r->h, "checkpoint", NOTE_MAX_LEN, &r->msg);

	if (rc != 0)
		return glog_cmds_fail(r, rc, "checkpoint");
	rc = glog_ckpt_open(&r->ck, r->msg.p, r->msg.len, &r->keys, r->site,
	                    (size_t)r->quorum, &why);
	if (rc != 0) {
		fprintf(stderr, "%s: %scheckpoint: %s\n", prog, r->h.base,
		        why.p);
		buf_free(&why);
		return GD_EXIT_REFUSED;
	}
	return keep(r, prev);
}

static int cmd_checkpoint(struct glog_run *r, int64_t prev)
{
	char root[GLOG_CMDS_B64_LEN];

	glog_cmds_b64(root, &r->ck.c.root);
	printf("origin %s\nsize %lld\nroot %s\nwitnesses", r->ck.c.origin,
	       (long long)r->ck.c.size, root);
	for (size_t i = 0; i < r->ck.nwitnesses; i++)
		printf(" %s", r->ck.witnesses[i]);
	printf("%s\n", r->ck.nwitnesses ? "" : " -");
	if (prev < 0)
		printf("previous -\n");
	else
		printf("previous %lld\n", (long long)prev);
	return GD_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct glog_run *r = xcalloc(1, sizeof(*r));
	int64_t prev;
	int rc;

	if ((rc = parse_args(r, argc, argv)) >= 0)
		goto done;
	if (sodium_init() < 0) {
		fprintf(stderr, "%s: libsodium failed to start\n", prog);
		rc = GD_EXIT_USAGE;
		goto done;
	}
	if (strcmp(r->cmd, "checkpoint") && strcmp(r->cmd, "verify") &&
	    strcmp(r->cmd, "prove") && strcmp(r->cmd, "tip")) {
		rc = glog_cmds_usage("unknown command", r->cmd);
		goto done;
	}
	if ((rc = glog_cmds_args(r)) >= 0 || (rc = state_dir(r)) >= 0)
		goto done;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (glog_http_init(&r->h, r->url, r->site) != 0) {
		fprintf(stderr, "%s: libcurl failed to start\n", prog);
		rc = GD_EXIT_USAGE;
	} else if ((rc = check_checkpoint(r, &prev)) < 0) {
		rc = !strcmp(r->cmd, "checkpoint") ? cmd_checkpoint(r, prev)
		     : !strcmp(r->cmd, "verify")   ? glog_cmds_verify(r)
		     : !strcmp(r->cmd, "prove")    ? glog_cmds_prove(r)
		                                   : glog_cmds_tip(r);
	}
	glog_http_free(&r->h);
	curl_global_cleanup();
done:
	buf_free(&r->dir);
	buf_free(&r->msg);
	free(r);
	return rc;
}
