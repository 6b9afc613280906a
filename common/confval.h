/*
 * confval.h: the shapes config.c accepts for values that are more than a
 * word (endpoints, host names, listen addresses).  Pure functions of the
 * text; called by config.c only.
 */
#ifndef GD_CONFVAL_H
#define GD_CONFVAL_H

#include <stdbool.h>

/* tcp://... or ipc://... (ZeroMQ checks the rest when it binds). */
bool confval_endpoint(const char *v);

/* A DNS name as users type it after ssh: labels of letters, digits and
 * '-', joined by '.'. */
bool confval_host(const char *v);

/* ADDRESS:PORT, the address an IPv4 dotted quad, a name, or [IPv6]. */
bool confval_listen(const char *v);

#endif
