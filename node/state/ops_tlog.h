/*
 * ops_tlog.h: what the transparency log's merge rule (ops_tlog.c) counts,
 * for `status` (the writer renders it: cmd_status_store) and tests; the
 * count is also in each "push leaf refused" log line.  Writer thread (the
 * owner of struct ops).
 */
#ifndef GD_OPS_TLOG_H
#define GD_OPS_TLOG_H

#include <stdint.h>

struct ops;

/* Leaves refused here since the node started: an index other than the
 * origin's tree size here. */
uint64_t ops_tlog_refused(const struct ops *o);

#endif
