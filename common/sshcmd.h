/*
 * sshcmd.h: what grant-shell reads from sshd.  SSH_ORIGINAL_COMMAND, which
 * the SSH client chooses (untrusted), split into a command: kernel.org's
 * `2fa SUB ARGS...`, git's receive-pack/upload-pack with a repository, or
 * `help`; and the session key of a connection, from SSH_CONNECTION and
 * XDG_SESSION_ID (for `2fa val-session`).
 *
 * Pure functions of their input, no allocation, any thread.  The fuzz
 * target tests/fuzz/fuzz_ssh_command.c drives sshcmd_parse.
 */
#ifndef GD_SSHCMD_H
#define GD_SSHCMD_H

#include <stddef.h>

#define SSHCMD_MAX_LEN 4096   /* longer commands are refused */
#define SSHCMD_MAX_WORDS 8
/* A session key: "CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT[/XDG]", at
 * most 128 characters (what the node accepts): two IPv6 addresses and
 * ports take 103, which leaves 24 for XDG_SESSION_ID. */
#define SSHCMD_SESSION_MAX 128
#define SSHCMD_XDG_MAX 24

enum sshcmd_kind {
	SSHCMD_EMPTY,   /* no command: an interactive login */
	SSHCMD_HELP,    /* help */
	SSHCMD_2FA,     /* 2fa [SUB [ARGS...]] */
	SSHCMD_PUSH,    /* git-receive-pack ARGS... */
	SSHCMD_FETCH,   /* git-upload-pack ARGS... */
	SSHCMD_UNKNOWN, /* anything else; words[0] names it */
};

struct sshcmd {
	enum sshcmd_kind kind;
	int n;                          /* words, 0 for SSHCMD_EMPTY */
	char *words[SSHCMD_MAX_WORDS];  /* into buf; words[0] the program */
	const char *sub;                /* 2fa: words[1], NULL if none */
	char **args;                    /* 2fa: after sub; others: after
	                                 * words[0] */
	int nargs;
	const char *repo;               /* push/fetch: the one argument as
	                                 * given (unchecked: name_repo_norm),
	                                 * NULL unless exactly one */
	char buf[SSHCMD_MAX_LEN + SSHCMD_MAX_WORDS + 1];
};

/*
 * Split line the way git quotes a command ('...' with '\'' inside), also
 * taking double quotes and backslash escapes, and classify it.  line NULL
 * or only blanks gives SSHCMD_EMPTY.  Pointers in *out point into out.
 * Returns 0, GD_ETOOBIG (longer than SSHCMD_MAX_LEN) or GD_EINVAL
 * (unbalanced quotes, more than SSHCMD_MAX_WORDS words).
 */
int sshcmd_parse(struct sshcmd *out, const char *line);

/*
 * The session key of the connection sshd describes in conn
 * (SSH_CONNECTION: "CLIENT_IP CLIENT_PORT SERVER_IP SERVER_PORT"), with
 * "/XDG" added when xdg (XDG_SESSION_ID) is set and not empty: a grant
 * bound to it covers only this connection (ControlMaster multiplexes
 * several sessions over it) in this login session.  out needs
 * SSHCMD_SESSION_MAX + 1 bytes.  Returns 0, or GD_EINVAL (out empty) when
 * conn is not four valid fields or xdg is longer than SSHCMD_XDG_MAX or
 * not [A-Za-z0-9_.-].
 */
int sshcmd_session(char *out, size_t outlen, const char *conn,
		   const char *xdg);

#endif
