/*
 * writer.c: THE batch, its commit, its recovery, and the syncer handshake
 * (writer.h).
 *
 * Why the work after a commit lives here and not with the callers: control
 * and repl both commit, and before this file each wrote its own commit,
 * ticket and recovery; one of them forgetting a step (the outbox, the
 * vector reload) would leave the digest or the peers' view wrong only on
 * the rare failed write.  Now they call writer_commit() and keep only what
 * is theirs: control its held replies, repl its latency samples.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <zmq.h>

#include "clock.h"
#include "crashpoint.h"
#include "err.h"
#include "hlc.h"
#include "log.h"
#include "repos.h"
#include "syncer.h"
#include "writer.h"
#include "xalloc.h"
#include "banned.h"

#define SWEEP_MAX 100000

/* A committed batch not yet durable. */
struct ticket {
	uint64_t ticket;
	struct buf ops;             /* its operations, packed (ops.outbox) */
	struct store_batch *view;   /* the state right after it */
	struct ticket *next;
};

/* A caller's item waiting for its ticket. */
struct hold {
	uint64_t ticket;
	writer_done_fn done;
	void *item;
	struct hold *next;
};

struct writer {
	struct store *store;
	struct ops *ops;
	struct syncer *syncer;
	const char *repo_dir;
	const char *hook;
	bool gitolite;
	writer_view_fn view_fn;
	void *view_payload;
	writer_publish_fn publish_fn;
	writer_durable_fn durable_fn;
	void *publish_payload;
	struct store_batch *batch;
	uint64_t ticket;            /* last taken */
	uint64_t durable;           /* last the syncer covered */
	struct ticket *head, *tail;
	struct hold *hhead, *htail;
	struct store_batch *view;   /* newest durable state */
	struct buf repos_retry;     /* repositories to make again */
};

int writer_open(struct writer **out, const struct writer_opts *o)
{
	struct writer *w = xcalloc(1, sizeof(*w));

	w->store = o->store;
	w->ops = o->ops;
	w->syncer = o->syncer;
	w->repo_dir = o->repo_dir;
	w->hook = o->hook;
	w->gitolite = o->gitolite;
	w->view_fn = o->view_fn;
	w->view_payload = o->view_payload;
	w->publish_fn = o->publish_fn;
	w->durable_fn = o->durable_fn;
	w->publish_payload = o->publish_payload;
	store_batch_new(&w->batch, o->store);
	if (!w->view_fn)
		store_view_new(&w->view, o->store);
	*out = w;
	return 0;
}

static void ticket_free(struct ticket *t)
{
	if (t->ops.p)
		sodium_memzero(t->ops.p, t->ops.len); /* may hold a secret */
	buf_free(&t->ops);
	store_batch_free(&t->view);
	free(t);
}

void writer_destroy(struct writer **wp)
{
	struct writer *w = *wp;

	if (!w)
		return;
	while (w->head) {
		struct ticket *t = w->head;
		w->head = t->next;
		ticket_free(t);
	}
	while (w->hhead) {
		/* never durable: the item is only freed */
		struct hold *h = w->hhead;
		w->hhead = h->next;
		h->done(h->item, false);
		free(h);
	}
	store_batch_free(&w->view);
	store_batch_free(&w->batch);
	buf_free(&w->repos_retry);
	free(w);
	*wp = NULL;
}

struct store_batch *writer_batch(struct writer *w)
{
	return w->batch;
}

void writer_discard(struct writer *w)
{
	int rc;

	store_batch_clear(w->batch);
	if ((rc = ops_reload(w->ops)) < 0)
		log_error("node counters not re-read after a dropped batch: %s",
			  gd_strerror(rc));
	ops_outbox_clear(w->ops);
}

/* Repositories whose records the batch made live get their directories
 * now that it is committed; one that cannot be made (a full disk, a bad
 * permission) is tried again by writer_retry_repos (a row of main.c's
 * cron), and at the next start (main.c's startup pass).  Beside gitolite one not there yet is left to
 * gitolite, which makes it when it compiles its admin repository; gitrepl
 * waits for the directory, so no retry here. */
static void follow_repos(struct writer *w)
{
	struct buf names = BUF_INIT;

	ops_take_repos(w->ops, &names);
	if (names.len)
		repos_follow(w->store, w->repo_dir, w->hook, !w->gitolite,
			     &names, &w->repos_retry);
	buf_free(&names);
}

int writer_commit(struct writer *w, uint64_t *ticket)
{
	struct ticket *t;
	bool wrote = ops_pending(w->ops, w->batch);
	int rc;

	*ticket = 0;
	if (wrote && faultpoint("commit")) {
		log_error("store write failed: test fault "
			  "(GRANTD_TEST_FAULT_AT)");
		rc = GD_EIO;
	} else {
		rc = ops_commit(w->ops, w->batch, false);
	}
	if (rc < 0) {
		/* nothing of it is on disk: nothing of it stays in memory */
		writer_discard(w);
		return rc;
	}
	follow_repos(w);
	struct buf out = BUF_INIT;
	ops_take_outbox(w->ops, &out);
	if (!wrote && !out.len) {
		buf_free(&out);
		*ticket = w->ticket;
		return 0;
	}
	t = xcalloc(1, sizeof(*t));
	t->ticket = ++w->ticket;
	t->ops = out; /* published with its durability */
	store_view_new(&t->view, w->store);
	if (w->tail)
		w->tail->next = t;
	else
		w->head = t;
	w->tail = t;
	syncer_request(w->syncer, t->ticket);
	*ticket = t->ticket;
	return 0;
}

void writer_hold(struct writer *w, uint64_t ticket, writer_done_fn done,
		 void *item)
{
	struct hold *h;

	if (ticket <= w->durable) {
		done(item, true);
		return;
	}
	h = xcalloc(1, sizeof(*h));
	h->ticket = ticket;
	h->done = done;
	h->item = item;
	if (w->htail)
		w->htail->next = h;
	else
		w->hhead = h;
	w->htail = h;
}

void *writer_socket(struct writer *w)
{
	return syncer_socket(w->syncer);
}

/* Everything up to ticket is on disk: its operations go to peers, the
 * newest view to the readers, and only then are the callers answered;
 * last the publisher hears how far durability got. */
static void finish(struct writer *w, uint64_t ticket)
{
	struct store_batch *view = NULL;

	if (ticket > w->durable)
		w->durable = ticket;
	while (w->head && w->head->ticket <= w->durable) {
		struct ticket *t = w->head;
		w->head = t->next;
		if (!w->head)
			w->tail = NULL;
		store_batch_free(&view); /* the newest is enough */
		view = t->view;
		t->view = NULL;
		if (w->publish_fn && t->ops.len)
			w->publish_fn(&t->ops, w->publish_payload);
		ticket_free(t);
	}
	if (view && w->view_fn) {
		w->view_fn(view, w->view_payload);
	} else if (view) {
		store_batch_free(&w->view);
		w->view = view;
	}
	while (w->hhead && w->hhead->ticket <= w->durable) {
		struct hold *h = w->hhead;
		w->hhead = h->next;
		if (!w->hhead)
			w->htail = NULL;
		h->done(h->item, true);
		free(h);
	}
	if (w->durable_fn)
		w->durable_fn(w->durable, w->publish_payload);
}

uint64_t writer_synced(struct writer *w)
{
	uint64_t t = syncer_done(w->syncer);

	if (t)
		finish(w, t);
	return t;
}

void writer_drain(struct writer *w)
{
	while (w->head || w->hhead) {
		zmq_pollitem_t it = { syncer_socket(w->syncer), 0, ZMQ_POLLIN,
				      0 };
		if (zmq_poll(&it, 1, 10000) <= 0)
			break;
		writer_synced(w);
	}
}

uint64_t writer_ticket(const struct writer *w)
{
	return w->ticket;
}

uint64_t writer_durable(const struct writer *w)
{
	return w->durable;
}

struct store_batch *writer_view(struct writer *w)
{
	return w->view;
}

/* Forget grants long expired, through the batch so the digest follows.
 * A sweep that fails took its deletions back (ops_sweep_grants). */
void writer_sweep(struct writer *w)
{
	uint64_t t;
	/* expiry is a time of day: the wall clock */
	int k = ops_sweep_grants(w->ops, w->batch,
				 (int64_t)(clock_wall_ms() / 1000), SWEEP_MAX);

	if (k > 0 && writer_commit(w, &t) == 0)
		log_info("expired grants forgotten count=%d", k);
	else if (k < 0)
		log_error("expired grants not swept: %s", gd_strerror(k));
}

void writer_retry_repos(struct writer *w)
{
	struct buf again = w->repos_retry;

	if (!again.len)
		return;
	w->repos_retry = (struct buf)BUF_INIT;
	repos_follow(w->store, w->repo_dir, w->hook, !w->gitolite, &again,
		     &w->repos_retry);
	buf_free(&again);
}

