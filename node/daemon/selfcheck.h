/*
 * selfcheck.h: what a start would meet, checked before it: `grantd -t`
 * checks not only the file's syntax (config_load) but the directories, the
 * sockets' paths and the key files, as the account the node will run as,
 * so that a wrong path is a message at `-t` (systemd's ExecStartPre)
 * rather than a restart loop.
 *
 * The account: the caller's, unless the caller is root and the node's
 * files belong to another account (the owner of data_dir, else repo_dir,
 * else secret_key): then that account, whose checks run in a child
 * process that has become it.
 *
 * Called by main.c only: selfcheck_run for -t, selfcheck_root before a
 * start.  Both print their findings to report, one line each ("grantd:
 * CONFIG: ...", warnings with "warning:"), and return 0 or GD_EINVAL.
 */
#ifndef GD_SELFCHECK_H
#define GD_SELFCHECK_H

#include <stdio.h>

#include "config.h"

/* Every check; GD_EINVAL when a start would fail (or leave files the
 * service account cannot open). */
int selfcheck_run(const struct config *c, FILE *report);

/* Run as root with the node's files belonging to another account: a start
 * would leave root-owned files that account cannot open on its next
 * start.  GD_EINVAL with what to run instead; 0 otherwise (not root, or
 * the files are root's: a root-only trial such as deploy/local-cluster). */
int selfcheck_root(const struct config *c, FILE *report);

#endif
