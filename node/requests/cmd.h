/*
 * cmd.h: what the command handlers share: the request, the context a
 * handler runs in, the reply helpers, argument parsing, and the table of
 * every command.
 *
 * The handlers live by domain: cmd_grant.c (tokens and grants: 2fa val*,
 * isval, list-val, inval; grantctl grant, check; push.check), cmd_user.c
 * (users, enrollments, unlock, keys), cmd_repo.c (repositories, hook
 * refs), cmd_node.c (status, verify, backup, rebuild, rekey), cmd_log.c
 * (the push log: log.page, log.verify).  Each
 * exports its slice of rows; cmd_table_new() joins them into the one
 * table control.c dispatches over.  A row says with flags where a command
 * is allowed and what it needs, so no rule hides in a name.
 *
 * A handler sees a struct cmd_ctx, never the node: the config, the store
 * and what it reads through (the batch, or NULL: committed state), the
 * operations module when it may write, and the few node-wide facts the
 * node commands need.  It validates all its input first, then makes its
 * changes as operations (cmd_emit); it never writes to the store itself.
 * Every handler runs on the thread that made its context.
 */
#ifndef GD_CMD_H
#define GD_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "addr.h"
#include "buf.h"
#include "cmds.h"
#include "grantd.pb-c.h"
#include "ops.h"
#include "policy.h"
#include "vote.h"
#include "wire.h"

#define SET(m, f, v) ((m).f = (v), (m).has_##f = 1)

/* ---- the rows ----------------------------------------------------------- */

enum cmd_flags {
	CMD_ON_USER = 1 << 0,    /* allowed on the user socket */
	CMD_ON_ADMIN = 1 << 1,   /* allowed on the admin socket */
	/* Changes nothing: answered at once from committed state, without
	 * waiting for the batch's fsync (a push check never queues behind a
	 * val).  Its context has no batch and no ops. */
	CMD_READS = 1 << 2,
	/* Handled in the batch, in order with the other writes, and answered
	 * once the batch is durable if it wrote.  Exactly one of CMD_READS and
	 * CMD_BATCH. */
	CMD_BATCH = 1 << 3,
	CMD_NEEDS_USER = 1 << 4, /* on the user socket: names a user */
	/* on the user socket: refused while the node catches up with its
	 * peers (it may not know the user, or that a token was used
	 * elsewhere) */
	CMD_SYNC_GATED = 1 << 5,
	CMD_USES_IP = 1 << 6,    /* client_ip must be present and valid */
	CMD_NODE = 1 << 7,       /* needs the node-wide facts (cmd_ctx.node) */
	/* Only at a frontend: a read-only mirror (SPEC 9) refuses it,
	 * naming the frontends.  Every command that writes, and every one
	 * that reads what a mirror never holds (enrollments, marks, grants):
	 * pushes, 2fa, grants, users, repositories. */
	CMD_FRONTEND = 1 << 8,
};

/* What every 2fa subcommand is: a user's own, on the user socket, and not
 * while the node catches up. */
#define CMD_TWOFA (CMD_ON_USER | CMD_NEEDS_USER | CMD_SYNC_GATED | CMD_FRONTEND)

struct req;
struct cmd_ctx;

/* Returns 0 when r is answered (its status may be a refusal), or a
 * negative gd_err when the node failed to decide (then nothing of r's
 * answer is kept, and its changes are dropped with the batch). */
typedef int (*cmd_fn)(struct cmd_ctx *x, struct req *r);

struct cmd {
	const char *name;       /* the request's cmd; NULL: from twofa */
	enum gd_2fa_id twofa;   /* a 2fa subcommand: name and argument
				 * bounds come from common/cmds.h */
	unsigned flags;         /* enum cmd_flags */
	int min_args, max_args;
	cmd_fn fn;
};

/* A row of a command. */
#define CMD_ROW(NAME, FLAGS, MIN, MAX, FN)                                     \
	{ .name = (NAME), .flags = (FLAGS), .min_args = (MIN),                 \
	  .max_args = (MAX), .fn = (FN) }

/* A row of a 2fa subcommand (common/cmds.h row ID): its name and argument
 * bounds come from there. */
#define CMD_2FA(ID, FLAGS, FN)                                                 \
	{ .twofa = GD_2FA_##ID, .flags = (FLAGS), .fn = (FN) }

/* The slices, one per cmd_*.c. */
extern const struct cmd cmd_grant_rows[];
extern const size_t cmd_grant_nrows;
extern const struct cmd cmd_user_rows[];
extern const size_t cmd_user_nrows;
extern const struct cmd cmd_repo_rows[];
extern const size_t cmd_repo_nrows;
extern const struct cmd cmd_node_rows[];
extern const size_t cmd_node_nrows;
extern const struct cmd cmd_log_rows[];
extern const size_t cmd_log_nrows;

/* Every command, 2fa rows filled in from common/cmds.h. */
struct cmd_table {
	struct cmd *rows;
	size_t n;
};

/* Join the slices.  *out is the caller's (cmd_table_free).  Returns 0, or
 * GD_EINVAL (logged) for a table that breaks its rules: a name twice, a
 * 2fa subcommand without a row or with two, flags that contradict each
 * other; a programming error, found at start. */
int cmd_table_new(struct cmd_table **out);
void cmd_table_free(struct cmd_table **tp);

/* The row of name, or NULL.  Any thread (the table is read only). */
const struct cmd *cmd_table_find(const struct cmd_table *t, const char *name);

/* ---- the request and the context ---------------------------------------- */

struct req {
	Grantd__V1__Request *rq;
	ProtobufCAllocator *rq_al; /* rq's allocator (NULL: malloc) */
	bool admin;
	int status;
	struct buf out, err, uri, path;
	const char *factor;     /* push.check: Reply.factor (static) */
	char next[128];         /* log.page: Reply.next, "" for none */
	struct gd_net ip;       /* client_ip, when the command uses it */
	enum policy_key key;    /* key_kind (cmd_admit); UNKNOWN without */
	int64_t now;            /* unix seconds */
	uint64_t now_ms;
	/* request.h and control.c: where the answer goes, how far it got */
	struct buf ident;       /* ROUTER routing id */
	void *sock;
	bool reads_only;        /* dispatch only READS commands (1st pass) */
	bool wrote;             /* made operations: answer once durable */
	bool done;              /* answered */
	int failed;             /* its handler failed (a gd_err): left out
				 * when its batch is handled again */
	/* token_quorum = majority (vote.h): cmd_validate_token proposes a
	 * use and parks the request (PARK: control keeps it unanswered,
	 * serving others, while the sites vote); control hands it to the
	 * handler again with the verdict (YES or NO, why: the refusal) */
	struct {
		enum { CMD_VOTE_NONE, CMD_VOTE_PARK, CMD_VOTE_YES,
		       CMD_VOTE_NO } state;
		uint64_t pid;
		struct vote_use use;
		char why[512];
	} vote;
};

struct repl;
struct gitrepl;

/* What the node commands (CMD_NODE rows) read beyond the store; borrowed,
 * all of it the writer thread's. */
struct cmd_node {
	struct ops *ops;          /* site, digest, clock, vector, counters */
	struct repl *repl;
	struct gitrepl *gitrepl;  /* NULL: repositories not replicated */
	const char *curve_pub;    /* this node's CURVE public key */
	const char *conf_path;    /* the config, absolute */
};

/* What `status` shows beyond the store, as the reader thread holds it
 * (readers.c): the writer's parts, rendered on the writer thread
 * (cmd_status_store, cmd_status_repl) and handed over whole, plus the
 * reader's own count of bad requests.  Borrowed, read only. */
struct cmd_status {
	const cJSON *store;       /* NULL: not published yet */
	const cJSON *repl;
	uint64_t bad_requests;    /* frames refused or failing to decode */
};

struct peerpolicy;

struct cmd_ctx {
	/* config, store, host; p.batch: the batch (CMD_BATCH rows), NULL for
	 * CMD_READS rows (committed state) */
	struct policy_ctx p;
	struct ops *ops;          /* CMD_BATCH rows only, else NULL */
	bool syncing;             /* catching up with peers */
	const struct cmd_node *node; /* CMD_NODE rows only, else NULL */
	const struct cmd_status *status; /* the reader's; NULL elsewhere */
	/* metrics.h: atomic counters any thread adds to; NULL: none */
	struct metrics_counts *counts;
	/* the token quorum (vote.h); CMD_BATCH rows only, else NULL */
	struct vote *vote;
	/* the frontend peers' [policy] settings against ours (peerpolicy.h):
	 * token validation is refused while token_quorum differs; CMD_BATCH
	 * rows only, else NULL (none: nothing compared) */
	const struct peerpolicy *peer_policy;
};

/*
 * The writer's parts of `status`, rendered on the writer thread for the
 * reader (readers_publish_status); each a new object, the caller's.
 * store: site, digest, hlc, epoch, vector and the kept counts
 * (ops_count at now, unix seconds), as ops holds them now.
 * repl: peers, replication metrics, git (g NULL: none), refused peers.
 */
cJSON *cmd_status_store(struct ops *ops, int64_t now);
cJSON *cmd_status_repl(struct repl *repl, struct gitrepl *g,
		       uint64_t now_ms);

/*
 * The rules of row cmd for r, in order: the socket, the node's role (a
 * CMD_FRONTEND row on a mirror is refused with the frontends' names; host
 * names the service in it), the argument count, a user named, the
 * syncing gate, the client address (parsed into r->ip), the key kind
 * (parsed into r->key).
 * Returns 0 when the handler may run, 1 when r was answered (bad or
 * refused) instead.
 */
int cmd_admit(const struct cmd *cmd, struct req *r, const struct config *cfg,
	      const char *host, bool syncing);

/* ---- replies ------------------------------------------------------------ */

/* cmd_bad(): the input was wrong (exit 2); cmd_refuse(): a refusal (exit
 * 1).  Each adds a line to r->err; both return 0: the request was
 * handled. */
int cmd_bad(struct req *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int cmd_refuse(struct req *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The node failed to decide r (a handler's store or crypto error, a batch
 * that did not commit): exit 4, never a refusal (SPEC 3), and nothing of
 * what the handler had answered so far.  The caller logs the cause. */
void cmd_undecided(struct req *r, int err);

/* "YYYY-MM-DD HH:MM:SS UTC" */
void cmd_fmt_time(char *out, size_t len, int64_t t);

/* Append j to r->out as one line, and free j. */
void cmd_print_json(struct req *r, cJSON *j);

/* ---- arguments ---------------------------------------------------------- */

static inline const char *cmd_user_of(const struct req *r)
{
	return r->rq->user;
}

/* A user name, or false with a bad() reply. */
bool cmd_name_arg(struct req *r, const char *name);

/* A repository name, normalised into out; or GD_EINVAL with a bad()
 * reply. */
int cmd_repo_arg(struct req *r, const char *arg, char *out, size_t len);

/* A decimal number 0..max (digits only); 0 or GD_EINVAL. */
int cmd_parse_uint(const char *s, unsigned long long max,
		   unsigned long long *out);

/* ---- what handlers of several files share ------------------------------- */

/* Make one local operation in the batch (CMD_BATCH rows). */
int cmd_emit(struct cmd_ctx *x, Grantd__V1__Op *op);

/* The same, of body (a User, Grant, ... as which says). */
int cmd_emit_body(struct cmd_ctx *x, Grantd__V1__Op__BodyCase which,
		  void *body);

/* Resolve the calling user into *u (policy_user_clear it in any case);
 * GD_EDENIED with a refusal when unknown.  In gitolite mode
 * (cfg->gitolite_home) an unknown user is no refusal: 0 with u->user
 * NULL (and no enrollment). */
int cmd_load_caller(struct cmd_ctx *x, struct req *r, struct policy_user *u);

/*
 * Check token for the enrolled (or enrolling) user u (cmd_val.c).  On
 * success the mark (and, for a pending enrollment, its activation) are
 * emitted and *how says which kind of token it was; on failure a failure
 * is emitted and the request refused.  Returns 0 with *ok set, or a
 * negative gd_err.
 */
int cmd_validate_token(struct cmd_ctx *x, struct req *r,
		       struct policy_user *u, const char *token, bool *ok,
		       const char **how);

/* Revoke every live grant of user and record a revocation of the user
 * (cmd_grant.c); *count (may be NULL): grants revoked. */
int cmd_revoke_all(struct cmd_ctx *x, struct req *r, const char *user,
		   int *count);

#endif
