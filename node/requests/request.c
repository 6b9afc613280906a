/*
 * request.c: reading, checking and answering one request (request.h).
 *
 * Both threads use these on their own sockets: the reader on the user
 * and admin sockets, the writer on the reader's pipe.  Every frame that
 * may hold a secret is wiped once copied.
 */
#include <errno.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "addr.h"
#include "cmd.h"
#include "err.h"
#include "log.h"
#include "names.h"
#include "request.h"
#include "wire.h"
#include "xalloc.h"
#include "banned.h"

void request_log_failed(const struct req *r, int err)
{
	log_error("request failed cmd=%s socket=%s%s%s: %s", r->rq->cmd,
		  r->admin ? "admin" : "user", r->rq->user ? " user=" : "",
		  r->rq->user ? r->rq->user : "", gd_strerror(err));
}

/* ---- decoding ----------------------------------------------------------- */

static bool printable(const char *s, size_t max)
{
	size_t n = strnlen(s, max + 1);
	if (n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

/* What is wrong with rq (NULL: nothing). */
static const char *request_problem(const Grantd__V1__Request *rq)
{
	if (!rq->has_version || rq->version != GD_WIRE_VERSION)
		return "unsupported protocol version (client and node differ?)";
	if (!rq->cmd || !*rq->cmd || !printable(rq->cmd, 32))
		return "missing or bad command name";
	if (rq->n_args > GD_CTL_MAX_ARGS)
		return "too many arguments";
	if (rq->user && !name_user_ok(rq->user))
		return "bad user name";
	if (rq->client_ip && !printable(rq->client_ip, ADDR_STRLEN))
		return "bad client address";
	if (rq->session && !printable(rq->session, 128))
		return "bad session id";
	if (rq->key_kind && !printable(rq->key_kind, 16))
		return "bad key kind";
	for (size_t i = 0; i < rq->n_args; i++)
		if (!rq->args[i] || !printable(rq->args[i], 16384))
			return "bad argument (too long or control characters)";
	return NULL;
}

int request_decode(Grantd__V1__Request **out, const uint8_t *data,
		   size_t len, ProtobufCAllocator *al, struct buf *err)
{
	Grantd__V1__Request *rq;
	const char *why;

	*out = NULL;
	if (len > GD_CTL_MAX_REQUEST) {
		buf_puts(err, "request too large");
		return GD_ETOOBIG;
	}
	rq = grantd__v1__request__unpack(al, len, data);
	if (!rq) {
		buf_puts(err, "request does not decode");
		return GD_EPROTO;
	}
	if ((why = request_problem(rq))) {
		buf_puts(err, why);
		grantd__v1__request__free_unpacked(rq, al);
		return GD_EPROTO;
	}
	*out = rq;
	return 0;
}

/* ---- the socket ----------------------------------------------------------- */

int request_recv(void *sock, struct buf *ident, struct buf *payload)
{
	int frame = 0, more = 1, rc = 1;

	buf_reset(ident);
	/* only what the last request wrote: the rest is still zero (the
	 * whole capacity each time cost a 64 KiB memset a request) */
	if (payload->p)
		sodium_memzero(payload->p, payload->len);
	buf_reset(payload);
	if (payload->cap < GD_CTL_MAX_REQUEST + 1) {
		buf_extend(payload, GD_CTL_MAX_REQUEST);
		buf_reset(payload);
	}
	while (more) {
		zmq_msg_t m;
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, sock, frame ? 0 : ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return frame ? GD_EIO : 0;
		}
		size_t len = zmq_msg_size(&m);
		if (frame == 1 && len != 0)
			rc = GD_EPROTO;
		else if (frame >= REQUEST_MAX_FRAMES ||
			 (frame >= 2 && len > GD_CTL_MAX_REQUEST - payload->len))
			rc = rc == 1 ? GD_ETOOBIG : rc;
		if (frame == 0 && len <= 256)
			buf_add(ident, zmq_msg_data(&m), len);
		else if (frame >= 2 && rc == 1)
			buf_add(payload, zmq_msg_data(&m), len);
		more = zmq_msg_more(&m);
		if (frame >= 2)
			sodium_memzero(zmq_msg_data(&m), len);
		zmq_msg_close(&m);
		frame++;
	}
	if (rc == 1 && frame < 3)
		rc = GD_EPROTO;
	if (rc < 0)
		sodium_memzero(payload->p, payload->len);
	return rc;
}

/* r's answer as a Reply (pointing into r). */
static void reply_of(const struct req *r, Grantd__V1__Reply *rep)
{
	SET(*rep, status, r->status);
	rep->out = r->out.len ? r->out.p : NULL;
	rep->err = r->err.len ? r->err.p : NULL;
	rep->otpauth_uri = r->uri.len ? r->uri.p : NULL;
	rep->path = r->path.len ? r->path.p : NULL;
	rep->factor = (char *)r->factor;
	rep->next = r->next[0] ? (char *)r->next : NULL;
}

uint8_t *request_pack_reply(const struct req *r, size_t *len)
{
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;
	uint8_t *frame;

	reply_of(r, &rep);
	*len = grantd__v1__reply__get_packed_size(&rep);
	frame = xmalloc(*len ? *len : 1);
	grantd__v1__reply__pack(&rep, frame);
	return frame;
}

void request_pack_reply_to(const struct req *r, struct buf *out)
{
	Grantd__V1__Reply rep = GRANTD__V1__REPLY__INIT;

	reply_of(r, &rep);
	size_t len = grantd__v1__reply__get_packed_size(&rep);
	grantd__v1__reply__pack(&rep, buf_extend(out, len));
}

void request_send_reply(struct req *r)
{
	size_t len;
	uint8_t *frame = request_pack_reply(r, &len);

	/* never block the node on a client that does not read its answers */
	if (zmq_send(r->sock, r->ident.p, r->ident.len,
		     ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
	    zmq_send(r->sock, frame, len, ZMQ_DONTWAIT) < 0)
		log_warn("reply not delivered: %s", zmq_strerror(errno));
	/* the reply may hold a fresh secret (enroll) */
	sodium_memzero(frame, len);
	free(frame);
}

void request_free(struct req *r)
{
	/* arguments may carry a secret (grantctl enroll --secret) */
	for (size_t i = 0; r->rq && i < r->rq->n_args; i++)
		sodium_memzero(r->rq->args[i], strlen(r->rq->args[i]));
	if (r->rq)
		grantd__v1__request__free_unpacked(r->rq, r->rq_al);
	if (r->out.p)
		sodium_memzero(r->out.p, r->out.len);
	if (r->uri.p)
		sodium_memzero(r->uri.p, r->uri.len);
	buf_free(&r->out);
	buf_free(&r->err);
	buf_free(&r->uri);
	buf_free(&r->path);
	buf_free(&r->ident);
}

void request_refuse_oversized(struct req *r, void *sock, bool admin)
{
	log_warn("bad request dropped socket=%s: more than %d frames or %d "
		 "bytes", admin ? "admin" : "user", REQUEST_MAX_FRAMES,
		 GD_CTL_MAX_REQUEST);
	r->sock = sock;
	cmd_bad(r, "bad request: request too large (at most %d bytes in %d "
	    "frames)", GD_CTL_MAX_REQUEST, REQUEST_MAX_FRAMES - 2);
	request_send_reply(r);
	request_free(r);
	memset(r, 0, sizeof(*r));
}
