/*
 * store_int.h: what the rooms of the store share, and nothing else
 * includes (but their unit tests).
 *
 *   store.c      RocksDB, batches, views, iterators, sealing (store.h)
 *   store_fmt.c  the store's format number and the steps that raise an
 *                older store in place, run by store_open
 */
#ifndef GD_STORE_INT_H
#define GD_STORE_INT_H

#include <stdbool.h>

#include "store.h"

/* Check s's format at open (path for the log): stamp a new store (created)
 * or one of 0.1.0, run the steps from its format up to STORE_FORMAT (each
 * committed, synced, with its stamp), refuse a newer one.  Called by
 * store_open before it returns s.  Returns 0, GD_EIO or GD_EPROTO (newer:
 * logged with both formats and what to do). */
int store_fmt_open(struct store *s, const char *path, bool created);

#endif
