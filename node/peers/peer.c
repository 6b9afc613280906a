/*
 * peer.c: the peer link (peer.h): PeerMsg framing, CurveZMQ sockets, the
 * ZAP handler that admits configured peers, and the sync ROUTER's
 * dispatch by message kind.  What the messages mean is repl's and
 * gitrepl's business.
 */
#include <ctype.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "linkmon.h"
#include "log.h"
#include "names.h"
#include "peer.h"
#include "planes.h"
#include "xalloc.h"
#include "banned.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN   "grantd"
/* PUB's own domain: a mirror's key is admitted on the sync ROUTER (its
 * feed, catch-up and packs) but never on PUB, which carries every
 * operation whole, secrets included (docs/mirrors.md) */
#define ZAP_DOMAIN_PUB             "grantd.pub"
#define ZMQ_ZAP_ENFORCE_DOMAIN_OPT 93 /* draft macro; honoured by 4.3.4 */
#define KINDS_MAX                  32 /* PeerMsg body cases are below */

struct handler {
	peer_fn fn;
	void *payload;
};

struct peer_link {
	const struct peer_self *self;
	const struct config_peer *peers;
	uint8_t keys[CONFIG_MAX_PEERS][32];
	int npeers;
	uint64_t *dropped;
	uint64_t own_dropped; /* when opts lent no counter */
	uint64_t refused;
	/* the last key refused, for the log (once a minute per key) and
	 * status (peer_last_refused) */
	char refused_key[Z85_KEY_LEN + 1];
	char refused_addr[64];
	uint64_t refused_log_ms;
	uint64_t planes_refused; /* frames the planes table did not take */
	uint64_t planes_log_ms;
	void *zap;
	void *router;
	struct handler on[KINDS_MAX];
};

/* ---- framing ------------------------------------------------------------ */

void peer_msg_init(const struct peer_self *self, Grantd__V1__PeerMsg *m)
{
	grantd__v1__peer_msg__init(m);
	m->version = GD_PEER_VERSION;
	m->has_version = 1;
	m->from = (char *)self->site;
	m->sent_us = clock_wall_us();
	m->has_sent_us = 1;
}

int peer_send(void *sock,
              const Grantd__V1__PeerMsg *m,
              const void *id,
              size_t idlen)
{
	size_t len = grantd__v1__peer_msg__get_packed_size(m);
	uint8_t *p = xmalloc(len ? len : 1);
	int rc = 0;

	grantd__v1__peer_msg__pack(m, p);
	if (id && zmq_send(sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
		rc = GD_EIO;
	else if (zmq_send(sock, p, len, ZMQ_DONTWAIT) < 0)
		rc = GD_EIO;
	sodium_memzero(p, len);
	free(p);
	return rc;
}

const char *peer_msg_problem(const Grantd__V1__PeerMsg *m, const char *site)
{
	if (!m)
		return "does not decode";
	if (!m->has_version || m->version != GD_PEER_VERSION)
		return "unsupported protocol version";
	if (!m->from || strcmp(m->from, site))
		return "sender does not match its link";
	return NULL;
}

Grantd__V1__PeerMsg *
peer_msg_decode(const void *p, size_t len, const char *site, const char **why)
{
	Grantd__V1__PeerMsg *m = grantd__v1__peer_msg__unpack(NULL, len, p);

	static __thread char says[200];

	*why = peer_msg_problem(m, site);
	if (!*why)
		return m;
	if (m && m->from && strcmp(m->from, site)) {
		/* a [peer] section named otherwise than the site calls itself
		 * (its key is right: ZAP let it in): name both */
		char from[NAME_SITE_MAX + 1];
		size_t i;
		for (i = 0; m->from[i] && i < sizeof(from) - 1; i++)
			from[i] = isalnum((unsigned char)m->from[i]) ||
						  strchr("._-", m->from[i]) ?
					  m->from[i] :
					  '?';
		from[i] = '\0';
		snprintf(says, sizeof(says),
			 "sender does not match its link: it calls itself "
			 "'%s' (is [peer %s] misnamed?)",
			 from, site);
		*why = says;
	}
	if (m)
		grantd__v1__peer_msg__free_unpacked(m, NULL);
	return NULL;
}

/* ---- sockets ------------------------------------------------------------ */

static void set_common(void *s, int64_t maxmsg)
{
	int zero = 0, hwm = 100000;
	zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg));
	zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
	zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
}

/* Log why endpoint could not be set up and close s; returns NULL. */
static void *socket_failed(void *s, const char *what, const char *endpoint)
{
	log_error("cannot %s endpoint=%s: %s", what, endpoint,
	          zmq_strerror(errno));
	zmq_close(s);
	return NULL;
}

void *peer_curve_client(const struct peer_self *self,
                        int type,
                        const char *endpoint,
                        const char *server_key,
                        int64_t maxmsg)
{
	return peer_curve_client_watched(self, type, endpoint, server_key,
	                                 maxmsg, NULL);
}

void *peer_curve_client_watched(const struct peer_self *self,
                                int type,
                                const char *endpoint,
                                const char *server_key,
                                int64_t maxmsg,
                                struct linkmon *mon)
{
	void *s = zmq_socket(self->zctx, type);
	int one = 1;

	if (!s)
		return NULL;
	set_common(s, maxmsg);
	if (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_key, Z85_KEY_LEN) <
	            0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, self->curve_pub,
	                   Z85_KEY_LEN) < 0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, self->curve_sec,
	                   Z85_KEY_LEN) < 0)
		return socket_failed(s, "secure", endpoint);
	if (type == ZMQ_DEALER)
		zmq_setsockopt(s, ZMQ_IMMEDIATE, &one, sizeof(one));
	if (type == ZMQ_SUB)
		zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
	/* unwatched if this fails: logged, and the link still works */
	if (mon)
		linkmon_attach(mon, self->zctx, s);
	if (zmq_connect(s, endpoint) < 0) {
		if (mon)
			linkmon_detach(mon, s);
		return socket_failed(s, "connect", endpoint);
	}
	/* only now: a socket not made keeps the old one stale (made again
	 * at the next try) */
	if (mon)
		linkmon_keyed(mon, server_key);
	return s;
}

void *
peer_server(struct peer_link *l, int type, const char *endpoint, int64_t maxmsg)
{
	void *s = zmq_socket(l->self->zctx, type);
	const char *domain = type == ZMQ_PUB ? ZAP_DOMAIN_PUB : ZAP_DOMAIN;
	int one = 1;

	if (!s)
		return NULL;
	set_common(s, maxmsg);
	/* fail closed: a socket without all of these must not exist */
	if (zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof(one)) < 0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, l->self->curve_sec,
	                   Z85_KEY_LEN) < 0 ||
	    zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) < 0 ||
	    zmq_setsockopt(s, ZMQ_ZAP_ENFORCE_DOMAIN_OPT, &one, sizeof(one)) <
	            0 ||
	    (type == ZMQ_ROUTER &&
	     zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof(one)) < 0))
		return socket_failed(s, "secure", endpoint);
	if (zmq_bind(s, endpoint) < 0)
		return socket_failed(s, "bind", endpoint);
	return s;
}

int peer_recv_frame(void *sock, zmq_msg_t *msg)
{
	zmq_msg_init(msg);
	if (zmq_msg_recv(msg, sock, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(msg);
		return 0;
	}
	return 1;
}

void peer_drain(void *sock, zmq_msg_t *last)
{
	while (zmq_msg_more(last)) {
		zmq_msg_close(last);
		zmq_msg_init(last);
		if (zmq_msg_recv(last, sock, 0) < 0)
			break;
	}
}

/* ---- ZAP ---------------------------------------------------------------- */

static void zap_reply(void *sock,
                      const char *reqid,
                      size_t idlen,
                      const char *code,
                      const char *text,
                      const char *user)
{
	zmq_send(sock, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(sock, reqid, idlen, ZMQ_SNDMORE);
	zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
	zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
	zmq_send(sock, "", 0, 0);
}

void peer_zap_handle(struct peer_link *l)
{
	zmq_msg_t f[8];
	int nf = 0, more = 1;

	while (more && nf < 8) {
		zmq_msg_init(&f[nf]);
		if (zmq_msg_recv(&f[nf], l->zap, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&f[nf]);
			if (nf == 0)
				return;
			break;
		}
		more = zmq_msg_more(&f[nf]);
		nf++;
	}
	while (more) { /* drain an oversized request */
		zmq_msg_t x;
		zmq_msg_init(&x);
		if (zmq_msg_recv(&x, l->zap, 0) < 0)
			more = 0;
		else
			more = zmq_msg_more(&x);
		zmq_msg_close(&x);
	}
	const char *site = NULL, *reason = "not CURVE";
	char addr[64] = "?";
	if (nf >= 7 && zmq_msg_size(&f[5]) == 5 &&
	    !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) &&
	    zmq_msg_size(&f[6]) == 32) {
		bool pub = zmq_msg_size(&f[2]) == strlen(ZAP_DOMAIN_PUB) &&
		           !memcmp(zmq_msg_data(&f[2]), ZAP_DOMAIN_PUB,
		                   strlen(ZAP_DOMAIN_PUB));
		reason = "unknown key";
		for (int i = 0; i < l->npeers; i++) {
			if (sodium_memcmp(zmq_msg_data(&f[6]), l->keys[i], 32))
				continue;
			if (pub && l->peers[i].role == CONFIG_ROLE_MIRROR)
				reason = "a mirror on publish (mirrors are "
				         "fed on sync)";
			else
				site = l->peers[i].site;
		}
	}
	if (nf >= 4) {
		size_t al = zmq_msg_size(&f[3]);
		if (al >= sizeof(addr))
			al = sizeof(addr) - 1;
		memcpy(addr, zmq_msg_data(&f[3]), al);
		addr[al] = '\0';
		for (size_t i = 0; i < al; i++)
			if (addr[i] < 0x20 || addr[i] > 0x7e)
				addr[i] = '?';
	}
	if (nf >= 2) {
		if (site) {
			zap_reply(l->zap, zmq_msg_data(&f[1]),
			          zmq_msg_size(&f[1]), "200", "OK", site);
		} else {
			char key[Z85_KEY_LEN + 1] = "-";
			uint64_t now = clock_mono_ms();
			l->refused++;
			if (nf >= 7 && zmq_msg_size(&f[6]) == 32)
				zmq_z85_encode(key, zmq_msg_data(&f[6]), 32);
			bool again = !strcmp(key, l->refused_key) &&
			             now - l->refused_log_ms < 60000;
			snprintf(l->refused_key, sizeof(l->refused_key), "%s",
			         key);
			snprintf(l->refused_addr, sizeof(l->refused_addr), "%s",
			         addr);
			/* a refused peer retries (linkmon.h): once a minute */
			if (!again) {
				l->refused_log_ms = now;
				log_warn(
				        "peer refused addr=%s reason=%s key=%s "
				        "refused=%llu: if it is a peer's new "
				        "key, set it as public_key of that "
				        "peer's [peer NAME] section here and "
				        "reload this node (systemctl reload "
				        "grantd, or kill -HUP)",
				        addr, reason, key,
				        (unsigned long long)l->refused);
			}
			zap_reply(l->zap, zmq_msg_data(&f[1]),
			          zmq_msg_size(&f[1]), "400", "not a peer", "");
		}
	}
	for (int i = 0; i < nf; i++)
		zmq_msg_close(&f[i]);
}

/* ---- the link ----------------------------------------------------------- */

int peer_open(struct peer_link **out, const struct peer_link_opts *o)
{
	struct peer_link *l = xcalloc(1, sizeof(*l));
	int rc = GD_EIO;

	*out = NULL;
	l->self = o->self;
	l->peers = o->peers;
	l->dropped = o->dropped ? o->dropped : &l->own_dropped;
	for (int i = 0; i < o->npeers && i < CONFIG_MAX_PEERS; i++) {
		if (!zmq_z85_decode(l->keys[i], o->peers[i].public_key)) {
			log_error("bad public_key for peer=%s",
			          o->peers[i].site);
			rc = GD_EINVAL;
			goto fail;
		}
		l->npeers++;
	}
	/* The ZAP handler first: a CURVE server without one admits anyone. */
	l->zap = zmq_socket(o->self->zctx, ZMQ_REP);
	if (!l->zap || zmq_bind(l->zap, ZAP_ENDPOINT) < 0) {
		log_error("cannot start the ZAP handler: %s",
		          zmq_strerror(errno));
		goto fail;
	}
	if (o->sync &&
	    !(l->router = peer_server(l, ZMQ_ROUTER, o->sync, o->maxmsg)))
		goto fail;
	*out = l;
	return 0;
fail:
	peer_close(&l);
	return rc;
}

void peer_close(struct peer_link **lp)
{
	struct peer_link *l = *lp;

	if (!l)
		return;
	if (l->router)
		zmq_close(l->router);
	if (l->zap)
		zmq_close(l->zap);
	free(l);
	*lp = NULL;
}

int peer_set_key(struct peer_link *l, const char *site, const char *key)
{
	uint8_t raw[32];

	if (strlen(key) != Z85_KEY_LEN || !zmq_z85_decode(raw, key))
		return GD_EINVAL;
	for (int i = 0; i < l->npeers; i++) {
		if (strcmp(l->peers[i].site, site))
			continue;
		memcpy(l->keys[i], raw, sizeof(raw));
		return 0;
	}
	return GD_ENOTFOUND;
}

int peer_on(struct peer_link *l, int kind, peer_fn fn, void *payload)
{
	if (kind <= 0 || kind >= KINDS_MAX || !fn || l->on[kind].fn)
		return GD_EINVAL;
	l->on[kind] = (struct handler){fn, payload};
	return 0;
}

int peer_reply(const struct peer_req *rq, const Grantd__V1__PeerMsg *m)
{
	return peer_send(rq->link->router, m, rq->rid, rq->ridlen);
}

int peer_pollitems(struct peer_link *l, zmq_pollitem_t *items, int max)
{
	int k = 0;

	if (k < max)
		items[k++] = (zmq_pollitem_t){l->zap, 0, ZMQ_POLLIN, 0};
	if (l->router && k < max)
		items[k++] = (zmq_pollitem_t){l->router, 0, ZMQ_POLLIN, 0};
	return k;
}

static void drop(struct peer_link *l)
{
	++*l->dropped;
}

/* The role of the peer whose key ZAP named site; PLANE_UNKNOWN for none
 * (ZAP never admits one: this is the second lock). */
static enum plane_role site_role(const struct peer_link *l, const char *site)
{
	for (int i = 0; site && i < l->npeers; i++)
		if (!strcmp(l->peers[i].site, site))
			return planes_role(l->peers[i].role);
	return PLANE_UNKNOWN;
}

/* A request the planes table does not take from role: dropped, or for
 * the vote plane answered NOT_VOTER (planes.h); counted, logged at most
 * once a second. */
static void plane_refuse(struct peer_link *l,
                         zmq_msg_t *id,
                         const Grantd__V1__PeerMsg *m,
                         const char *site,
                         enum plane_role role,
                         enum plane_answer a)
{
	const struct plane_row *row = planes_row((int)m->body_case);
	uint64_t now_ms = clock_mono_ms();

	l->planes_refused++;
	drop(l);
	if (a == PLANE_NOT_VOTER) {
		Grantd__V1__PeerMsg out;
		struct plane_refusal st;
		peer_msg_init(l->self, &out);
		if (planes_refusal(m, &out, &st))
			peer_send(l->router, &out, zmq_msg_data(id),
			          zmq_msg_size(id));
	}
	if (l->planes_log_ms && now_ms - l->planes_log_ms < 1000)
		return;
	l->planes_log_ms = now_ms;
	log_warn("peer request refused peer=%s role=%s kind=%s answer=%s "
	         "planes_refused=%llu",
	         site, planes_role_name(role), row ? row->name : "unknown",
	         planes_answer_name(a), (unsigned long long)l->planes_refused);
}

/* One decoded request to whoever registered its kind. */
static void
dispatch(struct peer_link *l, zmq_msg_t *id, zmq_msg_t *body, const char *site)
{
	const char *why;
	Grantd__V1__PeerMsg *m = peer_msg_decode(
	        zmq_msg_data(body), zmq_msg_size(body), site, &why);

	if (!m) {
		static struct log_limit lim;
		uint64_t held;
		drop(l);
		if (log_limit_pass(&lim, clock_mono_ms(), LOG_LIMIT_MS, &held))
			log_warn("peer message dropped peer=%s: %s dropped=%llu "
			         "(%llu more such lines held back)",
			         site, why, (unsigned long long)*l->dropped,
			         (unsigned long long)held);
		return;
	}
	int kind = (int)m->body_case;
	enum plane_role role = site_role(l, site);
	enum plane_answer a = planes_answer(kind, PLANE_SYNC, role);
	if (a != PLANE_TAKE) {
		plane_refuse(l, id, m, site, role, a);
	} else if (kind > 0 && kind < KINDS_MAX && l->on[kind].fn) {
		struct peer_req rq = {
		        .link = l,
		        .rid = zmq_msg_data(id),
		        .ridlen = zmq_msg_size(id),
		        .site = site,
		        .m = m,
		        .frame = zmq_msg_data(body),
		        .len = zmq_msg_size(body),
		};
		l->on[kind].fn(&rq, l->on[kind].payload);
	} else {
		drop(l);
	}
	grantd__v1__peer_msg__free_unpacked(m, NULL);
}

int peer_route(struct peer_link *l)
{
	zmq_msg_t id, body;

	if (!l->router || !peer_recv_frame(l->router, &id))
		return 0;
	if (!zmq_msg_more(&id) || !peer_recv_frame(l->router, &body)) {
		zmq_msg_close(&id);
		return 1;
	}
	/* the User-Id is what ZAP answered: the site of the peer's key */
	const char *site = zmq_msg_gets(&body, "User-Id");
	if (zmq_msg_more(&body) || site_role(l, site) == PLANE_UNKNOWN) {
		peer_drain(l->router, &body);
		drop(l);
	} else {
		dispatch(l, &id, &body, site);
	}
	zmq_msg_close(&body);
	zmq_msg_close(&id);
	return 1;
}

void *peer_router(struct peer_link *l)
{
	return l->router;
}

uint64_t peer_refused(struct peer_link *l)
{
	return l->refused;
}

const char *peer_last_refused(struct peer_link *l, const char **addr)
{
	*addr = l->refused_addr;
	return l->refused ? l->refused_key : NULL;
}

uint64_t peer_planes_refused(struct peer_link *l)
{
	return l->planes_refused;
}

uint64_t peer_dropped(const struct peer_link *l)
{
	return *l->dropped;
}
