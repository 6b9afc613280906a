/*
 * clock.h: the node's two clocks, read in one place.
 *
 * Wall time (CLOCK_REALTIME) is what stamps carry and peers compare: the
 * HLC's physical part, a PeerMsg's send time, grant expiries.  Monotonic
 * time (CLOCK_MONOTONIC) never steps back and is what timeouts, back-offs
 * and keep-alives measure.  Thread-safe; no state.
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

#endif
