/*
 * arena.h: a bump allocator for protobuf-c, for what one request unpacks
 * and drops at once: the request itself (readers.c) and the records a
 * push decision reads (policy.c).  Each unpacked field was a malloc and a
 * free (issue 23: a check unpacked some 25).
 *
 * The first room is inside struct arena, so an arena on the caller's
 * stack serves a small request without any malloc; more comes in chunks.
 * free is a no-op; arena_end wipes everything handed out (a request's
 * arguments and an enrollment may hold a secret) and frees the chunks.
 * One owner, one thread: nothing is shared.
 */
#ifndef GD_ARENA_H
#define GD_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define ARENA_FIRST 4096
#define ARENA_CHUNK 16384

struct arena_chunk;

struct arena {
	uint8_t *p; /* the room in use: first or the newest chunk */
	size_t len, cap;
	struct arena_chunk *chunks; /* newest first */
	_Alignas(16) uint8_t first[ARENA_FIRST];
};

/* Start a (the caller's, usually on its stack) and make *al allocate
 * from it. */
void arena_init(struct arena *a, ProtobufCAllocator *al);

/* Wipe all a handed out and free its chunks; whatever was unpacked with
 * its allocator is gone, and a is empty again (its allocator still
 * serves). */
void arena_end(struct arena *a);

#endif
