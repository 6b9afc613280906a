/*
 * authkeys.h: the authorized_keys lines grant-keys prints for sshd, shared
 * by grant-keys (one key, over the keys socket) and grant-keys-list (every
 * key, over the user socket).  libc only: grant-keys links no ZeroMQ.
 */
#ifndef GD_AUTHKEYS_H
#define GD_AUTHKEYS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

/* PATH of the program named name in this program's directory.  Returns 0
 * or GD_EIO. */
int authkeys_beside_me(char *out, size_t len, const char *name);

/* The paths every printed line names: grant-shell's and the config's. */
struct authkeys_paths {
	const char *shell;   /* --shell, or shell_buf */
	const char *config;  /* config_buf, or NULL without --config */
	char shell_buf[PATH_MAX], config_buf[PATH_MAX];
};

/* Fill *out from --shell (NULL: grant-shell beside this program) and
 * --config (NULL: none; else made absolute), and check that each can
 * stand between the double quotes of the command= option.  Says why not
 * on stderr, as prog.  Returns 0 or GD_EXIT_USAGE (an exit status). */
int authkeys_paths(struct authkeys_paths *out, const char *prog,
		   const char *shell, const char *config);

/* Whether key ("TYPE BASE64 [comment]") is an SSH security key (FIDO2:
 * sk-ssh-ed25519@openssh.com or sk-ecdsa-sha2-nistp256@openssh.com). */
bool authkeys_is_sk(const char *key);

/* For each "NAME\tKEY" line of text (changed in place), print
 *   command="SHELL[ --config CONFIG] NAME",no-pty,...,no-X11-forwarding KEY
 * to fp; lines without a tab or with a bad user name are skipped.
 * config may be NULL.  A security key's line tells grant-shell so, as
 * "--key-kind sk-touch NAME" (sshd checks the touch for every sk key), or
 * with sk = CONFIG_SK_PIN "--key-kind sk-pin NAME" and the option
 * verify-required (sshd also checks the PIN).  sshd picks the line by the
 * key the client proved it holds: the user cannot choose another kind.
 * The node decides what a kind counts for ([policy] security_keys). */
void authkeys_print(FILE *fp, char *text, const char *shell,
		    const char *config, enum config_sk sk, const char *key_fp);

/* key_fp (sshd's %f of the offered key; NULL: not known, e.g. every
 * key listed) is passed on as "--key-fp FP" before NAME when it is a
 * fingerprint (authkeys_fp_ok), so grant-shell can tell the push log
 * which key pushed. */
bool authkeys_fp_ok(const char *fp);

/* grant-keys --help (both programs print it). */
void authkeys_usage(FILE *fp);

#endif
