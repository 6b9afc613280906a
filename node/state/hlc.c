/* hlc.c: hybrid logical clock. */
#include "clock.h"
#include "hlc.h"
#include "banned.h"

uint64_t hlc_tick(struct hlc *h, uint64_t wall_ms)
{
	uint64_t phys = wall_ms << HLC_LOGICAL_BITS;
	/* saturate rather than wrap to 0 (peers bound stamps, see repl.c) */
	if (phys > h->last)
		h->last = phys;
	else if (h->last < UINT64_MAX)
		h->last++;
	return h->last;
}

uint64_t hlc_now(struct hlc *h)
{
	return hlc_tick(h, clock_wall_ms());
}

void hlc_observe(struct hlc *h, uint64_t remote)
{
	if (remote > h->last)
		h->last = remote;
}
