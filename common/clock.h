/*
 * clock.h: the node's two clocks, read in one place.
 *
 * Wall time (CLOCK_REALTIME) is what stamps carry and peers compare: the
 * HLC's physical part, a PeerMsg's send time, grant expiries.  Monotonic
 * time (CLOCK_MONOTONIC) never steps back and is what timeouts, back-offs
 * and keep-alives measure: every interval and deadline in the node, so
 * that a wall clock stepped (NTP's first correction after boot, an
 * operator's `date -s`) moves no timer.  Thread-safe; no state but a test
 * hook's offset (clock_test_step).
 */
#ifndef GD_CLOCK_H
#define GD_CLOCK_H

#include <stdint.h>

/* Wall clock in ms and in µs since the epoch. */
uint64_t clock_wall_ms(void);
uint64_t clock_wall_us(void);

/* A clock that never steps back, in ms and in µs (from an arbitrary
 * start). */
uint64_t clock_mono_ms(void);
uint64_t clock_mono_us(void);

/* Test hook: step the wall clock of this process by ms (negative: back),
 * as an NTP step would; returns the offset now in force.  Only the node's
 * GRANTD_TEST_CLOCK_STEP_MS calls it (crashpoint.h); the monotonic clock
 * does not move. */
int64_t clock_test_step(int64_t ms);

#endif
