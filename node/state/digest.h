/*
 * digest.h: the state digest (SPEC 3.6), an order-independent set hash.
 *
 * The digest is the XOR of BLAKE2b-256(family, key, value) over every
 * replicated record.  Replacing a record XORs the old hash out and the new
 * one in, so it is kept up to date in O(1) per change and stored with the
 * change in the same batch.  Two sites that applied the same operations in
 * any order hold the same records and so the same digest.
 */
#ifndef GD_DIGEST_H
#define GD_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_LEN 32

/* d ^= H(cf, key, val) */
void digest_toggle(uint8_t d[DIGEST_LEN], int cf, const void *key,
		   size_t klen, const void *val, size_t vlen);

/* h = H(cf, key, val), for XORing one record into several digests (the
 * whole state's and its family's) with one hash. */
void digest_hash(uint8_t h[DIGEST_LEN], int cf, const void *key, size_t klen,
		 const void *val, size_t vlen);

/* d ^= h */
void digest_xor(uint8_t d[DIGEST_LEN], const uint8_t h[DIGEST_LEN]);

/* Lower-case hex, 2 * DIGEST_LEN + 1 bytes. */
void digest_hex(char out[2 * DIGEST_LEN + 1], const uint8_t d[DIGEST_LEN]);

#endif
