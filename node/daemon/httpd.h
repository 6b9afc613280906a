/*
 * httpd.h: one HTTP endpoint of the node, as both of them serve: the
 * metrics (metrics.h: /metrics, /health, /ready) and the public push log
 * (loghttp.h: C2SP tlog-tiles under /log/SITE/).
 *
 * Why libmicrohttpd: what arrives comes from the network, so the HTTP
 * parsing should be a well-kept library's, not ours (docs/dependencies.md).
 * Each endpoint is one daemon with its one internal thread (epoll or poll,
 * never select: the node holds many descriptors), calling the endpoint's
 * answer function; a slow or hostile client holds only that thread, and
 * only so much of it: few connections per client address, a short
 * timeout, a small memory limit per connection.
 *
 * Called from the node's main thread (start, stop); the answer functions
 * run on the daemon's thread.
 */
#ifndef GD_HTTPD_H
#define GD_HTTPD_H

#include <microhttpd.h>
#include <stdbool.h>

#include "buf.h"

/* A client that opens connections and never finishes a request holds
 * HTTPD_CONN_PER_IP slots at most, each for HTTPD_CONN_TIMEOUT_S of
 * silence: sixteen such clients (addresses) fill HTTPD_CONN_MAX. */
#define HTTPD_CONN_MAX       64
#define HTTPD_CONN_PER_IP    4
#define HTTPD_CONN_TIMEOUT_S 3

/* Is listen (HOST:PORT or [V6]:PORT) an address others than this machine
 * can reach (not 127/8, ::1 nor 127/8 mapped into IPv6)?  false for one
 * that does not resolve (httpd_start says why). */
bool httpd_listen_public(const char *listen);

/* Serve answer (with cls) on listen.  what names the endpoint in log lines
 * ("metrics", "push log": "cannot serve metrics listen=...", "metrics
 * endpoint listening ..."); a static string.  Returns 0
 * with *out the caller's (httpd_stop), or GD_EINVAL (listen does not
 * resolve) / GD_EIO (cannot bind), logged. */
int httpd_start(struct MHD_Daemon **out,
                const char *listen,
                const char *what,
                MHD_AccessHandlerCallback answer,
                void *cls);

/* Stop *d (NULL-safe) and set it NULL. */
void httpd_stop(struct MHD_Daemon **d);

/* Queue body (taken: emptied) as the answer, with Content-Type type and
 * Cache-Control cache ("no-store", "public, max-age=...").  MHD_NO when
 * the connection should be closed. */
enum MHD_Result httpd_reply(struct MHD_Connection *conn,
                            unsigned code,
                            const char *type,
                            const char *cache,
                            struct buf *body);

/* Is the request a GET or a HEAD without a body?  Otherwise queues the
 * refusal (405, or 413 for a body) and sets *ret. */
bool httpd_get_only(struct MHD_Connection *conn,
                    const char *method,
                    size_t *upload_size,
                    enum MHD_Result *ret);

#endif
