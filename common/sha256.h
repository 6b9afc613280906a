/*
 * sha256.h: SHA-256 where it is hot.
 *
 * Every operation a site signs or checks is hashed as a leaf of its
 * batch's tree, and the tree's nodes and proofs are hashed again
 * (opsig.h, tlog.h); a transparency log's leaves and tiles the same.
 * libsodium's SHA-256 is portable C; OpenSSL's libcrypto uses the CPU's
 * SHA extensions where it has them, 3-4x faster per operation on the
 * bench machine (docs/dependencies.md).  Everything else keeps libsodium.
 *
 * Any thread; no state of the caller's.
 */
#ifndef GD_SHA256_H
#define GD_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32

/* out = SHA-256(a || b); b may be NULL when blen is 0. */
void sha256_2(uint8_t out[SHA256_LEN],
              const void *a,
              size_t alen,
              const void *b,
              size_t blen);

#endif
