/*
 * hlc.h: hybrid logical clock (Kulkarni et al. 2014), 64 bits.
 *
 * The high 48 bits are wall-clock milliseconds, the low 16 a logical
 * counter.  Values only grow: a clock stepped back, or a peer's stamp from
 * the future, advances the logical part instead.  Every operation is
 * stamped with hlc_now(); LWW merges compare these stamps.  Not
 * thread-safe: one owner (the node's writer thread).
 */
#ifndef GD_HLC_H
#define GD_HLC_H

#include <stdint.h>

struct hlc {
	uint64_t last;
};

#define HLC_LOGICAL_BITS 16

static inline uint64_t hlc_ms(uint64_t h)
{
	return h >> HLC_LOGICAL_BITS;
}

/* A stamp greater than every one this clock gave or observed, from the
 * given wall time in ms (hlc_now passes clock_wall_ms(): intervals and
 * deadlines use clock_mono_ms(), never this, clock.h). */
uint64_t hlc_tick(struct hlc *h, uint64_t wall_ms);
uint64_t hlc_now(struct hlc *h);

/* Take a received stamp into account so later local stamps order after
 * it. */
void hlc_observe(struct hlc *h, uint64_t remote);

#endif
