/*
 * node.h: the node's parts, owned by main.c and lent to the modules.
 * Everything here belongs to the writer thread (the main loop).
 */
#ifndef GD_NODE_H
#define GD_NODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "opsig.h"
#include "loghttp.h"
#include "metrics.h"
#include "ops.h"
#include "store.h"

struct control;
struct gitrepl;
struct metrics;
struct peer_link;
struct readers;
struct repl;
struct syncer;
struct vote;
struct writer;

struct node {
	struct config *cfg;
	struct store *store;
	struct ops *ops;
	struct control *control;
	struct peer_link *peer; /* the link to peers: ZAP, sync ROUTER */
	struct readers *readers; /* the sockets, and the reads off this thread */
	struct repl *repl;
	struct syncer *syncer;
	struct writer *writer; /* THE batch, its commit and tickets */
	struct gitrepl *gitrepl; /* repositories follow the ref records */
	struct vote *vote;     /* the token quorum (vote.h) */
	char curve_pub[Z85_KEY_LEN + 1];  /* this node's CURVE key pair */
	char curve_sec[Z85_KEY_LEN + 1];
	/* the operation-signing key derived from curve_sec, and the keys
	 * peers' operations are checked with (common/opsig.h) */
	struct opsig_signer signer;
	struct opsig_verifier verifier;
	bool syncing;          /* catching up: token validation refused */
	void *zctx;
	char host[256];        /* the name users ssh to, for hints */
	char hook_path[4096];  /* grant-hook, beside grantd */
	char hook[8400];       /* post-receive command line */
	char conf_path[4096];  /* the config, absolute (for grant-hook) */
	uint64_t started_ms;
	/* metrics.h: the endpoint (NULL: [node] metrics not set) and the
	 * counters every thread adds to, lent to the modules */
	struct metrics *metrics;
	/* [node] log_http: the public push log (NULL: not set), served from
	 * the store through logsrc */
	struct loghttp *loghttp;
	struct loghttp_source logsrc;
	struct metrics_counts counts;
	pid_t *hook_pids;      /* grant-hook runs not yet reaped */
	size_t nhook_pids;
};

#endif
