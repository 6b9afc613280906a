/*
 * test_peer.c: node/peers/peer.h, the link to peer sites.
 *
 * Real libzmq throughout:
 *  - framing: a message from peer_msg_init() carries our version, site
 *    and send time; peer_send() puts a routing id in front when given one
 *    and what arrives decodes to what was sent;
 *  - peer_msg_decode() refuses garbage, another protocol version and a
 *    sender that is not the link's site, each with its reason;
 *  - peer_on() takes one handler per kind, in range;
 *  - a CURVE pair over ipc: a client with a configured key reaches the
 *    sync ROUTER, its requests go to the handler of their kind with its
 *    site (from ZAP), and peer_reply() answers it; a kind nobody took and
 *    a forged sender are dropped and counted; an unknown key is refused by
 *    ZAP; a PUB from peer_server() reaches a SUB from peer_curve_client().
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "peer.h"
#include "planes.h"

#define WAIT_MS 10000

/* ---- framing ------------------------------------------------------------ */

static void test_msg_init(void **state)
{
	struct peer_self self = { NULL, "paloalto", NULL, NULL };
	Grantd__V1__PeerMsg m;
	uint64_t before = clock_wall_us();

	(void)state;
	peer_msg_init(&self, &m);
	assert_true(m.has_version);
	assert_int_equal(m.version, GD_PEER_VERSION);
	assert_string_equal(m.from, "paloalto");
	assert_true(m.has_sent_us);
	assert_true(m.sent_us >= before && m.sent_us <= clock_wall_us());
	assert_int_equal(m.body_case, GRANTD__V1__PEER_MSG__BODY__NOT_SET);
}

/* A frame as a peer would send it. */
static size_t pack(uint8_t *out, const char *from, uint32_t version,
		   bool has_version)
{
	Grantd__V1__PeerMsg m = GRANTD__V1__PEER_MSG__INIT;
	m.version = version;
	m.has_version = has_version;
	m.from = (char *)from;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	return grantd__v1__peer_msg__pack(&m, out);
}

static void test_send_framing(void **state)
{
	struct peer_self self = { NULL, "paloalto", NULL, NULL };
	void *ctx = zmq_ctx_new(), *a, *b;
	Grantd__V1__PeerMsg m, *got;
	Grantd__V1__RangeReq rq = GRANTD__V1__RANGE_REQ__INIT;
	char frame[4096];
	const char *why;
	int n;

	(void)state;
	a = zmq_socket(ctx, ZMQ_PAIR);
	b = zmq_socket(ctx, ZMQ_PAIR);
	assert_int_equal(zmq_bind(a, "inproc://test_peer"), 0);
	assert_int_equal(zmq_connect(b, "inproc://test_peer"), 0);
	peer_msg_init(&self, &m);
	rq.origin = "portland";
	rq.epoch = 7, rq.has_epoch = 1;
	rq.from = 42, rq.has_from = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REQ;
	m.range_req = &rq;

	/* behind a routing id: two frames, the id first */
	assert_int_equal(peer_send(a, &m, "ID", 2), 0);
	n = zmq_recv(b, frame, sizeof(frame), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(frame, "ID", 2);
	int more = 0;
	size_t ml = sizeof(more);
	zmq_getsockopt(b, ZMQ_RCVMORE, &more, &ml);
	assert_true(more);
	n = zmq_recv(b, frame, sizeof(frame), 0);
	assert_true(n > 0);
	got = peer_msg_decode(frame, (size_t)n, "paloalto", &why);
	assert_non_null(got);
	assert_int_equal(got->body_case, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ);
	assert_string_equal(got->range_req->origin, "portland");
	assert_int_equal(got->range_req->epoch, 7);
	assert_int_equal(got->range_req->from, 42);
	grantd__v1__peer_msg__free_unpacked(got, NULL);

	/* without one: a single frame */
	assert_int_equal(peer_send(a, &m, NULL, 0), 0);
	n = zmq_recv(b, frame, sizeof(frame), 0);
	zmq_getsockopt(b, ZMQ_RCVMORE, &more, &ml);
	assert_false(more);
	got = peer_msg_decode(frame, (size_t)n, "paloalto", &why);
	assert_non_null(got);
	grantd__v1__peer_msg__free_unpacked(got, NULL);
	zmq_close(a);
	zmq_close(b);
	zmq_ctx_term(ctx);
}

static void test_decode_refuses(void **state)
{
	uint8_t frame[256];
	const char *why = NULL;
	size_t len;
	Grantd__V1__PeerMsg *m;

	(void)state;
	m = peer_msg_decode("\xff\xff\xff\xff", 4, "portland", &why);
	assert_null(m);
	assert_string_equal(why, "does not decode");

	len = pack(frame, "portland", GD_PEER_VERSION + 1, true);
	assert_null(peer_msg_decode(frame, len, "portland", &why));
	assert_string_equal(why, "unsupported protocol version");

	len = pack(frame, "portland", GD_PEER_VERSION, false);
	assert_null(peer_msg_decode(frame, len, "portland", &why));
	assert_string_equal(why, "unsupported protocol version");

	/* the operator's trial: [peer site-a] for a site called sitea
	 * flooded the log without naming what the sender says it is */
	len = pack(frame, "montreal", GD_PEER_VERSION, true);
	assert_null(peer_msg_decode(frame, len, "portland", &why));
	assert_string_equal(why, "sender does not match its link: it calls "
				 "itself 'montreal' (is [peer portland] "
				 "misnamed?)");

	len = pack(frame, NULL, GD_PEER_VERSION, true);
	assert_null(peer_msg_decode(frame, len, "portland", &why));
	assert_string_equal(why, "sender does not match its link");

	/* the positive control */
	len = pack(frame, "portland", GD_PEER_VERSION, true);
	m = peer_msg_decode(frame, len, "portland", &why);
	assert_non_null(m);
	assert_null(why);
	assert_null(peer_msg_problem(m, "portland"));
	grantd__v1__peer_msg__free_unpacked(m, NULL);
	assert_string_equal(peer_msg_problem(NULL, "portland"),
			    "does not decode");
}

/* ---- the link ----------------------------------------------------------- */

struct site {
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	struct peer_self self;
};

struct calls {
	int n;
	int kind;
	char site[64];
	uint64_t from;
	int replied;
};

struct fx {
	char dir[64], sync[128], pub_ep[128];
	void *ctx;
	struct site node, portland, stranger, seattle;
	struct config_peer peers[2];
	struct peer_link *link;
	void *dl; /* a client socket a test left open when it failed */
	uint64_t dropped;
	struct calls range, vv;
};

static void keys(struct site *s, void *ctx, const char *name)
{
	assert_int_equal(zmq_curve_keypair(s->pub, s->sec), 0);
	s->self = (struct peer_self){ ctx, name, s->pub, s->sec };
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_peer.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->sync, sizeof(f->sync), "ipc://%s/sync", f->dir);
	snprintf(f->pub_ep, sizeof(f->pub_ep), "ipc://%s/pub", f->dir);
	assert_non_null(f->ctx = zmq_ctx_new());
	keys(&f->node, f->ctx, "paloalto");
	keys(&f->portland, f->ctx, "portland");
	keys(&f->stranger, f->ctx, "portland"); /* a key nobody configured */
	keys(&f->seattle, f->ctx, "seattle");
	f->peers[0].site = "portland";
	f->peers[0].sync = f->sync;
	memcpy(f->peers[0].public_key, f->portland.pub, Z85_KEY_LEN + 1);
	f->peers[1].site = "seattle"; /* a mirror */
	f->peers[1].role = CONFIG_ROLE_MIRROR;
	f->peers[1].sync = f->sync;
	memcpy(f->peers[1].public_key, f->seattle.pub, Z85_KEY_LEN + 1);
	assert_int_equal(
	        peer_open(&f->link,
	                  &(struct peer_link_opts){.self = &f->node.self,
	                                           .peers = f->peers,
	                                           .npeers = 2,
	                                           .sync = f->sync,
	                                           .maxmsg = 64 * 1024,
	                                           .dropped = &f->dropped}),
	        0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	if (f->dl)
		zmq_close(f->dl); /* zmq_ctx_term waits for every socket */
	peer_close(&f->link);
	assert_null(f->link);
	zmq_ctx_term(f->ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* The handler of one kind: note the call, answer with a VV_REQ. */
static void on_req(const struct peer_req *rq, void *payload)
{
	struct calls *c = payload;
	Grantd__V1__PeerMsg m;
	struct peer_self self = { NULL, "paloalto", NULL, NULL };

	c->n++;
	c->kind = (int)rq->m->body_case;
	snprintf(c->site, sizeof(c->site), "%s", rq->site);
	if (rq->m->body_case == GRANTD__V1__PEER_MSG__BODY_RANGE_REQ)
		c->from = rq->m->range_req->from;
	assert_true(rq->len > 0);
	peer_msg_init(&self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	if (peer_reply(rq, &m) == 0)
		c->replied++;
}

static void test_on_registration(void **state)
{
	struct fx *f = *state;

	assert_int_equal(peer_on(f->link, 0, on_req, &f->range), GD_EINVAL);
	assert_int_equal(peer_on(f->link, -1, on_req, &f->range), GD_EINVAL);
	assert_int_equal(peer_on(f->link, 1000, on_req, &f->range), GD_EINVAL);
	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ,
				 NULL, &f->range), GD_EINVAL);
	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ,
				 on_req, &f->range), 0);
	/* one owner per kind */
	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ,
				 on_req, &f->vv), GD_EINVAL);
	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_PACK_ERR,
				 on_req, &f->vv), 0);
}

/* Run the node's side of the link for a moment: answer ZAP, route. */
static void serve(struct fx *f, int ms)
{
	zmq_pollitem_t items[2];
	int k = peer_pollitems(f->link, items, 2);

	assert_int_equal(k, 2);
	zmq_poll(items, k, ms);
	peer_zap_handle(f->link);
	while (peer_route(f->link))
		;
}

/* Send m on sock once the connection is up (a DEALER with ZMQ_IMMEDIATE
 * refuses to queue before the handshake), serving the link meanwhile. */
static void send_when_up(struct fx *f, void *sock, Grantd__V1__PeerMsg *m)
{
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     clock_mono_ms() < end; serve(f, 5))
		if (peer_send(sock, m, NULL, 0) == 0)
			return;
	fail_msg("the CURVE connection never came up");
}

static void test_curve_dispatch(void **state)
{
	struct fx *f = *state;
	Grantd__V1__PeerMsg m, *got;
	Grantd__V1__RangeReq rq = GRANTD__V1__RANGE_REQ__INIT;
	Grantd__V1__SnapReq sq = GRANTD__V1__SNAP_REQ__INIT;
	void *d;
	char frame[4096];
	const char *why;
	int n = -1;

	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ,
				 on_req, &f->range), 0);
	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_VV_REQ,
				 on_req, &f->vv), 0);
	d = peer_curve_client(&f->portland.self, ZMQ_DEALER, f->sync,
			      f->node.pub, 64 * 1024);
	assert_non_null(d);

	/* a range request reaches its handler, with the site ZAP named */
	peer_msg_init(&f->portland.self, &m);
	rq.origin = "portland";
	rq.from = 5, rq.has_from = 1;
	m.body_case = GRANTD__V1__PEER_MSG__BODY_RANGE_REQ;
	m.range_req = &rq;
	send_when_up(f, d, &m);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !f->range.n && clock_mono_ms() < end;)
		serve(f, 5);
	assert_int_equal(f->range.n, 1);
	assert_int_equal(f->range.kind, GRANTD__V1__PEER_MSG__BODY_RANGE_REQ);
	assert_string_equal(f->range.site, "portland");
	assert_int_equal(f->range.from, 5);
	assert_int_equal(f->range.replied, 1);
	assert_int_equal(f->vv.n, 0);
	/* ... and its reply comes back to the asker */
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     n < 0 && clock_mono_ms() < end; usleep(1000))
		n = zmq_recv(d, frame, sizeof(frame), ZMQ_DONTWAIT);
	assert_true(n > 0);
	got = peer_msg_decode(frame, (size_t)n, "paloalto", &why);
	assert_non_null(got);
	assert_int_equal(got->body_case, GRANTD__V1__PEER_MSG__BODY_VV_REQ);
	grantd__v1__peer_msg__free_unpacked(got, NULL);

	/* another kind, another handler */
	peer_msg_init(&f->portland.self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	send_when_up(f, d, &m);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !f->vv.n && clock_mono_ms() < end;)
		serve(f, 5);
	assert_int_equal(f->vv.n, 1);
	assert_int_equal(f->range.n, 1);
	assert_int_equal(f->dropped, 0);

	/* a kind nobody registered: dropped and counted */
	peer_msg_init(&f->portland.self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_SNAP_REQ;
	m.snap_req = &sq;
	send_when_up(f, d, &m);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     f->dropped < 1 && clock_mono_ms() < end;)
		serve(f, 5);
	assert_int_equal(f->dropped, 1);

	/* a sender that is not the site of the key: dropped, never handed */
	peer_msg_init(&f->portland.self, &m);
	m.from = "montreal";
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	send_when_up(f, d, &m);
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     f->dropped < 2 && clock_mono_ms() < end;)
		serve(f, 5);
	assert_int_equal(f->dropped, 2);
	assert_int_equal(f->vv.n, 1);
	zmq_close(d);
}

static void test_curve_unknown_key_refused(void **state)
{
	struct fx *f = *state;
	Grantd__V1__PeerMsg m;
	void *d;

	assert_int_equal(peer_on(f->link, GRANTD__V1__PEER_MSG__BODY_VV_REQ,
				 on_req, &f->vv), 0);
	d = peer_curve_client(&f->stranger.self, ZMQ_DEALER, f->sync,
			      f->node.pub, 64 * 1024);
	assert_non_null(d);
	peer_msg_init(&f->stranger.self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     peer_refused(f->link) == 0 && clock_mono_ms() < end;) {
		peer_send(d, &m, NULL, 0);
		serve(f, 5);
	}
	assert_true(peer_refused(f->link) >= 1);
	/* whatever it tried never reached a handler */
	for (int i = 0; i < 20; i++)
		serve(f, 5);
	assert_int_equal(f->vv.n, 0);
	zmq_close(d);
}

static void test_curve_pub_sub(void **state)
{
	struct fx *f = *state;
	Grantd__V1__PeerMsg m, *got = NULL;
	void *pub, *sub;
	char frame[4096];
	const char *why;

	pub = peer_server(f->link, ZMQ_PUB, f->pub_ep, 1024);
	assert_non_null(pub);
	sub = peer_curve_client(&f->portland.self, ZMQ_SUB, f->pub_ep,
				f->node.pub, 1024);
	assert_non_null(sub);
	peer_msg_init(&f->node.self, &m);
	m.body_case = GRANTD__V1__PEER_MSG__BODY_VV_REQ;
	m.vv_req = 1;
	/* PUB drops until the subscriber's handshake is done: keep sending */
	for (uint64_t end = clock_mono_ms() + WAIT_MS;
	     !got && clock_mono_ms() < end;) {
		assert_int_equal(peer_send(pub, &m, NULL, 0), 0);
		serve(f, 5);
		int n = zmq_recv(sub, frame, sizeof(frame), ZMQ_DONTWAIT);
		if (n > 0)
			got = peer_msg_decode(frame, (size_t)n, "paloalto",
					      &why);
	}
	assert_non_null(got);
	assert_int_equal(got->body_case, GRANTD__V1__PEER_MSG__BODY_VV_REQ);
	grantd__v1__peer_msg__free_unpacked(got, NULL);
	zmq_close(sub);
	zmq_close(pub);
}

/* ---- the planes table, walked over the link ----------------------------- */

struct walk {
	int n[64]; /* handler calls by kind */
};

static void on_any(const struct peer_req *rq, void *payload)
{
	struct walk *w = payload;
	if ((int)rq->m->body_case < 64)
		w->n[rq->m->body_case]++;
}

/* m of kind k with an empty body of its type, from the descriptor: every
 * body case, a new one included, without knowing it. */
static void msg_of_kind(Grantd__V1__PeerMsg *m,
                        const ProtobufCFieldDescriptor *fd,
                        void *body)
{
	m->body_case = (Grantd__V1__PeerMsg__BodyCase)fd->id;
	if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
		const ProtobufCMessageDescriptor *d = fd->descriptor;
		d->message_init((ProtobufCMessage *)body);
		*(void **)((char *)m + fd->offset) = body;
	} else {
		assert_int_equal(fd->type, PROTOBUF_C_TYPE_BOOL);
		*(protobuf_c_boolean *)((char *)m + fd->offset) = 1;
	}
}

/* Every kind of PeerMsg, from a frontend's key and a mirror's key, gets
 * the table's answer on the sync ROUTER: taken (its handler runs),
 * dropped (counted, no handler) or NOT_VOTER (answered, counted, no
 * handler); an unknown key is refused by ZAP (test_curve_unknown_key_
 * refused and below). */
static void test_planes_walk(void **state)
{
	struct fx *f = *state;
	const ProtobufCMessageDescriptor *d = &grantd__v1__peer_msg__descriptor;
	struct walk w = {{0}};
	struct site *from[2] = {&f->portland, &f->seattle};
	enum plane_role roles[2] = {PLANE_FRONTEND, PLANE_MIRROR};
	int walked = 0, kinds = 0;

	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			assert_int_equal(peer_on(f->link, (int)d->fields[i].id,
			                         on_any, &w),
			                 0);
			kinds++;
		}
	for (int r = 0; r < 2; r++) {
		void *dl = peer_curve_client(&from[r]->self, ZMQ_DEALER,
		                             f->sync, f->node.pub, 64 * 1024);
		assert_non_null(dl);
		f->dl = dl;
		for (unsigned i = 0; i < d->n_fields; i++) {
			const ProtobufCFieldDescriptor *fd = &d->fields[i];
			if (!(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
				continue;
			uint64_t body[64] = {0}; /* any body's struct */
			Grantd__V1__PeerMsg m;
			int kind = (int)fd->id, before = w.n[kind];
			uint64_t dropped = f->dropped,
			         refused = peer_planes_refused(f->link);
			enum plane_answer a =
			        planes_answer(kind, PLANE_SYNC, roles[r]);
			peer_msg_init(&from[r]->self, &m);
			msg_of_kind(&m, fd, body);
			send_when_up(f, dl, &m);
			for (uint64_t end = clock_mono_ms() + WAIT_MS;
			     w.n[kind] == before && f->dropped == dropped &&
			     clock_mono_ms() < end;)
				serve(f, 5);
			if (a == PLANE_TAKE) {
				assert_int_equal(w.n[kind], before + 1);
				assert_int_equal(f->dropped, dropped);
				assert_int_equal(peer_planes_refused(f->link),
				                 refused);
				walked++;
				continue;
			}
			assert_int_equal(w.n[kind], before);
			assert_int_equal(f->dropped, dropped + 1);
			assert_int_equal(peer_planes_refused(f->link),
			                 refused + 1);
			if (a != PLANE_NOT_VOTER) {
				walked++;
				continue;
			}
			/* the refusal comes back, and holds nothing */
			char frame[4096];
			const char *why;
			int n = -1;
			for (uint64_t end = clock_mono_ms() + WAIT_MS;
			     n < 0 && clock_mono_ms() < end; usleep(1000))
				n = zmq_recv(dl, frame, sizeof(frame),
				             ZMQ_DONTWAIT);
			assert_true(n > 0);
			Grantd__V1__PeerMsg *got = peer_msg_decode(
			        frame, (size_t)n, "paloalto", &why);
			assert_non_null(got);
			if (kind == GRANTD__V1__PEER_MSG__BODY_VOTE_REQ) {
				assert_int_equal(
				        got->body_case,
				        GRANTD__V1__PEER_MSG__BODY_VOTE_REP);
				assert_int_equal(
				        got->vote_rep->verdict,
				        GRANTD__V1__VOTE_VERDICT__VOTE_NOT_VOTER);
				assert_false(got->vote_rep->has_next);
			} else {
				assert_int_equal(
				        got->body_case,
				        GRANTD__V1__PEER_MSG__BODY_USE_SYNC_REP);
				assert_false(got->use_sync_rep->voter);
				assert_int_equal(got->use_sync_rep->n_keys, 0);
			}
			grantd__v1__peer_msg__free_unpacked(got, NULL);
			walked++;
		}
		zmq_close(dl);
		f->dl = NULL;
	}
	assert_true(kinds >= 17);
	assert_int_equal(walked, 2 * kinds);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_msg_init),
	        cmocka_unit_test(test_send_framing),
	        cmocka_unit_test(test_decode_refuses),
	        cmocka_unit_test_setup_teardown(test_on_registration, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_curve_dispatch, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_curve_unknown_key_refused,
	                                        setup, teardown),
	        cmocka_unit_test_setup_teardown(test_curve_pub_sub, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_planes_walk, setup,
	                                        teardown),
	};
	log_init("test_peer", false, LOG_LVL_ERROR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
