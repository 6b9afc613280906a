/*
 * node.h: the node's parts, owned by main.c and lent to the modules.
 * Everything here belongs to the writer thread (the main loop).
 */
#ifndef GD_NODE_H
#define GD_NODE_H

#include <stdint.h>

#include "config.h"
#include "ops.h"
#include "store.h"

struct control;

struct node {
	struct config *cfg;
	struct store *store;
	struct ops ops;
	struct control *control;
	void *zctx;
	char host[256];        /* the name users ssh to, for hints */
	uint64_t started_ms;
	uint64_t bad_requests; /* control frames that failed to decode */
};

#endif
