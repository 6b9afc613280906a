/*
 * linkmon.c: handshake events of a client socket, and when to make it
 * again (linkmon.h).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "err.h"
#include "linkmon.h"
#include "log.h"
#include "banned.h"

#define EVENTS                                                                 \
	(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |                                \
	 ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | \
	 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

/* inproc names are per context; sockets of several threads are watched */
static atomic_uint next_id;

int linkmon_attach(struct linkmon *m, void *zctx, void *sock)
{
	char ep[64];
	int zero = 0;

	m->pair = NULL;
	snprintf(ep, sizeof(ep), "inproc://grantd-linkmon-%u",
	         atomic_fetch_add(&next_id, 1));
	if (zmq_socket_monitor(sock, ep, EVENTS) < 0) {
		log_error("cannot watch a peer socket: %s",
		          zmq_strerror(errno));
		return GD_EIO;
	}
	m->pair = zmq_socket(zctx, ZMQ_PAIR);
	if (!m->pair)
		goto fail;
	zmq_setsockopt(m->pair, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_connect(m->pair, ep) < 0)
		goto fail;
	return 0;
fail:
	log_error("cannot watch a peer socket: %s", zmq_strerror(errno));
	if (m->pair)
		zmq_close(m->pair);
	m->pair = NULL;
	zmq_socket_monitor(sock, NULL, 0);
	return GD_EIO;
}

void linkmon_detach(struct linkmon *m, void *sock)
{
	if (!m->pair)
		return;
	zmq_socket_monitor(sock, NULL, 0);
	zmq_close(m->pair);
	m->pair = NULL;
}

void linkmon_keyed(struct linkmon *m, const char *server_key)
{
	if (m->key[0] && strcmp(m->key, server_key)) {
		m->state = LINKMON_CONNECTING;
		m->retry_at_ms = 0;
		m->backoff_ms = 0;
		m->code = 0;
	}
	snprintf(m->key, sizeof(m->key), "%s", server_key);
}

bool linkmon_stale(const struct linkmon *m, const char *server_key)
{
	return m->key[0] && strcmp(m->key, server_key) != 0;
}

const char *linkmon_state_name(enum linkmon_state s)
{
	switch (s) {
	case LINKMON_UP:
		return "up";
	case LINKMON_KEY_REFUSED:
		return "key_refused";
	case LINKMON_HANDSHAKE_FAILED:
		return "handshake_failed";
	case LINKMON_CONNECTING:
		break;
	}
	return "connecting";
}

/* One event: 2 frames, (uint16 event, uint32 value) and the endpoint. */
static int read_event(void *pair, uint16_t *ev, uint32_t *value)
{
	zmq_msg_t f;
	int got = 0;

	zmq_msg_init(&f);
	if (zmq_msg_recv(&f, pair, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&f);
		return 0;
	}
	if (zmq_msg_size(&f) == 6) {
		const uint8_t *d = zmq_msg_data(&f);
		memcpy(ev, d, 2);
		memcpy(value, d + 2, 4);
		got = 1;
	}
	while (zmq_msg_more(&f)) {
		zmq_msg_close(&f);
		zmq_msg_init(&f);
		if (zmq_msg_recv(&f, pair, 0) < 0)
			break;
	}
	zmq_msg_close(&f);
	return got;
}

bool linkmon_poll(struct linkmon *m, uint64_t now_ms, const char *what)
{
	uint16_t ev;
	uint32_t value;

	while (m->pair && read_event(m->pair, &ev, &value)) {
		if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
			if (m->state != LINKMON_UP &&
			    m->state != LINKMON_CONNECTING)
				log_info("peer link up again %s failures=%llu",
				         what, (unsigned long long)m->failures);
			m->state = LINKMON_UP;
			m->retry_at_ms = 0;
			m->backoff_ms = 0;
			continue;
		}
		enum linkmon_state was = m->state;
		m->failures++;
		m->code = (int)value;
		m->state = ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
		                   ? LINKMON_KEY_REFUSED
		                   : LINKMON_HANDSHAKE_FAILED;
		m->backoff_ms = !m->backoff_ms ? LINKMON_RETRY_MIN_MS
		                : m->backoff_ms * 2 > LINKMON_RETRY_MAX_MS
		                        ? LINKMON_RETRY_MAX_MS
		                        : m->backoff_ms * 2;
		if (!m->retry_at_ms)
			m->retry_at_ms = now_ms + m->backoff_ms;
		if (m->state == LINKMON_KEY_REFUSED && was != m->state)
			log_error("peer refused this node's key %s status=%u: "
			          "the peer must have this key as public_key "
			          "of this site's [peer] section (then reload "
			          "it: systemctl reload grantd, or kill -HUP); "
			          "retrying every %d s meanwhile",
			          what, value, LINKMON_RETRY_MAX_MS / 1000);
		else if (was != m->state)
			log_warn("peer handshake failed %s error=0x%x: check "
			         "the peer's public_key in this node's "
			         "configuration (then reload this node: "
			         "systemctl reload grantd, or kill -HUP); "
			         "retrying",
			         what, value);
	}
	return m->retry_at_ms && now_ms >= m->retry_at_ms;
}
