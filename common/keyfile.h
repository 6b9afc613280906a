/*
 * keyfile.h: SSH public key files, as an operator hands them over: the
 * keys of a .pub file (every one of them, so that a file with two keys
 * never loses one: grantctl user add --key, grantctl import
 * gitolite-keydir) and the user a gitolite keydir file belongs to.
 * Any thread; no global state.
 */
#ifndef GD_KEYFILE_H
#define GD_KEYFILE_H

#include <stddef.h>

/* The keys of a .pub file's text: every line that is not blank and does
 * not start with '#', blanks around it cut.  *out holds them joined by
 * '\n' (malloc'd, the caller's), *n counts them.  Returns 0; GD_EINVAL
 * with *why (static text) when a line is no key (name_pubkey_ok) or
 * there is none. */
int keyfile_parse(char **out, size_t *n, const char *text, const char **why);

/* The same of the file at path; GD_EIO (errno set, *why NULL) when it
 * cannot be read. */
int keyfile_load(char **out, size_t *n, const char *path, const char **why);

/* gitolite's user of keydir file path (ssh-authkeys): the file name
 * without its directories, without ".pub" and without an "@HOST" before
 * it when HOST has no '.' (alice@laptop.pub is alice's;
 * alice@example.com.pub is user alice@example.com's).  Returns 0, or
 * GD_EINVAL when path does not end in ".pub" or out is too small. */
int keyfile_gitolite_user(char *out, size_t len, const char *path);

#endif
