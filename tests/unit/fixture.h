/*
 * fixture.h: what the unit tests of node/ modules set up alike: the
 * libraries and the log of the program (a cmocka group setup), a
 * temporary directory per test, and a store with the operations module
 * on it.  tests/unit/fixture.c is linked into every unit test that links
 * gdnode (tests/CMakeLists.txt); it is not a test itself.
 *
 * Each returns 0 or -1, as cmocka's setup and teardown functions do, and
 * asserts nothing: a setup returns what they return.
 */
#ifndef GD_TEST_FIXTURE_H
#define GD_TEST_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

struct config;
struct ops;
struct store;

/* A cmocka group setup's work: libsodium, libgit2, and the log on stderr
 * as ident at level.  fx_group_teardown (a cmocka group teardown) ends
 * libgit2 again. */
int fx_group_setup(const char *ident, enum log_level level);
int fx_group_teardown(void **state);

/* Make a new directory NAME.XXXXXX, its path in dir (size bytes): in
 * /dev/shm when tmpfs and there is one (for many synced commits), else in
 * $TMPDIR when that is set and shorter than 32 bytes (so that socket
 * paths below it fit), else in /tmp. */
int fx_mkdtemp(char *dir, size_t size, const char *name, bool tmpfs);

/* rm -rf dir. */
int fx_rmtree(const char *dir);

/* Open the store dir/store, sealed with seal_key (STORE_SEAL_KEY_LEN
 * bytes), into *s and, when o is not NULL, the operations module *o on
 * it for cfg (which must outlive *o).  fx_store_close(s, o) closes both. */
int fx_store_open(struct store **s,
                  struct ops **o,
                  const char *dir,
                  const struct config *cfg,
                  const uint8_t *seal_key);
void fx_store_close(struct store **s, struct ops **o);

#endif
