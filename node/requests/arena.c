/*
 * arena.c: the bump allocator for protobuf-c (arena.h).
 */
#include <sodium.h>
#include <stdlib.h>

#include "arena.h"
#include "xalloc.h"
#include "banned.h"

struct arena_chunk {
	struct arena_chunk *next;
	size_t cap; /* then cap bytes */
};

static void *arena_alloc(void *data, size_t n)
{
	struct arena *a = data;
	size_t off = (a->len + 15) & ~(size_t)15;

	if (off > a->cap || n > a->cap - off) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		struct arena_chunk *c = xmalloc(sizeof(*c) + cap);
		c->next = a->chunks;
		c->cap = cap;
		a->chunks = c;
		a->p = (uint8_t *)(c + 1);
		a->cap = cap;
		off = 0;
	}
	a->len = off + n;
	return a->p + off;
}

static void arena_free(void *data, void *p)
{
	(void)data;
	(void)p; /* all of it at arena_end */
}

void arena_init(struct arena *a, ProtobufCAllocator *al)
{
	a->p = a->first;
	a->len = 0;
	a->cap = sizeof(a->first);
	a->chunks = NULL;
	*al = (ProtobufCAllocator){arena_alloc, arena_free, a};
}

void arena_end(struct arena *a)
{
	sodium_memzero(a->first, a->chunks ? sizeof(a->first) : a->len);
	while (a->chunks) {
		struct arena_chunk *c = a->chunks;
		a->chunks = c->next;
		sodium_memzero(c + 1, c->cap);
		free(c);
	}
	a->p = a->first;
	a->len = 0;
	a->cap = sizeof(a->first);
}
