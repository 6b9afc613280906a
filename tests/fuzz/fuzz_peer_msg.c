/*
 * fuzz_peer_msg.c: what a peer's frame meets first.
 *
 * Every frame from a peer's SUB or DEALER, or on our sync ROUTER, is one
 * PeerMsg (peer.c peer_msg_decode()): protobuf-c unpacks it and
 * peer_msg_problem() checks its version and sender.  Then the operations it carries (a live
 * op, or a range reply's packed ops) go through ops_check() and, when they
 * pass, ops_apply(); the records of a snapshot reply go through
 * ops_merge_record(), the state-transfer path with its own checks; a
 * mirror's feed (mirror_ops) applies what a mirror may hold and takes the
 * rest as stamps (ops_skip).
 *
 * The applies write to a batch that is never committed, on a store opened
 * once in a temporary directory (removed at exit); the node's counters are
 * re-read from the store after each input, so one input cannot change how
 * the next is judged.  Besides not crashing, the checks below hold the
 * headers' promises: a message is taken only with our protocol version and
 * the link's own site as sender, and ops_check refuses only with a reason.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <git2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "config.h"
#include "err.h"
#include "hlc.h"
#include "log.h"
#include "ops.h"
#include "peer.h"
#include "plheads.h"
#include "records.h"
#include "store.h"
#include "vote.h"

/* the link this frame is taken to come from */
#define LINK_SITE "portland"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	char dir[64];
	char store_dir[96];
	char repo_dir[96];
	struct config cfg;
	struct store *store;
	struct ops *ops;
	struct hlc hlc0;
	bool open;
} fz;

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	return remove(path);
}

static void fz_cleanup(void)
{
	if (!fz.open)
		return;
	ops_destroy(&fz.ops);
	store_destroy(&fz.store);
	nftw(fz.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The node that judges the inputs: site paloalto, an empty store. */
static void fz_open(void)
{
	static const uint8_t seal_key[STORE_SEAL_KEY_LEN];
	const char *tmp = getenv("TMPDIR");
	bool created = false;

	log_init("fuzz_peer_msg", false, LOG_LVL_ERROR);
	git_libgit2_init(); /* a Repo record creates its repository */
	snprintf(fz.dir, sizeof(fz.dir), "%s/grantd-fuzz-peer.XXXXXX",
		 tmp && strlen(tmp) < 32 ? tmp : "/tmp");
	if (!mkdtemp(fz.dir))
		abort();
	snprintf(fz.store_dir, sizeof(fz.store_dir), "%s/data", fz.dir);
	snprintf(fz.repo_dir, sizeof(fz.repo_dir), "%s/repos", fz.dir);
	if (mkdir(fz.repo_dir, 0700) < 0)
		abort();
	fz.cfg.site = "paloalto";
	fz.cfg.repo_dir = fz.repo_dir;
	if (store_open(&fz.store, &created, fz.store_dir, seal_key) < 0 ||
	    ops_open(&fz.ops, fz.store, &fz.cfg, created) < 0)
		abort();
	fz.hlc0 = *ops_hlc(fz.ops);
	fz.open = true;
	atexit(fz_cleanup);
}

/* ops_check's contract: 0, or GD_EPROTO with a reason. */
static int check_op(const Grantd__V1__Op *op)
{
	struct buf why = BUF_INIT;
	int rc = ops_check(op, &why);

	if (rc != 0 && (rc != GD_EPROTO || !buf_str(&why)[0]))
		abort();
	if (rc == 0 && buf_str(&why)[0])
		abort();
	buf_free(&why);
	return rc;
}

/* A peer's operation, as repl.c apply_op takes it. */
static void take_op(struct store_batch *b, const Grantd__V1__Op *op)
{
	bool applied;

	if (check_op(op) == 0)
		(void)ops_apply(fz.ops, b, op, &applied);
}

static void take_range(struct store_batch *b, const Grantd__V1__RangeRep *rr)
{
	for (size_t i = 0; i < rr->n_ops; i++) {
		Grantd__V1__Op *op = grantd__v1__op__unpack(
			NULL, rr->ops[i].len, rr->ops[i].data);
		if (!op)
			continue;
		take_op(b, op);
		records_op_wipe(op);
		grantd__v1__op__free_unpacked(op, NULL);
	}
}

static bool any_origin(const char *origin, void *payload)
{
	(void)origin;
	(void)payload;
	return true;
}

/* A snapshot reply's records, as repl.c apply_snap merges them. */
static void take_snap(struct store_batch *b, const Grantd__V1__SnapRep *rep)
{
	if (rep->n_keys != rep->n_values)
		return;
	/* a peer's records get the peer checks: any origin is "known" here,
	 * so the decoders behind them are reached */
	struct ops_trust t = { ((clock_wall_ms() + 120000) << 16) | 0xffff,
			       any_origin, NULL };
	for (size_t i = 0; i < rep->n_values; i++)
		(void)ops_merge_record(fz.ops, b, (enum store_cf)rep->cf,
				       rep->values[i].data,
				       rep->values[i].len, &t, NULL);
}

/* A vote request as the voter judges it (vote.c on_vote_req): the use
 * taken out of it, then the rule against the store, its promise left in
 * the batch. */
static void take_vote(struct store_batch *b, const Grantd__V1__VoteReq *q)
{
	Grantd__V1__VoteVerdict verdict;
	struct vote_use u;
	uint64_t pid, held;

	if (vote_use_from_req(&u, &pid, q) < 0)
		return;
	if (vote_promise(fz.store, b, &u, pid, LINK_SITE, 1, &verdict,
			 &held) < 0)
		return;
	if (verdict != GRANTD__V1__VOTE_VERDICT__VOTE_YES &&
	    verdict != GRANTD__V1__VOTE_VERDICT__VOTE_USED &&
	    verdict != GRANTD__V1__VOTE_VERDICT__VOTE_PROMISED &&
	    verdict != GRANTD__V1__VOTE_VERDICT__VOTE_BAD)
		abort();
}

/* A frontend's feed, as repl.c apply_mirror_ops takes it at a mirror:
 * an operation a mirror may hold is applied, any other (with its bytes or
 * not) moves the vector only (ops_skip), and bytes whose stamp is not the
 * entry's are dropped. */
static void take_mirror_ops(struct store_batch *b,
			    const Grantd__V1__MirrorOps *mo)
{
	for (size_t i = 0; i < mo->n_ops; i++) {
		const Grantd__V1__MirrorOp *e = mo->ops[i];
		bool applied;
		if (!e->origin || !e->has_epoch || !e->has_seq || !e->seq)
			continue;
		Grantd__V1__Op *op = e->has_op ?
			grantd__v1__op__unpack(NULL, e->op.len, e->op.data) :
			NULL;
		if (op && (!op->origin || strcmp(op->origin, e->origin) ||
			   op->epoch != e->epoch || op->seq != e->seq)) {
			/* not its own stamp: dropped */
		} else if (op && ops_mirror_visible(op)) {
			take_op(b, op);
		} else {
			(void)ops_skip(fz.ops, b, e->origin, e->epoch, e->seq,
				       e->hlc, &applied);
		}
		if (op) {
			records_op_wipe(op);
			grantd__v1__op__free_unpacked(op, NULL);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_batch *b = NULL;

	if (!fz.open)
		fz_open();
	const char *why = NULL;
	Grantd__V1__PeerMsg *m = peer_msg_decode(data, size, LINK_SITE, &why);
	if (!m) {
		if (!why) /* refused: always with a reason */
			abort();
		goto done;
	}
	/* taken: it must be of our version and from the link's own site */
	if (!m || !m->has_version || m->version != GD_PEER_VERSION ||
	    !m->from || strcmp(m->from, LINK_SITE))
		abort();
	if (store_batch_new(&b, fz.store) < 0)
		abort();
	switch (m->body_case) {
	case GRANTD__V1__PEER_MSG__BODY_OP:
		take_op(b, m->op);
		records_op_wipe(m->op);
		break;
	case GRANTD__V1__PEER_MSG__BODY_RANGE_REP:
		take_range(b, m->range_rep);
		break;
	case GRANTD__V1__PEER_MSG__BODY_SNAP_REP:
		take_snap(b, m->snap_rep);
		break;
	case GRANTD__V1__PEER_MSG__BODY_VOTE_REQ:
		take_vote(b, m->vote_req);
		break;
	case GRANTD__V1__PEER_MSG__BODY_MIRROR_OPS:
		take_mirror_ops(b, m->mirror_ops);
		break;
	case GRANTD__V1__PEER_MSG__BODY_PUSHLOG_HEADS: {
		struct buf why_h = BUF_INIT;
		if (plheads_take(fz.store, b, LINK_SITE, m->pushlog_heads,
				 &why_h) < 0)
			abort();
		buf_free(&why_h);
		break;
	}
	default:
		break;
	}
	/* forget the input: nothing committed, counters as on disk */
	store_batch_free(&b);
	*ops_hlc(fz.ops) = fz.hlc0;
	if (ops_reload(fz.ops) < 0)
		abort();
done:
	if (m)
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	return 0;
}
