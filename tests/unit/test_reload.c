/*
 * test_reload.c: SIGHUP's reload (node/daemon/reload.h) and what it stands
 * on.  reload_diff names every setting that differs between the running
 * configuration and the file, a peer's new key apart, and peers added or
 * removed as such; a socket's linkmon (linkmon.h) says it is stale once its
 * peer's key is not the one it was made for, and starts the new link
 * afresh; the link's ZAP handler (peer_set_key) admits a peer's new key and
 * no longer the old one.  The whole reload, three sites and SIGHUP, is
 * tests/integration/test_key_reload.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zmq.h>

#include "config.h"
#include "err.h"
#include "fixture.h"
#include "linkmon.h"
#include "peer.h"
#include "reload.h"

#define KEY_A "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define KEY_B "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
#define KEY_C "JTKVSB%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6x"

/* ---- reload_diff ----------------------------------------------------------
 */

/* What reload_diff reported: one line per call, "WHAT [SECTION] KEY PEER". */
struct seen {
	char lines[32][96];
	int n;
};

static void note(enum reload_change what,
                 const char *section,
                 const char *key,
                 int peer,
                 void *payload)
{
	static const char *const names[] = {
	        [RELOAD_CHANGED] = "changed",
	        [RELOAD_PEER_KEY] = "key",
	        [RELOAD_PEER_ADDED] = "added",
	        [RELOAD_PEER_REMOVED] = "removed",
	        [RELOAD_PEER_VKEY] = "vkey"};
	struct seen *s = payload;

	assert_true(s->n < 32);
	snprintf(s->lines[s->n++], sizeof(s->lines[0]), "%s [%s] %s %d",
	         names[what], section, key ? key : "-", peer);
}

static void peer(struct config_peer *p,
                 char *site,
                 char *publish,
                 char *sync,
                 const char *key)
{
	*p = (struct config_peer){
	        .site = site, .publish = publish, .sync = sync};
	memcpy(p->public_key, key, Z85_KEY_LEN + 1);
}

/* Two configurations alike: paloalto with peers portland and montreal. */
static void two(struct config *a, struct config *b)
{
	static char site[] = "paloalto", data[] = "/var/lib/grantd",
	            pub[] = "tcp://127.0.0.1:7401",
	            sync[] = "tcp://127.0.0.1:7402", portland[] = "portland",
	            montreal[] = "montreal", ppub[] = "tcp://127.0.0.2:7401",
	            psync[] = "tcp://127.0.0.2:7402",
	            mpub[] = "tcp://127.0.0.3:7401",
	            msync[] = "tcp://127.0.0.3:7402";

	*a = (struct config){.site = site,
	                     .data_dir = data,
	                     .publish = pub,
	                     .sync = sync,
	                     .oplog_retention = 86400};
	a->policy.totp_window = 1;
	peer(&a->peers[0], portland, ppub, psync, KEY_A);
	peer(&a->peers[1], montreal, mpub, msync, KEY_B);
	a->npeers = 2;
	*b = *a;
}

static void test_diff_same(void **state)
{
	struct config a, b;
	struct seen s = {.n = 0};
	char other[] = "/var/lib/grantd"; /* equal, not the same pointer */

	(void)state;
	two(&a, &b);
	b.data_dir = other;
	assert_int_equal(reload_diff(&a, &b, note, &s), 0);
	assert_int_equal(s.n, 0);
}

static void test_diff_names_each_change(void **state)
{
	struct config a, b;
	struct seen s = {.n = 0};
	char pub[] = "tcp://127.0.0.1:7411", sync[] = "tcp://127.0.0.3:7412",
	     home[] = "/home/git", seattle[] = "seattle",
	     vkey[] = "x/grantd/montreal+00000000+AA==";

	(void)state;
	two(&a, &b);
	b.publish = pub; /* [node] publish */
	b.gitolite_home = home; /* [gitolite] home, set from unset */
	b.policy.totp_window = 2; /* [policy] totp_window */
	b.oplog_retention = 3600; /* [node] oplog_retention */
	memcpy(b.peers[0].public_key, KEY_C, Z85_KEY_LEN + 1);
	b.peers[1].sync = sync; /* [peer montreal] sync */
	b.peers[1].role = CONFIG_ROLE_MIRROR;
	b.peers[1].verifier_key = vkey; /* [peer montreal] verifier_key */
	assert_int_equal(reload_diff(&a, &b, note, &s), 8);
	assert_string_equal(s.lines[0], "changed [node] publish -1");
	assert_string_equal(s.lines[1], "changed [node] oplog_retention -1");
	assert_string_equal(s.lines[2], "changed [policy] totp_window -1");
	assert_string_equal(s.lines[3], "changed [gitolite] home -1");
	assert_string_equal(s.lines[4], "key [peer portland] public_key 0");
	assert_string_equal(s.lines[5], "changed [peer montreal] role 1");
	assert_string_equal(s.lines[6], "changed [peer montreal] sync 1");
	assert_string_equal(s.lines[7], "vkey [peer montreal] verifier_key 1");

	/* a peer gone and one new: named, never a key change */
	s.n = 0;
	two(&a, &b);
	b.peers[1].site = seattle;
	assert_int_equal(reload_diff(&a, &b, note, &s), 2);
	assert_string_equal(s.lines[0], "removed [peer montreal] - 1");
	assert_string_equal(s.lines[1], "added [peer seattle] - -1");
}

/* ---- linkmon: a socket made for another key -------------------------------
 */

static void test_linkmon_stale(void **state)
{
	struct linkmon m = {0};

	(void)state;
	/* nothing made yet: never stale */
	assert_false(linkmon_stale(&m, KEY_A));
	linkmon_keyed(&m, KEY_A);
	assert_false(linkmon_stale(&m, KEY_A));
	assert_true(linkmon_stale(&m, KEY_B));
	/* refused with backoff: made again for the same key keeps it */
	m.state = LINKMON_HANDSHAKE_FAILED;
	m.backoff_ms = 4000;
	m.retry_at_ms = 1234;
	m.failures = 3;
	linkmon_keyed(&m, KEY_A);
	assert_int_equal(m.state, LINKMON_HANDSHAKE_FAILED);
	assert_int_equal(m.backoff_ms, 4000);
	/* ... made for a new key starts afresh (the count stays) */
	linkmon_keyed(&m, KEY_B);
	assert_false(linkmon_stale(&m, KEY_B));
	assert_true(linkmon_stale(&m, KEY_A));
	assert_int_equal(m.state, LINKMON_CONNECTING);
	assert_int_equal(m.backoff_ms, 0);
	assert_int_equal(m.retry_at_ms, 0);
	assert_int_equal(m.failures, 3);
}

/* ---- the ZAP handler takes the new key ------------------------------------
 */

struct zfx {
	void *ctx;
	char pub[Z85_KEY_LEN + 1], sec[Z85_KEY_LEN + 1];
	struct peer_self self;
	struct config_peer peers[1];
	struct peer_link *link;
	void *req; /* stands in for libzmq asking the handler */
};

static int zsetup(void **state)
{
	struct zfx *f = calloc(1, sizeof(*f));
	static char portland[] = "portland", ep[] = "tcp://127.0.0.2:7402";
	int zero = 0;

	if (!f || !(f->ctx = zmq_ctx_new()) ||
	    zmq_curve_keypair(f->pub, f->sec) != 0)
		return -1;
	f->self = (struct peer_self){f->ctx, "paloalto", f->pub, f->sec};
	peer(&f->peers[0], portland, ep, ep, KEY_A);
	if (peer_open(&f->link, &(struct peer_link_opts){.self = &f->self,
	                                                 .peers = f->peers,
	                                                 .npeers = 1,
	                                                 .maxmsg = 1024}) < 0)
		return -1;
	f->req = zmq_socket(f->ctx, ZMQ_REQ);
	zmq_setsockopt(f->req, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(f->req, "inproc://zeromq.zap.01") < 0)
		return -1;
	*state = f;
	return 0;
}

static int zteardown(void **state)
{
	struct zfx *f = *state;

	zmq_close(f->req);
	peer_close(&f->link);
	zmq_ctx_term(f->ctx);
	free(f);
	return 0;
}

/* Ask the link's ZAP handler about a CURVE client with key (Z85); the
 * status code it answers ("200", "400") into code, the user id into
 * user. */
static void zap(struct zfx *f, const char *key, char code[4], char user[32])
{
	const char *frames[] = {"1.0", "7", "grantd", "127.0.0.2", "", "CURVE"};
	uint8_t raw[32];
	char part[64];
	int n;

	assert_non_null(zmq_z85_decode(raw, key));
	for (size_t i = 0; i < 6; i++)
		assert_true(zmq_send(f->req, frames[i], strlen(frames[i]),
		                     ZMQ_SNDMORE) >= 0);
	assert_int_equal(zmq_send(f->req, raw, 32, 0), 32);
	for (int tries = 0; tries < 1000; tries++) {
		peer_zap_handle(f->link);
		zmq_pollitem_t it = {f->req, 0, ZMQ_POLLIN, 0};
		if (zmq_poll(&it, 1, 1) > 0)
			break;
	}
	/* version, request id, status code, status text, user id, metadata */
	for (int i = 0; i < 6; i++) {
		n = zmq_recv(f->req, part, sizeof(part) - 1, 0);
		assert_true(n >= 0);
		part[n] = '\0';
		if (i == 2)
			snprintf(code, 4, "%.3s", part);
		if (i == 4)
			snprintf(user, 32, "%.31s", part);
	}
}

static void test_zap_takes_new_key(void **state)
{
	struct zfx *f = *state;
	char code[4], user[32];

	zap(f, KEY_A, code, user);
	assert_string_equal(code, "200");
	assert_string_equal(user, "portland");
	zap(f, KEY_B, code, user);
	assert_string_equal(code, "400");

	assert_int_equal(peer_set_key(f->link, "portland", KEY_B), 0);
	zap(f, KEY_B, code, user);
	assert_string_equal(code, "200");
	assert_string_equal(user, "portland");
	/* the old key no longer */
	zap(f, KEY_A, code, user);
	assert_string_equal(code, "400");
	assert_int_equal(peer_refused(f->link), 2);

	/* a reload never adds a peer, nor takes a key that is not one */
	assert_int_equal(peer_set_key(f->link, "seattle", KEY_C), GD_ENOTFOUND);
	assert_int_equal(peer_set_key(f->link, "portland", "short"), GD_EINVAL);
	zap(f, KEY_B, code, user);
	assert_string_equal(code, "200");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_diff_same),
	        cmocka_unit_test(test_diff_names_each_change),
	        cmocka_unit_test(test_linkmon_stale),
	        cmocka_unit_test_setup_teardown(test_zap_takes_new_key, zsetup,
	                                        zteardown),
	};

	if (fx_group_setup("test_reload", LOG_LVL_ERROR) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, fx_group_teardown);
}
