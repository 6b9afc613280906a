/*
 * err.h: the error codes every grantd module returns.
 *
 * Functions return 0 on success or a negative enum gd_err.  A library's own
 * error (RocksDB's errptr, libgit2's git_error_last, errno) is translated
 * once, in the wrapper that called it, and logged there if anyone needs the
 * detail; callers pass the code up unchanged.
 */
#ifndef GD_ERR_H
#define GD_ERR_H

enum gd_err {
	GD_OK = 0,
	GD_EINVAL = -1,    /* malformed input */
	GD_ENOMEM = -2,
	GD_EIO = -3,       /* disk or store failure */
	GD_ENOTFOUND = -4,
	GD_EEXIST = -5,
	GD_EDENIED = -6,   /* a refusal: bad token, locked, not allowed */
	GD_EUNREACH = -7,  /* the node did not answer */
	GD_ETOOBIG = -8,
	GD_ECRYPTO = -9,
	GD_EPROTO = -10,   /* a message that does not decode or check */
	GD_EAGAIN = -11,   /* not now: handle it in a later step */
};

/* A short lower-case description; never NULL. */
const char *gd_strerror(int err);

#define GD_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Exit codes every command uses (SPEC 3), and the statuses of a Reply
 * (all but GD_EXIT_UNREACHABLE, which only a client can see).  Here, not
 * in wire.h, so that grant-keys needs no protobuf. */
enum gd_exit {
	GD_EXIT_OK = 0,
	GD_EXIT_REFUSED = 1,    /* refused by policy: denied, bad token */
	GD_EXIT_USAGE = 2,
	GD_EXIT_UNREACHABLE = 3,
	GD_EXIT_INTERNAL = 4,   /* the node failed to decide (its log says
				 * why); nothing was changed */
};

#endif
