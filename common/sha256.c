/*
 * sha256.c: SHA-256 through OpenSSL's EVP interface (sha256.h says why).
 *
 * The algorithm is fetched once per process (EVP_MD_fetch; an implicit
 * fetch per call costs as much as a short hash).  A short input is hashed
 * from one buffer on the stack with EVP_Digest; a long one through a
 * context.  libcrypto fails only on memory exhaustion or a broken
 * install: both stop the process (GD_ASSERT), as an allocation does.
 */
#include <openssl/evp.h>
#include <pthread.h>
#include <string.h>

#include "sha256.h"
#include "xalloc.h"
#include "banned.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static EVP_MD *md; /* for the process's life */

static void fetch(void)
{
	md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void sha256_2(uint8_t out[SHA256_LEN],
              const void *a,
              size_t alen,
              const void *b,
              size_t blen)
{
	uint8_t one[1024];
	int ok;

	GD_ASSERT(pthread_once(&once, fetch) == 0 && md);
	if (alen + blen <= sizeof(one)) {
		if (alen)
			memcpy(one, a, alen);
		if (blen)
			memcpy(one + alen, b, blen);
		ok = EVP_Digest(one, alen + blen, out, NULL, md, NULL);
	} else {
		EVP_MD_CTX *c = EVP_MD_CTX_new();
		ok = c && EVP_DigestInit_ex2(c, md, NULL) &&
		     EVP_DigestUpdate(c, a, alen) &&
		     EVP_DigestUpdate(c, b, blen) &&
		     EVP_DigestFinal_ex(c, out, NULL);
		EVP_MD_CTX_free(c);
	}
	GD_ASSERT(ok);
}
