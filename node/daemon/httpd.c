/*
 * httpd.c: one HTTP endpoint of the node (httpd.h).
 */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "err.h"
#include "httpd.h"
#include "log.h"
#include "banned.h"

/* libmicrohttpd's error logger (MHD_OPTION_EXTERNAL_LOGGER): cls is the
 * endpoint's name; fmt is its printf format, so clang's
 * -Wformat-nonliteral is told so. */
__attribute__((format(printf, 2, 0))) static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_warn("%s endpoint: %s", (const char *)cls, line);
}

/* Is this address of the loopback interface (127/8, ::1, or 127/8
 * mapped into IPv6)? */
static bool loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		return ntohl(in->sin_addr.s_addr) >> 24 == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a =
		        &((const struct sockaddr_in6 *)sa)->sin6_addr;
		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* listen as an address to bind: HOST:PORT or [V6]:PORT. */
static int resolve(struct addrinfo **out, const char *listen)
{
	const char *colon = strrchr(listen, ':');
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	                         .ai_socktype = SOCK_STREAM};
	char host[256];
	size_t hl;

	if (!colon)
		return GD_EINVAL;
	hl = (size_t)(colon - listen);
	if (listen[0] == '[' && hl >= 2 && colon[-1] == ']') {
		listen++;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return GD_EINVAL;
	memcpy(host, listen, hl);
	host[hl] = '\0';
	return getaddrinfo(host, colon + 1, &hints, out) ? GD_EINVAL : 0;
}

bool httpd_listen_public(const char *listen)
{
	struct addrinfo *ai = NULL;
	bool pub;

	if (resolve(&ai, listen) < 0)
		return false;
	pub = !loopback(ai->ai_addr);
	freeaddrinfo(ai);
	return pub;
}

int httpd_start(struct MHD_Daemon **out,
                const char *listen,
                const char *what,
                MHD_AccessHandlerCallback answer,
                void *cls)
{
	struct addrinfo *ai = NULL;
	/* AUTO: epoll or poll, never select() (the node holds many fds) */
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
	                 MHD_USE_ERROR_LOG;

	*out = NULL;
	if (resolve(&ai, listen) < 0) {
		log_error("%s address does not resolve listen=%s", what,
		          listen);
		return GD_EINVAL;
	}
	if (ai->ai_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	*out = MHD_start_daemon(
	        flags, 0, NULL, NULL, answer, cls, MHD_OPTION_EXTERNAL_LOGGER,
	        mhd_log, (void *)what, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
	        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTPD_CONN_MAX,
	        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTPD_CONN_PER_IP,
	        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTPD_CONN_TIMEOUT_S,
	        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
	        MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!*out) {
		log_error("cannot serve %s listen=%s: %s", what, listen,
		          strerror(errno));
		return GD_EIO;
	}
	log_info("%s endpoint listening listen=%s", what, listen);
	return 0;
}

void httpd_stop(struct MHD_Daemon **d)
{
	if (*d)
		MHD_stop_daemon(*d);
	*d = NULL;
}

enum MHD_Result httpd_reply(struct MHD_Connection *conn,
                            unsigned code,
                            const char *type,
                            const char *cache,
                            struct buf *body)
{
	size_t len = body->len;
	struct MHD_Response *rsp;
	enum MHD_Result ret;

	/* MHD frees the text (MHD_RESPMEM_MUST_FREE): ours is malloc'd */
	rsp = MHD_create_response_from_buffer(
	        len, len ? buf_detach(body) : (void *)"",
	        len ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!rsp)
		return MHD_NO;
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CACHE_CONTROL, cache);
	ret = MHD_queue_response(conn, code, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

bool httpd_get_only(struct MHD_Connection *conn,
                    const char *method,
                    size_t *upload_size,
                    enum MHD_Result *ret)
{
	struct buf body = BUF_INIT;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD)) {
		buf_puts(&body, "only GET\n");
		*ret = httpd_reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		                   "text/plain; charset=utf-8", "no-store",
		                   &body);
		buf_free(&body);
		return false;
	}
	if (*upload_size) { /* a GET with a body: not ours */
		*ret = MHD_NO;
		return false;
	}
	return true;
}
