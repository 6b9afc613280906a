/*
 * readers.h: the reader thread, which owns the user and admin sockets
 * and the keys socket.
 *
 * Every request from grant-shell, grant-hook, grant-keys and grantctl
 * arrives here: the user and admin sockets are plain unix stream sockets
 * carrying length-prefixed grantd.v1 Requests and Replies (usersock.h),
 * and grant-keys' lookups by fingerprint come on the keys socket
 * (keysock.h, answered by keys.find's row on the same view); all three
 * are polled beside the writer's pipe.
 * The reader answers the rows that only read (cmd.h: CMD_READS without
 * CMD_NODE: push.check, 2fa isval and list-val, keys.list, check,
 * grant.list, user.list, repo.read, repo.list, backup, status) itself,
 * from the newest read view the writer published: committed state as of
 * a batch the syncer reported durable, so a reader never shows what a
 * crash could still take back, and never waits for a write.  Every
 * other request (writes, and verify, the read that needs the writer's
 * memory) is forwarded to the writer over an inproc pipe, whole, with
 * the id usersock gave it (its connection and place); the writer answers
 * it back through the same pipe and the reader hands the answer to
 * usersock_answer(), which sends it on that connection in the request's
 * turn.  So a write never waits for a read either.
 *
 * The reader touches nothing the writer owns: the config, the store's
 * handles and the command table are read only once the node runs; a view
 * and the syncing flag come to it as messages, and the view is then its
 * own.  Replies on the pipe come in the order the writer sent them, after
 * the view it published before them, so a caller answered "granted" sees
 * its grant in the very next read.
 *
 * The pipe (a ZeroMQ PAIR) carries the messages pipe.h names:
 * PIPE_REQ_USER / PIPE_REQ_ADMIN (a request, reader to writer, and its
 * answer, writer to reader; the id is usersock's), PIPE_VIEW (a new read view and syncing flag,
 * or status parts, wait in the hand-over slots: readers_publish,
 * readers_publish_status) and PIPE_QUIT.
 *
 * `status` is a read answered here too: the writer publishes what it
 * alone knows (its counters, the peers, git replication) as rendered
 * JSON parts (cmd.h: cmd_status_store, cmd_status_repl) with each
 * durable view and when they change, and the reader counts the bad
 * requests it sees itself.
 */
#ifndef GD_READERS_H
#define GD_READERS_H

#include <stdbool.h>

#include "config.h"
#include "store.h"

struct readers;

struct readers_opts {
	const struct config *cfg;      /* socket paths; read only */
	struct store *store;
	const char *host;              /* copied */
	void *zctx;
	struct store_batch *view;      /* the first view; now the reader's */
	bool syncing;
	struct cJSON *status_store;    /* the first status parts (NULL: none */
	struct cJSON *status_repl;     /* yet); now the reader's */
	struct metrics_counts *counts; /* metrics.h; NULL: none; outlives */
};

/* Bind the user, admin and keys sockets (removing stale socket files
 * first, setting their modes: 0660 group git, 0600, 0660 group git), make the thread's own command table (cmd.h) and start the
 * thread.  *out is the caller's (readers_stop).  Returns 0 or GD_EIO
 * (logged; the view is freed either way). */
int readers_start(struct readers **out, const struct readers_opts *o);

/* Stop the thread, close the sockets and remove their files.  NULL-safe;
 * sets *rp to NULL. */
void readers_stop(struct readers **rp);

/* The writer's end of the pipe (writer thread only). */
void *readers_pipe(struct readers *rd);

/* Hand the reader a new view (its ownership moves; NULL: none) and the
 * syncing flag.  Writer thread. */
void readers_publish(struct readers *rd, struct store_batch *view,
		     bool syncing);

/* Hand the reader new parts of status (cmd.h: cmd_status_store,
 * cmd_status_repl); their ownership moves; NULL: that part unchanged.
 * Published before the replies they cover (readers.h's pipe keeps the
 * order).  Writer thread. */
void readers_publish_status(struct readers *rd, struct cJSON *store,
			    struct cJSON *repl);

#endif
