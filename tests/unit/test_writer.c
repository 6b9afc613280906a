/*
 * test_writer.c: node/state/writer.h, THE batch, its commit, its recovery and
 * the syncer handshake, against a real store and a real syncer thread.
 *
 * Faults at the seam (SQLite's way): this program defines
 * rocksdb_write_writebatch_wi itself, so the store's every batch write
 * comes here first (the executable's symbol wins over librocksdb.so's)
 * and fails as RocksDB would, with an error string, when told to; else it
 * calls the real one.  A failed commit must leave nothing half-applied:
 * the records, the node's counters, its digest (the live one against one
 * recomputed from the records, ops_verify) and what is held for callers
 * and peers are all as before the batch; and the next batch commits.
 *
 * Committed state for readers: a read view shows a batch only once the
 * syncer has reported its ticket durable.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <rocksdb/c.h>
#include <zmq.h>

#include "buf.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "store.h"
#include "syncer.h"
#include "writer.h"

/* ---- the fault seam ------------------------------------------------------- */

/* The outbox's length (it is taken, so use it only where it is empty). */
static size_t outbox_len(struct ops *o)
{
	struct buf box = BUF_INIT;
	size_t n;

	ops_take_outbox(o, &box);
	n = box.len;
	buf_free(&box);
	return n;
}

/* > 0: fail that many writes; < 0: fail every write; 0: none */
static int fail_writes;
static int writes_failed;

typedef void (*write_wi_fn)(rocksdb_t *, const rocksdb_writeoptions_t *,
			    rocksdb_writebatch_wi_t *, char **);

void rocksdb_write_writebatch_wi(rocksdb_t *db,
				 const rocksdb_writeoptions_t *options,
				 rocksdb_writebatch_wi_t *wbwi, char **errptr)
{
	static write_wi_fn real;

	if (fail_writes) {
		if (fail_writes > 0)
			fail_writes--;
		writes_failed++;
		*errptr = strdup("IO error: test_writer: injected write fault");
		return;
	}
	if (!real)
		real = (write_wi_fn)(uintptr_t)dlsym(
			RTLD_NEXT, "rocksdb_write_writebatch_wi");
	assert_non_null(real);
	real(db, options, wbwi, errptr);
}

/* ---- a node's writer side ------------------------------------------------- */

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
	"test_writer seal key 0123456789";

struct fixture {
	char dir[64];
	char repo_dir[96];
	struct config cfg;
	struct store *s;
	struct ops *o;
	void *zctx;
	struct syncer *sy;
	struct writer *w;
	/* what the writer handed out */
	struct buf published;   /* every packed op, in order */
	int npublished;
	int done_durable, done_dropped;
	/* writer_opts.durable_fn: the last ticket told, and how many items
	 * had ended when it was told (it comes after them) */
	uint64_t told;
	int told_after_done;
	/* views given to writer_opts.view_fn (setup_view_fn): the last */
	struct store_batch *given;
	int ngiven;
};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_writer", LOG_LVL_ERROR);
}

/* writer_opts.view_fn, as main.c's give_view takes them: the view is
 * ours (the last kept, for the test to read). */
static void on_view(struct store_batch *view, void *payload)
{
	struct fixture *f = payload;

	store_batch_free(&f->given);
	f->given = view;
	f->ngiven++;
}

static void on_publish(struct buf *ops, void *payload);

static void on_durable(uint64_t ticket, void *payload)
{
	struct fixture *f = payload;

	assert_true(ticket >= f->told);
	f->told = ticket;
	f->told_after_done = f->done_durable;
}

static int setup_with(void **state, bool view_fn)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_writer", false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	f->cfg.site = "writer1";
	f->cfg.repo_dir = f->repo_dir;
	fail_writes = 0;
	writes_failed = 0;
	if (fx_store_open(&f->s, &f->o, f->dir, &f->cfg, seal_key) < 0)
		return -1;
	f->zctx = zmq_ctx_new();
	if (syncer_start(&f->sy, f->s, f->zctx, NULL) < 0)
		return -1;
	struct writer_opts wo = { .store = f->s, .ops = f->o,
				  .syncer = f->sy, .repo_dir = f->repo_dir,
				  .hook = NULL,
				  .publish_fn = on_publish,
				  .durable_fn = on_durable,
				  .publish_payload = f };
	if (view_fn) {
		wo.view_fn = on_view;
		wo.view_payload = f;
	}
	if (writer_open(&f->w, &wo) < 0)
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, false);
}

/* The writer as main.c opens it: durable views go to view_fn. */
static int setup_view_fn(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	fail_writes = 0;
	writer_destroy(&f->w);
	store_batch_free(&f->given);
	syncer_destroy(&f->sy);
	zmq_ctx_term(f->zctx);
	fx_store_close(&f->s, &f->o);
	buf_free(&f->published);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

static void on_publish(struct buf *ops, void *payload)
{
	struct fixture *f = payload;
	size_t off = 0;

	buf_add(&f->published, ops->p, ops->len);
	while (off + 4 <= ops->len) {
		const uint8_t *p = (const uint8_t *)ops->p + off;
		off += 4 + ((size_t)p[0] << 24 | (size_t)p[1] << 16 |
			    (size_t)p[2] << 8 | p[3]);
		f->npublished++;
	}
}

/* A caller's held item: counts how it ended. */
struct item {
	struct fixture *f;
	uint64_t ticket;
};

static void on_done(void *payload, bool durable)
{
	struct item *it = payload;

	if (durable)
		it->f->done_durable++;
	else
		it->f->done_dropped++;
	free(it);
}

static void hold(struct fixture *f, uint64_t ticket)
{
	struct item *it = calloc(1, sizeof(*it));

	assert_non_null(it);
	it->f = f;
	it->ticket = ticket;
	writer_hold(f->w, ticket, on_done, it);
}

/* Wait for the syncer to cover ticket; finish what it covers. */
static void wait_durable(struct fixture *f, uint64_t ticket)
{
	while (writer_durable(f->w) < ticket) {
		zmq_pollitem_t it = { writer_socket(f->w), 0, ZMQ_POLLIN, 0 };
		assert_int_equal(zmq_poll(&it, 1, 10000), 1);
		writer_synced(f->w);
	}
}

/* A grant for user from net, as a handler would make it: into THE batch
 * through ops_local. */
static void emit_grant(struct fixture *f, const char *user, const char *net)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__Grant g = GRANTD__V1__GRANT__INIT;

	g.user = (char *)user;
	g.net = (char *)net;
	g.session = "";
	g.added = 1700000000, g.has_added = 1;
	g.expires = 4102444800, g.has_expires = 1; /* 2100 */
	g.site = (char *)f->cfg.site;
	op.body_case = GRANTD__V1__OP__BODY_GRANT;
	op.grant = &g;
	assert_int_equal(ops_local(f->o, writer_batch(f->w), &op), 0);
}

/* Is the grant (user, net) in b (a view or a batch; NULL: the DB)? */
static bool has_grant(struct fixture *f, struct store_batch *b,
		      const char *user, const char *net)
{
	struct buf k = BUF_INIT, v = BUF_INIT;
	int rc;

	records_key_grant(&k, user, net, "");
	rc = store_get(f->s, b, CF_GRANTS, k.p, k.len, &v);
	buf_free(&k);
	buf_free(&v);
	assert_true(rc == 0 || rc == GD_ENOTFOUND);
	return rc == 0;
}

/* The node's state as the writer leaves it between batches. */
struct snapshot {
	uint64_t seq;
	uint8_t digest[DIGEST_LEN];
	uint64_t ticket, durable;
};

static void take(struct fixture *f, struct snapshot *sn)
{
	sn->seq = ops_seq(f->o);
	memcpy(sn->digest, ops_digest(f->o), DIGEST_LEN);
	sn->ticket = writer_ticket(f->w);
	sn->durable = writer_durable(f->w);
}

/* Consistent: the live digest is the stored one and the one recomputed
 * from the records; nothing waits in the batch or the outbox. */
static void assert_consistent(struct fixture *f)
{
	struct ops_verify *v = calloc(1, sizeof(*v));
	struct buf m = BUF_INIT;

	assert_non_null(v);
	assert_int_equal(ops_verify(f->o, v), 0);
	assert_true(v->equal);
	free(v);
	assert_int_equal(store_batch_count(writer_batch(f->w)), 0);
	assert_int_equal(outbox_len(f->o), 0);
	/* the stored sequence number is the live one */
	assert_int_equal(store_get(f->s, NULL, CF_META, "seq", 3, &m), 0);
	assert_int_equal(m.len, 8);
	assert_int_equal(store_get_be64(m.p), ops_seq(f->o));
	buf_free(&m);
}

/* ---- tests ---------------------------------------------------------------- */

/* The ordinary way: commit, ticket, durable, then published and the held
 * caller answered. */
static void test_commit_then_durable(void **state)
{
	struct fixture *f = *state;
	uint64_t t;

	emit_grant(f, "alice", "192.0.2.7/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(t, 1);
	hold(f, t);
	assert_int_equal(f->done_durable, 0); /* not before the fsync */
	assert_int_equal(f->npublished, 0);
	assert_true(has_grant(f, NULL, "alice", "192.0.2.7/32"));
	assert_int_equal(f->told, 0);
	wait_durable(f, t);
	assert_int_equal(f->npublished, 1);
	assert_int_equal(f->done_durable, 1);
	/* the publisher hears of the ticket after the held items ended */
	assert_int_equal(f->told, t);
	assert_int_equal(f->told_after_done, 1);
	assert_consistent(f);

	/* a batch that wrote nothing takes no ticket: held on the last
	 * one, durable already, so answered at once */
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(t, 1);
	hold(f, t);
	assert_int_equal(f->done_durable, 2);
}

/* One write fails (a transient RocksDB error): the batch is dropped
 * whole, the counters and the digest are those of the disk, nothing is
 * held or published for it; the next batch commits normally. */
static void test_commit_transient_failure(void **state)
{
	struct fixture *f = *state;
	struct snapshot before, after;
	uint64_t t;

	emit_grant(f, "alice", "192.0.2.7/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	wait_durable(f, t);
	take(f, &before);

	emit_grant(f, "bob", "198.51.100.1/32");
	emit_grant(f, "carol", "198.51.100.2/32");
	assert_true(ops_seq(f->o) == before.seq + 2); /* advanced in memory */
	fail_writes = 1;
	assert_int_equal(writer_commit(f->w, &t), GD_EIO);
	assert_int_equal(writes_failed, 1);
	assert_int_equal(t, 0); /* nothing to wait for: told undecided */
	take(f, &after);
	assert_int_equal(after.seq, before.seq);
	assert_memory_equal(after.digest, before.digest, DIGEST_LEN);
	assert_int_equal(after.ticket, before.ticket);
	assert_false(has_grant(f, NULL, "bob", "198.51.100.1/32"));
	assert_false(has_grant(f, NULL, "carol", "198.51.100.2/32"));
	assert_consistent(f);

	/* the next batch: the same sequence numbers again, committed */
	emit_grant(f, "dave", "203.0.113.9/32");
	assert_int_equal(ops_seq(f->o), before.seq + 1);
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(t, before.ticket + 1);
	hold(f, t);
	wait_durable(f, t);
	assert_int_equal(f->done_durable, 1);
	assert_true(has_grant(f, NULL, "dave", "203.0.113.9/32"));
	assert_false(has_grant(f, NULL, "bob", "198.51.100.1/32"));
	assert_consistent(f);
	/* peers get alice's and dave's operations, never bob's or carol's */
	assert_int_equal(f->npublished, 2);
	assert_null(memmem(f->published.p, f->published.len, "bob", 3));
	assert_null(memmem(f->published.p, f->published.len, "carol", 5));
}

/* Every write fails (a disk gone bad): each batch is dropped alike and
 * the node stays consistent; once writes work again, batches commit. */
static void test_commit_persistent_failure(void **state)
{
	struct fixture *f = *state;
	struct snapshot before, after;
	uint64_t t;

	take(f, &before);
	fail_writes = -1;
	for (int i = 0; i < 3; i++) {
		emit_grant(f, "erin", "192.0.2.10/32");
		assert_int_equal(writer_commit(f->w, &t), GD_EIO);
		assert_int_equal(t, 0);
		take(f, &after);
		assert_int_equal(after.seq, before.seq);
		assert_memory_equal(after.digest, before.digest, DIGEST_LEN);
		assert_int_equal(after.ticket, 0);
		assert_int_equal(outbox_len(f->o), 0);
		assert_int_equal(store_batch_count(writer_batch(f->w)), 0);
	}
	assert_int_equal(writes_failed, 3);
	fail_writes = 0;
	assert_consistent(f);
	assert_false(has_grant(f, NULL, "erin", "192.0.2.10/32"));
	emit_grant(f, "erin", "192.0.2.10/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(t, 1);
	wait_durable(f, t);
	assert_true(has_grant(f, NULL, "erin", "192.0.2.10/32"));
	assert_int_equal(f->npublished, 1);
	assert_consistent(f);
}

/* A caller's item held on a ticket the writer never sees durable (it is
 * destroyed first) is dropped, never answered as durable. */
static void test_destroy_drops_held(void **state)
{
	struct fixture *f = *state;
	uint64_t t;

	emit_grant(f, "frank", "192.0.2.11/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	hold(f, t + 1); /* a ticket no answer covers yet */
	writer_destroy(&f->w);
	assert_int_equal(f->done_durable, 0);
	assert_int_equal(f->done_dropped, 1);
}

/* Committed state for readers: a grant is in no read view until the
 * syncer reports its ticket durable, though the DB has it at once. */
static void test_view_waits_for_sync(void **state)
{
	struct fixture *f = *state;
	uint64_t t;

	assert_false(has_grant(f, writer_view(f->w), "gina", "192.0.2.12/32"));
	emit_grant(f, "gina", "192.0.2.12/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	/* written (the next batch sees it), not durable: readers must not */
	assert_true(has_grant(f, writer_batch(f->w), "gina", "192.0.2.12/32"));
	assert_false(has_grant(f, writer_view(f->w), "gina", "192.0.2.12/32"));
	wait_durable(f, t);
	assert_true(has_grant(f, writer_view(f->w), "gina", "192.0.2.12/32"));
}

/* The same on the path the node uses (main.c gives writer_opts.view_fn,
 * give_view, which hands each view to the reader thread): no view that
 * shows a batch is given before the syncer reports it durable (test audit
 * 8964f70, mutant 11b). */
static void test_view_fn_waits_for_sync(void **state)
{
	struct fixture *f = *state;
	uint64_t t;

	assert_null(writer_view(f->w)); /* the views go to view_fn */
	emit_grant(f, "hana", "192.0.2.13/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_true(has_grant(f, writer_batch(f->w), "hana", "192.0.2.13/32"));
	/* written, not durable: nothing given shows it */
	assert_false(f->given &&
		     has_grant(f, f->given, "hana", "192.0.2.13/32"));
	wait_durable(f, t);
	assert_true(f->ngiven > 0);
	assert_true(has_grant(f, f->given, "hana", "192.0.2.13/32"));
	/* a second batch: the view given before its fsync is the first */
	emit_grant(f, "hana", "192.0.2.14/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_false(has_grant(f, f->given, "hana", "192.0.2.14/32"));
	wait_durable(f, t);
	assert_true(has_grant(f, f->given, "hana", "192.0.2.14/32"));
}

/* A batch whose only change is the vector (a state transfer's last step,
 * an epoch retired) is a write like any other: it takes a ticket, and the
 * read view shows the vector once it is durable. */
static void test_vector_only_batch(void **state)
{
	struct fixture *f = *state;
	struct buf k = BUF_INIT, v = BUF_INIT;
	uint64_t t, before;

	emit_grant(f, "ivy", "192.0.2.15/32");
	assert_int_equal(writer_commit(f->w, &before), 0);
	wait_durable(f, before);
	ops_vv_raise(f->o, writer_batch(f->w), "farsite", 7, 42);
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(t, before + 1);
	wait_durable(f, t);
	records_key_vv(&k, "farsite", 7);
	assert_int_equal(store_get(f->s, writer_view(f->w), CF_VV, k.p, k.len,
				   &v), 0);
	assert_int_equal(store_get_be64(v.p), 42);
	buf_free(&k);
	buf_free(&v);
}

/* A view is a snapshot: later writes do not show in it, and it cannot be
 * written. */
static void test_view_is_a_snapshot(void **state)
{
	struct fixture *f = *state;
	struct store_batch *v;
	struct store_iter *it;
	const char *key;
	size_t klen;
	struct buf val = BUF_INIT;
	uint64_t t;
	int n = 0;

	emit_grant(f, "hank", "192.0.2.13/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	wait_durable(f, t);
	assert_int_equal(store_view_new(&v, f->s), 0);
	assert_true(store_batch_is_view(v));
	assert_false(store_batch_is_view(writer_batch(f->w)));
	emit_grant(f, "hank", "192.0.2.14/32");
	assert_int_equal(writer_commit(f->w, &t), 0);
	assert_int_equal(store_iter_new(&it, f->s, v, CF_GRANTS, "hank", 4),
			 0);
	while (store_iter_next(it, &key, &klen, &val) > 0)
		n++;
	store_iter_free(&it);
	assert_int_equal(n, 1);
	assert_int_equal(store_commit(v, false), GD_EINVAL);
	assert_int_equal(store_batch_count(v), 0);
	store_batch_free(&v);
	assert_null(v);
	buf_free(&val);
	wait_durable(f, t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_commit_then_durable, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_vector_only_batch, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_commit_transient_failure,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_persistent_failure,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_drops_held, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_view_waits_for_sync, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_view_is_a_snapshot, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_view_fn_waits_for_sync,
						setup_view_fn, teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
