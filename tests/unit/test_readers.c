/*
 * test_readers.c: node/requests/readers.h, the reader thread.
 *
 * A real store, a real reader thread on real unix sockets, and clients
 * that speak the control protocol as grant-keys and grantctl do.  The
 * writer is played by the test: it reads the pipe only when a test says
 * so, which shows that reads never wait for it.
 *   - reads are answered by the reader alone, from its view;
 *   - a write is forwarded whole to the writer, and its answer comes back
 *     to the client through the reader;
 *   - two connections' writes are answered each on its own connection,
 *     and a read sent after a write on one connection comes after it;
 *   - a view shows a change only once the writer publishes it;
 *   - the syncing flag the writer publishes gates the 2fa reads;
 *   - status is answered here from the parts the writer published, each
 *     replaced one freed, its counts those of the last publish.
 *   - the keys socket answers keys.find's line from the view, beside the
 *     control sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <zmq.h>

#include "buf.h"
#include "cmd.h"
#include "config.h"
#include "err.h"
#include "fixture.h"
#include "log.h"
#include "ops.h"
#include "readers.h"
#include "records.h"
#include "store.h"
#include "wire.h"

static const uint8_t seal_key[STORE_SEAL_KEY_LEN] =
	"test_readers seal key 012345678";

#define KEY_ALICE \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHLAx+6EsJuGELLoK4oqtzjiFQlr/4K" \
	"ExvUYKBZ/LSGg alice"
/* her own key: one held by two users is given to neither (N10) */
#define KEY_CAROL \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEWuuLqSu0UirsAx+vv03CUovDxPac2" \
	"p7i4tp3nFhkSX carol"

#define KEY_DAVE \
	"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAuc8SO7A3ydipqiZeukHEEvZi4vYgPpv" \
	"Xsa0u7KHFj8 dave"

struct fixture {
	char dir[64];
	char user_sock[96], admin_sock[96], keys_sock[96], repo_dir[96];
	struct config cfg;
	struct store *s;
	struct ops *o;
	void *zctx;
	struct readers *rd;
	int user, admin;      /* clients' connections (wire.h) */
};

static int setup_group(void **state)
{
	(void)state;
	return fx_group_setup("test_readers", LOG_LVL_ERROR);
}

/* A user with one key, committed (straight to the store: no writer). */
static void add_user(struct fixture *f, const char *name, const char *key)
{
	Grantd__V1__Op op = GRANTD__V1__OP__INIT;
	Grantd__V1__User u = GRANTD__V1__USER__INIT;
	char *keys[1] = { (char *)key };
	struct store_batch *b;

	u.name = (char *)name;
	u.keys = keys;
	u.n_keys = 1;
	op.body_case = GRANTD__V1__OP__BODY_USER;
	op.user = &u;
	store_batch_new(&b, f->s);
	assert_int_equal(ops_local(f->o, b, &op), 0);
	assert_int_equal(ops_commit(f->o, b, false), 0);
	ops_outbox_clear(f->o);
	store_batch_free(&b);
}

static int client(const char *path)
{
	int fd = wire_connect(path, 10000);

	assert_true(fd >= 0);
	return fd;
}

static int start(void **state, bool syncing)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct store_batch *view;

	if (!f || fx_mkdtemp(f->dir, sizeof(f->dir), "test_readers", false) < 0)
		return -1;
	snprintf(f->repo_dir, sizeof(f->repo_dir), "%s/repos", f->dir);
	snprintf(f->user_sock, sizeof(f->user_sock), "%s/user.sock", f->dir);
	snprintf(f->admin_sock, sizeof(f->admin_sock), "%s/admin.sock",
		 f->dir);
	snprintf(f->keys_sock, sizeof(f->keys_sock), "%s/keys.sock", f->dir);
	f->cfg.site = "reader1";
	f->cfg.repo_dir = f->repo_dir;
	f->cfg.user_socket = f->user_sock;
	f->cfg.admin_socket = f->admin_sock;
	f->cfg.keys_socket = f->keys_sock;
	f->cfg.policy.lockout_failures = 5;
	f->cfg.policy.lockout_window = 900;
	if (fx_store_open(&f->s, &f->o, f->dir, &f->cfg, seal_key) < 0)
		return -1;
	add_user(f, "alice", KEY_ALICE);
	f->zctx = zmq_ctx_new();
	store_view_new(&view, f->s);
	struct readers_opts o = { .cfg = &f->cfg, .store = f->s,
				  .host = "test",
				  .zctx = f->zctx, .view = view,
				  .syncing = syncing };
	if (readers_start(&f->rd, &o) < 0)
		return -1;
	f->user = client(f->user_sock);
	f->admin = client(f->admin_sock);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return start(state, false);
}

/* A node that starts while catching up with its peers. */
static int setup_syncing(void **state)
{
	return start(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	close(f->user);
	close(f->admin);
	readers_stop(&f->rd);
	zmq_ctx_term(f->zctx);
	fx_store_close(&f->s, &f->o);
	if (fx_rmtree(f->dir) < 0)
		return -1;
	free(f);
	return 0;
}

/* Send one request; args NULL-terminated. */
static void send_req(int sock, const char *cmd, const char *user,
		     const char *ip, ...)
{
	Grantd__V1__Request rq = GRANTD__V1__REQUEST__INIT;
	char *args[8];
	va_list ap;
	const char *a;
	uint8_t frame[1024];

	rq.version = GD_WIRE_VERSION, rq.has_version = 1;
	rq.cmd = (char *)cmd;
	rq.user = (char *)user;
	rq.client_ip = (char *)ip;
	va_start(ap, ip);
	while ((a = va_arg(ap, const char *)) && rq.n_args < 8)
		args[rq.n_args++] = (char *)a;
	va_end(ap);
	rq.args = args;
	size_t len = grantd__v1__request__get_packed_size(&rq);
	assert_true(len <= sizeof(frame));
	grantd__v1__request__pack(&rq, frame);
	assert_int_equal(wire_send(sock, frame, len, 10000), 0);
}

/* Receive the reply: its status, out and err (NULL-safe). */
static int recv_reply(int sock, struct buf *out, struct buf *err)
{
	uint8_t *frame;
	size_t n;
	Grantd__V1__Reply *rep;
	int status;

	assert_int_equal(wire_recv(sock, &frame, &n, 10000), 0);
	rep = grantd__v1__reply__unpack(NULL, n, frame);
	free(frame);
	assert_non_null(rep);
	status = rep->status;
	buf_reset(out);
	buf_reset(err);
	if (rep->out)
		buf_puts(out, rep->out);
	if (rep->err)
		buf_puts(err, rep->err);
	grantd__v1__reply__free_unpacked(rep, NULL);
	return status;
}

/* A read is answered by the reader alone: the writer's end of the pipe is
 * never read here. */
static void test_read_answered_without_writer(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT;

	send_req(f->user, "keys.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	assert_non_null(strstr(out.p, "alice\t" KEY_ALICE));
	send_req(f->admin, "user.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "alice"));
	/* a read not allowed on the socket is refused here too */
	send_req(f->user, "user.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), GD_EXIT_REFUSED);
	buf_free(&out);
	buf_free(&err);
}

/* Read one forwarded request from the writer's end. */
static void writer_recv(struct fixture *f, struct buf *ident,
			Grantd__V1__Request **rq)
{
	void *pipe = readers_pipe(f->rd);
	zmq_pollitem_t it = { pipe, 0, ZMQ_POLLIN, 0 };
	zmq_msg_t m;
	int frame = 0;

	assert_int_equal(zmq_poll(&it, 1, 10000), 1);
	buf_reset(ident);
	for (int more = 1; more; frame++) {
		zmq_msg_init(&m);
		assert_true(zmq_msg_recv(&m, pipe, 0) >= 0);
		if (frame == 0)
			buf_add(ident, zmq_msg_data(&m), zmq_msg_size(&m));
		else if (frame == 1)
			assert_int_equal(zmq_msg_size(&m), 0);
		else
			*rq = grantd__v1__request__unpack(
				NULL, zmq_msg_size(&m), zmq_msg_data(&m));
		more = zmq_msg_more(&m);
		zmq_msg_close(&m);
	}
	assert_int_equal(frame, 3);
	assert_non_null(*rq);
}

/* Wait until the reader has taken everything sent on the pipe so far (a
 * publish, say): a forwarded request answered through the pipe comes back
 * only after what was queued before it. */
static void reader_barrier(struct fixture *f)
{
	struct buf out = BUF_INIT, err = BUF_INIT, ident = BUF_INIT;
	Grantd__V1__Request *rq = NULL;
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	void *pipe = readers_pipe(f->rd);
	uint8_t frame[64];
	size_t len;

	send_req(f->admin, "user.add", NULL, NULL, "barrier", NULL);
	writer_recv(f, &ident, &rq);
	grantd__v1__request__free_unpacked(rq, NULL);
	rep.status = 0, rep.has_status = 1;
	len = grantd__v1__reply__get_packed_size(&rep);
	grantd__v1__reply__pack(&rep, frame);
	assert_true(zmq_send(pipe, ident.p, ident.len, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, "", 0, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, frame, len, 0) >= 0);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	buf_free(&out);
	buf_free(&err);
	buf_free(&ident);
}

/* A write goes to the writer whole, and its answer back to the client. */
static void test_write_forwarded(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT, ident = BUF_INIT;
	Grantd__V1__Request *rq = NULL;
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	uint8_t frame[256];

	send_req(f->admin, "user.add", NULL, NULL, "bob", NULL);
	writer_recv(f, &ident, &rq);
	assert_int_equal(((uint8_t *)ident.p)[0], 1); /* the admin socket */
	assert_string_equal(rq->cmd, "user.add");
	assert_string_equal(rq->args[0], "bob");
	grantd__v1__request__free_unpacked(rq, NULL);
	/* meanwhile reads go on */
	send_req(f->user, "keys.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	/* the writer answers through the pipe */
	rep.status = 0, rep.has_status = 1;
	rep.out = "user bob added";
	size_t len = grantd__v1__reply__get_packed_size(&rep);
	grantd__v1__reply__pack(&rep, frame);
	void *pipe = readers_pipe(f->rd);
	assert_true(zmq_send(pipe, ident.p, ident.len, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, "", 0, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, frame, len, 0) >= 0);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_string_equal(out.p, "user bob added");
	buf_free(&out);
	buf_free(&err);
	buf_free(&ident);
}

/* The writer's answer text (status 0) to the request ident names. */
static void writer_answer(struct fixture *f, const struct buf *ident,
			  const char *text)
{
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	uint8_t frame[256];
	void *pipe = readers_pipe(f->rd);

	rep.status = 0, rep.has_status = 1;
	rep.out = (char *)text;
	size_t len = grantd__v1__reply__get_packed_size(&rep);
	grantd__v1__reply__pack(&rep, frame);
	assert_true(zmq_send(pipe, ident->p, ident->len, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, "", 0, ZMQ_SNDMORE) >= 0);
	assert_true(zmq_send(pipe, frame, len, 0) >= 0);
}

/* Two connections of the user socket with a write each at the writer:
 * each answer goes to its own connection, whatever the writer's order,
 * and a read sent after a write on the same connection is answered after
 * it (a connection's answers come in the order of its requests). */
static void test_forwarded_to_its_connection(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT, id1 = BUF_INIT,
		   id2 = BUF_INIT;
	Grantd__V1__Request *rq = NULL;
	int u2 = client(f->user_sock);

	send_req(f->user, "2fa.val", "alice", "127.0.0.1", "123456", NULL);
	send_req(f->user, "keys.list", NULL, NULL, NULL);
	writer_recv(f, &id1, &rq);
	assert_int_equal(((uint8_t *)id1.p)[0], 0); /* the user socket */
	assert_string_equal(rq->cmd, "2fa.val");
	grantd__v1__request__free_unpacked(rq, NULL);
	send_req(u2, "2fa.val", "alice", "127.0.0.2", "654321", NULL);
	writer_recv(f, &id2, &rq);
	assert_string_equal(rq->client_ip, "127.0.0.2");
	grantd__v1__request__free_unpacked(rq, NULL);
	assert_false(id1.len == id2.len && !memcmp(id1.p, id2.p, id1.len));
	/* the second connection's first */
	writer_answer(f, &id2, "for the second");
	assert_int_equal(recv_reply(u2, &out, &err), 0);
	assert_string_equal(out.p, "for the second");
	writer_answer(f, &id1, "for the first");
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	assert_string_equal(out.p, "for the first");
	/* then the read it sent after the write */
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	assert_non_null(strstr(out.p, "alice\t" KEY_ALICE));
	close(u2);
	buf_free(&out);
	buf_free(&err);
	buf_free(&id1);
	buf_free(&id2);
}

/* A change shows in reads only once the writer publishes a view that has
 * it (the writer does so when the change is durable). */
static void test_view_published(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT;
	struct store_batch *v;

	add_user(f, "carol", KEY_CAROL); /* written, not published */
	send_req(f->user, "keys.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	assert_null(strstr(out.p, "carol"));
	store_view_new(&v, f->s);
	readers_publish(f->rd, v, false);
	reader_barrier(f);
	send_req(f->user, "keys.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), 0);
	assert_non_null(strstr(out.p, "carol\t" KEY_CAROL));
	buf_free(&out);
	buf_free(&err);
}

/* The syncing flag comes from the writer: while set, the 2fa reads are
 * refused on the user socket. */
static void test_syncing_gate(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT;

	readers_publish(f->rd, NULL, true);
	reader_barrier(f);
	send_req(f->user, "2fa.isval", "alice", "192.0.2.7", NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), GD_EXIT_REFUSED);
	assert_non_null(strstr(err.p, "catching up"));
	readers_publish(f->rd, NULL, false);
	reader_barrier(f);
	send_req(f->user, "2fa.isval", "alice", "192.0.2.7", NULL);
	recv_reply(f->user, &out, &err);
	assert_null(strstr(err.p, "catching up"));
	buf_free(&out);
	buf_free(&err);
}

/* cJSON allocations not yet freed, on any thread. */
static long cjson_live;

static void *count_malloc(size_t n)
{
	__atomic_add_fetch(&cjson_live, 1, __ATOMIC_SEQ_CST);
	return malloc(n);
}

static void count_free(void *p)
{
	if (p)
		__atomic_sub_fetch(&cjson_live, 1, __ATOMIC_SEQ_CST);
	free(p);
}

/* What repl and gitrepl would render (cmd_status_repl), by hand. */
static cJSON *repl_part(double refused)
{
	cJSON *j = cJSON_CreateObject();
	cJSON *p = cJSON_CreateObject();

	cJSON_AddStringToObject(p, "site", "reader2");
	cJSON_AddBoolToObject(p, "connected", true);
	cJSON_AddNumberToObject(p, "last_heard_ms", 12);
	cJSON_AddNumberToObject(p, "lag_ops", 3);
	cJSON_AddNumberToObject(p, "lag_ms", 40);
	cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "peers"), p);
	cJSON_AddObjectToObject(j, "replication");
	cJSON_AddNumberToObject(j, "refused_peers", refused);
	cJSON_AddStringToObject(cJSON_AddObjectToObject(j, "quorum"), "mode",
				"local");
	return j;
}

/* status is answered by the reader while nobody reads the writer's pipe,
 * from the parts last published: a count changes only with a publish,
 * and every part replaced (taken or not) is freed. */
static void test_status(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT;
	int64_t now = (int64_t)time(NULL);

	cJSON_InitHooks(&(cJSON_Hooks){ count_malloc, count_free });
	/* nothing published yet: refused, not guessed */
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), GD_EXIT_REFUSED);
	readers_publish_status(f->rd, cmd_status_store(f->o, now),
			       repl_part(0));
	reader_barrier(f);
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "site:     reader1\n"));
	assert_non_null(strstr(out.p, "users:    1\n"));
	assert_non_null(strstr(out.p, "peer:     reader2 connected "
				      "last_heard_ms=12 lag_ops=3 lag_ms=40\n"));
	/* what the operator's trial found unreadable: the clock readable,
	 * dropped named, no voter figure without a vote, syncing always */
	assert_non_null(strstr(out.p, "syncing:  no\n"));
	assert_non_null(strstr(out.p, " UTC +"));
	assert_non_null(strstr(out.p, "dropped:  0 peer messages refused"));
	assert_non_null(strstr(out.p, "quorum:   local (each site"));
	assert_null(strstr(out.p, "voter="));
	/* written, not published: status still says 1 */
	add_user(f, "carol", KEY_CAROL);
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "users:    1\n"));
	/* two publishes before the reader looks: the first is freed unseen */
	readers_publish_status(f->rd, cmd_status_store(f->o, now), NULL);
	readers_publish_status(f->rd, cmd_status_store(f->o, now),
			       repl_part(7));
	reader_barrier(f);
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "users:    2\n"));
	readers_stop(&f->rd);
	assert_int_equal(__atomic_load_n(&cjson_live, __ATOMIC_SEQ_CST), 0);
	cJSON_InitHooks(NULL);
	buf_free(&out);
	buf_free(&err);
}

/* A reader started while the node syncs: status and the gate agree, and
 * a status publish (which carries no syncing flag) changes neither. */
static void test_syncing_from_start(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, err = BUF_INIT;

	readers_publish_status(f->rd, cmd_status_store(f->o, time(NULL)),
			       repl_part(0));
	reader_barrier(f);
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "syncing:  yes"));
	send_req(f->user, "2fa.isval", "alice", "192.0.2.7", NULL);
	assert_int_equal(recv_reply(f->user, &out, &err), GD_EXIT_REFUSED);
	assert_non_null(strstr(err.p, "catching up"));
	readers_publish(f->rd, NULL, false);
	reader_barrier(f);
	send_req(f->admin, "status", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->admin, &out, &err), 0);
	assert_non_null(strstr(out.p, "syncing:  no\n"));
	send_req(f->user, "2fa.isval", "alice", "192.0.2.7", NULL);
	recv_reply(f->user, &out, &err);
	assert_null(strstr(err.p, "catching up"));
	buf_free(&out);
	buf_free(&err);
}

/* One lookup on the keys socket (keysock.h): the whole answer. */
static void keys_ask(struct fixture *f, const char *line, struct buf *out)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	char chunk[512];
	ssize_t n;

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->keys_sock);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(send(fd, line, strlen(line), MSG_NOSIGNAL),
			 (ssize_t)strlen(line));
	buf_reset(out);
	while ((n = recv(fd, chunk, sizeof(chunk), 0)) > 0)
		buf_add(out, chunk, (size_t)n);
	assert_int_equal(n, 0);
	buf_add(out, "", 1);
	close(fd);
}

/* The keys socket: keys.find's answer from the newest view, while the
 * writer reads nothing; a change only once published. */
static void test_keys_socket(void **state)
{
	struct fixture *f = *state;
	struct buf out = BUF_INIT, line = BUF_INIT;
	char fp[RECORDS_FP_MAX];
	struct store_batch *v;

	assert_int_equal(records_ssh_fingerprint(fp, KEY_ALICE), 0);
	buf_printf(&line, "%s\n", fp);
	keys_ask(f, line.p, &out);
	assert_string_equal(out.p, "alice\t" KEY_ALICE "\n");
	keys_ask(f, "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
		 &out);
	assert_string_equal(out.p, "");
	/* what keys.find refuses, with its exit status */
	keys_ask(f, "not-a-fingerprint\n", &out);
	assert_true(!strncmp(out.p, "!2 ", 3));
	assert_non_null(strstr(out.p, "no key fingerprint"));
	/* dave's record is written, not yet published */
	add_user(f, "dave", KEY_DAVE);
	assert_int_equal(records_ssh_fingerprint(fp, KEY_DAVE), 0);
	buf_reset(&line);
	buf_printf(&line, "%s\n", fp);
	keys_ask(f, line.p, &out);
	assert_string_equal(out.p, "");
	store_view_new(&v, f->s);
	readers_publish(f->rd, v, false);
	reader_barrier(f); /* the view is the reader's now */
	keys_ask(f, line.p, &out);
	assert_string_equal(out.p, "dave\t" KEY_DAVE "\n");
	/* the control sockets answer beside it */
	struct buf o2 = BUF_INIT, e2 = BUF_INIT;
	send_req(f->user, "keys.list", NULL, NULL, NULL);
	assert_int_equal(recv_reply(f->user, &o2, &e2), 0);
	assert_non_null(strstr(o2.p, "dave"));
	buf_free(&o2);
	buf_free(&e2);
	buf_free(&out);
	buf_free(&line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_read_answered_without_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_forwarded_to_its_connection,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_forwarded, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_view_published, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_syncing_gate, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_syncing_from_start,
						setup_syncing, teardown),
		cmocka_unit_test_setup_teardown(test_keys_socket, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, setup_group, fx_group_teardown);
}
