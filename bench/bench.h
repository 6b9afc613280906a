/*
 * bench.h: what bench_control and bench_scale share: dying with a
 * message, the monotonic clock, nearest-rank percentiles and made-up SSH
 * keys (bench.c).
 * Each program defines bench_prog, the name its messages start with.
 */
#ifndef GD_BENCH_H
#define GD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const char bench_prog[];

/* "PROG: message" on stderr, and exit status 2 (usage or set-up error). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
					      noreturn));

/* CLOCK_MONOTONIC, in ns. */
uint64_t now_ns(void);

/* qsort's comparison of two uint64_t. */
int cmp_u64(const void *a, const void *b);

/* Read exactly n bytes from the blocking socket fd (EINTR retried);
 * false on an error, a timeout (SO_RCVTIMEO) or the peer's close. */
bool bench_recv_all(int fd, void *p, size_t n);

/* The length in a 4-byte big-endian frame header (wire.h's framing). */
size_t bench_frame_len(const void *hdr);

/* An ssh-ed25519 public key made from seed (its 32 bytes: SHA-256 of
 * seed), as a user's key line "ssh-ed25519 BASE64 COMMENT" into line and
 * its fingerprint "SHA256:..." (as ssh-keygen -lf prints it, sshd's %f)
 * into fp (NULL: not wanted).  Needs sodium_init(). */
void bench_ssh_key(char *line, size_t llen, char *fp, size_t fplen,
		   const char *seed, const char *comment);

/* Nearest-rank percentile p (0 to 100) of sorted v[0..n); 0 when n is 0. */
uint64_t pct(const uint64_t *v, size_t n, double p);

#endif
