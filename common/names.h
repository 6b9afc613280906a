/*
 * names.h: user and repository names (SPEC 3.6), the one place they are
 * checked.
 */
#ifndef GD_NAMES_H
#define GD_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#define NAME_USER_MAX 64
#define NAME_REPO_MAX 1024
#define NAME_SITE_MAX 64

/* [a-z_][a-z0-9_.-]{0,63} */
bool name_user_ok(const char *s);

/* [a-z0-9-]{1,64} */
bool name_site_ok(const char *s);

/*
 * Normalise a repository name as git clients send it: drop one leading "/"
 * or "~/", one trailing ".git", and check each "/"-separated part is
 * [A-Za-z0-9_.+-]+ and does not start with ".", and that no part but the
 * last ends in ".git" (a repository inside another's git dir).  out gets
 * the bare name (without .git).  Returns 0 or GD_EINVAL.
 */
int name_repo_norm(char *out, size_t outlen, const char *in);

/* An authorized_keys public key: "TYPE BASE64 [comment]", one line, no
 * options (grant-keys adds its own) and nothing sshd would parse. */
bool name_pubkey_ok(const char *k);

#endif
