/* digest.c: XOR-of-BLAKE2b set hash over the replicated records. */
#include <sodium.h>
#include <stdio.h>

#include "digest.h"
#include "banned.h"

void digest_hash(uint8_t h[DIGEST_LEN], int cf, const void *key, size_t klen,
		 const void *val, size_t vlen)
{
	crypto_generichash_state st;
	uint8_t hdr[9];

	hdr[0] = (uint8_t)cf;
	for (int i = 0; i < 8; i++)
		hdr[1 + i] = (uint8_t)((uint64_t)klen >> (56 - 8 * i));
	crypto_generichash_init(&st, NULL, 0, DIGEST_LEN);
	crypto_generichash_update(&st, hdr, sizeof(hdr));
	crypto_generichash_update(&st, key, klen);
	crypto_generichash_update(&st, val, vlen);
	crypto_generichash_final(&st, h, DIGEST_LEN);
}

void digest_xor(uint8_t d[DIGEST_LEN], const uint8_t h[DIGEST_LEN])
{
	for (int i = 0; i < DIGEST_LEN; i++)
		d[i] ^= h[i];
}

void digest_toggle(uint8_t d[DIGEST_LEN], int cf, const void *key,
		   size_t klen, const void *val, size_t vlen)
{
	uint8_t h[DIGEST_LEN];

	digest_hash(h, cf, key, klen, val, vlen);
	digest_xor(d, h);
}

void digest_hex(char out[2 * DIGEST_LEN + 1], const uint8_t d[DIGEST_LEN])
{
	sodium_bin2hex(out, 2 * DIGEST_LEN + 1, d, DIGEST_LEN);
}
