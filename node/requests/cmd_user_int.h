/*
 * cmd_user_int.h: what the user domain's handler files share.
 *
 * cmd_user.c holds the rows of every user command (users, enrollments,
 * keys) and the handlers of users and enrollments; cmd_keys.c a user's
 * keys one by one (user.keys, user.key-del); cmd_import.c the one request
 * a migration makes per user (user.import: grantctl import gitolite-2fa
 * and gitolite-keydir).  Only these three include this header.
 */
#ifndef GD_CMD_USER_INT_H
#define GD_CMD_USER_INT_H

#include "buf.h"
#include "cmd.h"

/* A key another live user than name holds: 1 with a bad() reply naming
 * the holder, 0 when none does, or a negative gd_err. */
int cmd_user_key_taken(struct cmd_ctx *x,
                       struct req *r,
                       const char *name,
                       const char *key);

/* cmd_keys.c: args NAME: the user's keys, one line each (fingerprint,
 * type, comment), --json an array. */
int cmd_user_keys(struct cmd_ctx *x, struct req *r);
/* cmd_keys.c: args NAME FP: remove the user's key with fingerprint FP
 * (SHA256:...) or given whole. */
int cmd_user_key_del(struct cmd_ctx *x, struct req *r);

/* cmd_import.c: args NAME [OPTIONS] (cmd_import.c lists them): make user
 * NAME, its keys, its enrollment with the tokens it already used dead,
 * and its live grants, in one batch; with --dry-run only say what it
 * would do.  Changes nothing what is already there (run twice, the second
 * changes nothing). */
int cmd_user_import(struct cmd_ctx *x, struct req *r);

#endif
