/*
 * crashpoint.h: a test hook that kills the node at a named moment.
 *
 * SPEC 3.1 promises that grantd is safe to kill -9 at any moment.  Tests
 * prove it for the moments that matter (SQLite's fault injection is the
 * model): with GRANTD_TEST_CRASH_AT=POINT in its environment, the node
 * SIGKILLs itself the first time it reaches POINT:
 *
 *   repo-init   a new repository's directory is made, nothing else yet
 *   pack-move   a fetched pack is half moved into objects/pack
 *   peer-batch  peers' operations are applied, their batch not written
 *   vote-promised   a voter's promise is durable, its answer not sent
 *   vote-decided    a majority promised a token use, its mark and grant
 *                   not written (token_quorum = majority, vote.h)
 *
 * GRANTD_TEST_FAULT_AT=POINT instead makes an operation fail at POINT, as
 * the real fault would, every time it is reached (the node goes on):
 *
 *   read-enroll  reading an enrollment fails (a store read error), so
 *                every request that needs one meets an internal error
 *   no-keyfp     the node keeps no SSH key fingerprint index, as a grantd
 *                from before it: the next start without it builds one
 *   commit       every write of a non-empty batch fails (writer_commit),
 *                as a RocksDB write error would: the batch is dropped
 *                and its callers are told the node failed to decide
 *   pushlog-tamper  the node rewrites every push log entry it makes
 *                after hashing it (its user becomes "mallory"), as a
 *                site that alters its log would: `grantctl log verify`
 *                then names the break (test_push_log.sh)
 *   pushlog-drop-tail  at start, the node removes the newest entry of
 *                every origin's push log chain and keeps its head, as a
 *                tool on its disk would: `grantctl log verify` there
 *                names the missing tail (test_push_log.sh)
 *   no-attest    the node never re-issues the records a release before
 *                signing made (attest.h), so a store v0.1.0 wrote keeps
 *                records without signed operations
 *                (test_rebuild_trust.sh)
 *
 * GRANTD_TEST_CLOCK_STEP_MS=N steps the node's wall clock by N ms (a
 * negative N steps it back) each time the node gets SIGUSR2, as NTP or
 * `date -s` would step the host's: stamps, grant expiries and lockouts
 * move with it, and no interval or deadline may (clock.h).  The main loop
 * takes the step at its next turn and logs "test hook: wall clock
 * stepped" (test_clock_step.sh).
 *
 * GRANTD_TEST_SYNC_GRACE_MS=N makes a starting node wait N ms, not 5 s,
 * for peers it cannot hear before it validates tokens alone (repl.c's
 * syncing gate), so a test can look at a node that is still syncing
 * without racing the 5 s on a loaded machine (test_metrics.sh).
 *
 * The variables are read once, by main() before any thread starts; without
 * them a point costs one comparison.  It is compiled in always, so the tests
 * run the binary that ships (docs/architecture.md says why that is safe).
 */
#ifndef GD_CRASHPOINT_H
#define GD_CRASHPOINT_H

#include <stdbool.h>
#include <stdint.h>

/* Read GRANTD_TEST_CRASH_AT, _FAULT_AT and _CLOCK_STEP_MS (logged when
 * set).  Call once, before any thread: SIGUSR2 stays blocked in every
 * thread but the one that calls crashpoint_clock. */
void crashpoint_init(void);

/* The main loop, each turn: take the wall clock steps SIGUSR2 asked for
 * since the last call (GRANTD_TEST_CLOCK_STEP_MS). */
void crashpoint_clock(void);

/* The syncing gate's grace for silent peers: GRANTD_TEST_SYNC_GRACE_MS,
 * else dflt. */
uint64_t crashpoint_sync_grace_ms(uint64_t dflt);

/* SIGKILL this process if name is the configured crash point. */
void crashpoint(const char *name);

/* Is name the configured fault point?  The caller then fails. */
bool faultpoint(const char *name);

#endif
