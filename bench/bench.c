/*
 * bench.c: the benchmark programs' shared helpers (bench.h).
 */
#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "bench.h"

void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", bench_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

uint64_t pct(const uint64_t *v, size_t n, double p)
{
	if (!n)
		return 0;
	size_t k = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	return v[(k > n ? n : k) - 1];
}

bool bench_recv_all(int fd, void *p, size_t n)
{
	char *at = p;

	while (n) {
		ssize_t got = recv(fd, at, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return false;
		at += got;
		n -= (size_t)got;
	}
	return true;
}

size_t bench_frame_len(const void *hdr)
{
	const unsigned char *u = hdr;

	return (size_t)u[0] << 24 | (size_t)u[1] << 16 | (size_t)u[2] << 8 |
	       u[3];
}

void bench_ssh_key(char *line, size_t llen, char *fp, size_t fplen,
		   const char *seed, const char *comment)
{
	static const char type[] = "ssh-ed25519";
	uint8_t blob[4 + sizeof(type) - 1 + 4 + 32], h[32];
	char b64[128];
	size_t o = 0;

	crypto_hash_sha256(h, (const uint8_t *)seed, strlen(seed));
	blob[o++] = 0, blob[o++] = 0, blob[o++] = 0;
	blob[o++] = (uint8_t)(sizeof(type) - 1);
	memcpy(blob + o, type, sizeof(type) - 1);
	o += sizeof(type) - 1;
	blob[o++] = 0, blob[o++] = 0, blob[o++] = 0, blob[o++] = 32;
	memcpy(blob + o, h, 32);
	o += 32;
	sodium_bin2base64(b64, sizeof(b64), blob, o,
			  sodium_base64_VARIANT_ORIGINAL);
	snprintf(line, llen, "%s %s %s", type, b64, comment);
	if (fp) {
		crypto_hash_sha256(h, blob, o);
		sodium_bin2base64(b64, sizeof(b64), h, 32,
				  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
		snprintf(fp, fplen, "SHA256:%s", b64);
	}
}
