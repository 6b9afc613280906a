/*
 * authkeys.h: the authorized_keys lines grant-keys prints for sshd, shared
 * by grant-keys (one key, over the keys socket) and grant-keys-list (every
 * key, over the user socket).  libc only: grant-keys links no ZeroMQ.
 */
#ifndef GD_AUTHKEYS_H
#define GD_AUTHKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* PATH of the program named name in this program's directory.  Returns 0
 * or GD_EIO. */
int authkeys_beside_me(char *out, size_t len, const char *name);

/* A path is put between double quotes in the command= option: refuse
 * anything that could end the quotes or the line. */
bool authkeys_path_ok(const char *p);

/* For each "NAME\tKEY" line of text (changed in place), print
 *   command="SHELL[ --config CONFIG] NAME",no-pty,...,no-X11-forwarding KEY
 * to fp; lines without a tab or with a bad user name are skipped.
 * config may be NULL. */
void authkeys_print(FILE *fp, char *text, const char *shell,
		    const char *config);

/* grant-keys --help (both programs print it). */
void authkeys_usage(FILE *fp);

#endif
