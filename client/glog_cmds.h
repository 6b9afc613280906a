/*
 * glog_cmds.h: one run of grant-log (client/grant-log.c): its options,
 * the checkpoint it checked, the HTTP log it reads; and the commands that
 * follow the checkpoint's check (verify, prove, tip), in glog_cmds.c.
 *
 * grant-log.c parses the options, checks the checkpoint (signatures,
 * consistency with the state kept) and calls one command.  Each returns
 * an exit code (enum gd_exit; GD_EXIT_UNREACHABLE: the log could not be
 * read) after printing the one line that says why on stderr; -1 from
 * glog_cmds_args and glog_cmds_usage's callers means "go on".
 */
#ifndef GD_GLOG_CMDS_H
#define GD_GLOG_CMDS_H

#include <stdint.h>

#include "buf.h"
#include "glog.h"
#include "glog_http.h"
#include "names.h"

#define GLOG_CMDS_PROG    "grant-log"
#define GLOG_CMDS_B64_LEN 45 /* base64 of a hash and its NUL */

struct glog_run {
	struct glog_keys keys;
	long quorum; /* -1: every witness */
	const char *state; /* --state, or NULL */
	const char *url, *site, *cmd;
	char **args; /* the command's */
	int nargs;
	struct glog_http h;
	struct buf dir; /* the state directory */
	struct buf msg; /* the checkpoint as served */
	struct glog_ckpt ck; /* ... once checked */
	int64_t index; /* prove INDEX */
	char repo[NAME_REPO_MAX + 1]; /* tip REPO REF OID */
	const char *ref;
	char oid[PUSHLEAF_OID_HEX + 1];
};

/* Says "grant-log: WHAT 'ARG' (see grant-log --help)" (arg may be NULL)
 * and returns GD_EXIT_USAGE. */
int glog_cmds_usage(const char *what, const char *arg);
/* Says what failed while reading the log (what: the step) and returns
 * GD_EXIT_REFUSED for GD_ECRYPTO (what was read does not match the
 * checkpoint), else GD_EXIT_UNREACHABLE. */
int glog_cmds_fail(struct glog_run *r, int rc, const char *what);
/* Standard base64 of h. */
void glog_cmds_b64(char out[GLOG_CMDS_B64_LEN], const struct tlog_hash *h);

/* Checks the arguments of r->cmd (r->args) and fills r->index, repo, ref
 * and oid: -1, or GD_EXIT_USAGE (said). */
int glog_cmds_args(struct glog_run *r);
int glog_cmds_verify(struct glog_run *r);
int glog_cmds_prove(struct glog_run *r);
int glog_cmds_tip(struct glog_run *r);

#endif
