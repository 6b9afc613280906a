/*
 * gd_sk_provider.c: a software FIDO2 authenticator for the tests only, as
 * an OpenSSH SecurityKeyProvider (a shared library ssh-sk-helper loads:
 * `ssh-keygen -t ed25519-sk -w PROVIDER`, `ssh -o SecurityKeyProvider=`).
 * Never installed: it holds its private key in the key handle, in the
 * clear, which is exactly what a security key must never do.
 *
 * It makes ed25519 keys (libsodium) and signs as a FIDO2 authenticator
 * does for OpenSSH: an ed25519 signature over
 *   SHA256(application) || flags || counter (big-endian) || SHA256(data)
 * where flags are what it reports of the user's presence (the touch,
 * SSH_SK_USER_PRESENCE_REQD) and verification (the PIN,
 * SSH_SK_USER_VERIFICATION_REQD); sshd checks both against the key's
 * authorized_keys options.  The test steers it through the environment
 * (ssh passes it on to ssh-sk-helper):
 *
 *   GD_SK_NO_TOUCH=1  never report a touch (a user who did not touch it)
 *   GD_SK_NO_UV=1     never report user verification, and ask no PIN
 *   GD_SK_PIN=PIN     the PIN a key made with verify-required wants
 *                     (default 1234); asked for with SSH_SK_ERR_PIN_REQUIRED
 *                     when the client has not given one, as a real key
 *   GD_SK_LOG=FILE    append a line per call: what was asked, what it said
 *
 * ECDSA keys (sk-ecdsa-sha2-nistp256) are not offered: SSH_SK_ERR_UNSUPPORTED.
 *
 * The interface below is OpenSSH's sk-api.h for Debian 12's OpenSSH 9.2
 * (SSH_SK_VERSION_MAJOR 0x000a0000), declared here because no Debian
 * package installs that header; the structures must keep its layout.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

/* ---- OpenSSH's provider interface (sk-api.h, API 0x000a0000) ----------- */

#define SSH_SK_USER_PRESENCE_REQD 0x01
#define SSH_SK_USER_VERIFICATION_REQD 0x04
#define SSH_SK_ED25519 0x01
#define SSH_SK_ERR_GENERAL (-1)
#define SSH_SK_ERR_UNSUPPORTED (-2)
#define SSH_SK_ERR_PIN_REQUIRED (-3)
#define SSH_SK_VERSION_MAJOR 0x000a0000

struct sk_enroll_response {
	uint8_t flags;
	uint8_t *public_key;
	size_t public_key_len;
	uint8_t *key_handle;
	size_t key_handle_len;
	uint8_t *signature;
	size_t signature_len;
	uint8_t *attestation_cert;
	size_t attestation_cert_len;
	uint8_t *authdata;
	size_t authdata_len;
};

struct sk_sign_response {
	uint8_t flags;
	uint32_t counter;
	uint8_t *sig_r;
	size_t sig_r_len;
	uint8_t *sig_s;
	size_t sig_s_len;
};

struct sk_resident_key;

struct sk_option {
	char *name;
	char *value;
	uint8_t required;
};

uint32_t sk_api_version(void);
int sk_enroll(uint32_t alg, const uint8_t *challenge, size_t challenge_len,
	      const char *application, uint8_t flags, const char *pin,
	      struct sk_option **options,
	      struct sk_enroll_response **enroll_response);
int sk_sign(uint32_t alg, const uint8_t *data, size_t data_len,
	    const char *application, const uint8_t *key_handle,
	    size_t key_handle_len, uint8_t flags, const char *pin,
	    struct sk_option **options, struct sk_sign_response **sign_response);
int sk_load_resident_keys(const char *pin, struct sk_option **options,
			  struct sk_resident_key ***rks, size_t *nrks);

/* ---- the authenticator -------------------------------------------------- */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
	const char *path = getenv("GD_SK_LOG");
	va_list ap;
	FILE *fp;

	if (!path || !*path || !(fp = fopen(path, "a")))
		return;
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	fputc('\n', fp);
	fclose(fp);
}

static int env_on(const char *name)
{
	const char *v = getenv(name);
	return v && *v && strcmp(v, "0");
}

/* A required option we do not know (device, user id for resident keys):
 * refuse, as the API asks. */
static int options_ok(struct sk_option **options)
{
	for (size_t i = 0; options && options[i]; i++)
		if (options[i]->required)
			return 0;
	return 1;
}

static void *dup_bytes(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

uint32_t sk_api_version(void)
{
	return SSH_SK_VERSION_MAJOR;
}

int sk_enroll(uint32_t alg, const uint8_t *challenge, size_t challenge_len,
	      const char *application, uint8_t flags, const char *pin,
	      struct sk_option **options,
	      struct sk_enroll_response **enroll_response)
{
	/* the key handle is libsodium's secret key (seed and public key) */
	uint8_t pk[crypto_sign_ed25519_PUBLICKEYBYTES];
	uint8_t sk[crypto_sign_ed25519_SECRETKEYBYTES];
	struct sk_enroll_response *r;

	if (!enroll_response)
		return SSH_SK_ERR_GENERAL;
	*enroll_response = NULL;
	if (alg != SSH_SK_ED25519) {
		say("enroll alg=%u: unsupported", alg);
		return SSH_SK_ERR_UNSUPPORTED;
	}
	if (!options_ok(options) || sodium_init() < 0)
		return SSH_SK_ERR_GENERAL;
	if (!(r = calloc(1, sizeof(*r))))
		return SSH_SK_ERR_GENERAL;
	crypto_sign_ed25519_keypair(pk, sk);
	r->flags = flags;
	r->public_key = dup_bytes(pk, sizeof(pk));
	r->public_key_len = sizeof(pk);
	r->key_handle = dup_bytes(sk, sizeof(sk));
	r->key_handle_len = sizeof(sk);
	/* no attestation: an empty signature, no certificate */
	r->signature = dup_bytes(NULL, 0);
	sodium_memzero(sk, sizeof(sk));
	if (!r->public_key || !r->key_handle || !r->signature) {
		free(r->public_key);
		free(r->key_handle);
		free(r->signature);
		free(r);
		return SSH_SK_ERR_GENERAL;
	}
	say("enroll alg=ed25519 application=%s flags=0x%02x", application,
	    flags);
	*enroll_response = r;
	return 0;
}

/* What the user did, by the environment: the flags the authenticator
 * reports (and signs).  Returns 0, or SSH_SK_ERR_PIN_REQUIRED when a PIN
 * is wanted and none (or a wrong one) was given. */
static int user_acts(uint8_t asked, const char *pin, uint8_t *out)
{
	const char *want = getenv("GD_SK_PIN");

	*out = 0;
	if (!env_on("GD_SK_NO_TOUCH"))
		*out |= SSH_SK_USER_PRESENCE_REQD;
	if (!(asked & SSH_SK_USER_VERIFICATION_REQD) || env_on("GD_SK_NO_UV"))
		return 0;
	if (!want || !*want)
		want = "1234";
	if (!pin || strcmp(pin, want))
		return SSH_SK_ERR_PIN_REQUIRED;
	*out |= SSH_SK_USER_VERIFICATION_REQD;
	return 0;
}

int sk_sign(uint32_t alg, const uint8_t *data, size_t data_len,
	    const char *application, const uint8_t *key_handle,
	    size_t key_handle_len, uint8_t flags, const char *pin,
	    struct sk_option **options, struct sk_sign_response **sign_response)
{
	/* SHA256(application) || flags || counter || SHA256(data) */
	uint8_t msg[crypto_hash_sha256_BYTES * 2 + 5];
	uint8_t sig[crypto_sign_ed25519_BYTES];
	struct sk_sign_response *r;
	const uint32_t counter = 1;
	uint8_t told;
	int rc;

	if (!sign_response)
		return SSH_SK_ERR_GENERAL;
	*sign_response = NULL;
	if (alg != SSH_SK_ED25519)
		return SSH_SK_ERR_UNSUPPORTED;
	if (!options_ok(options) || sodium_init() < 0 ||
	    key_handle_len != crypto_sign_ed25519_SECRETKEYBYTES)
		return SSH_SK_ERR_GENERAL;
	if ((rc = user_acts(flags, pin, &told)) != 0) {
		say("sign asked=0x%02x: PIN %s", flags,
		    pin ? "wrong" : "required");
		return rc;
	}
	crypto_hash_sha256(msg, (const uint8_t *)application,
			   strlen(application));
	msg[32] = told;
	msg[33] = (uint8_t)(counter >> 24);
	msg[34] = (uint8_t)(counter >> 16);
	msg[35] = (uint8_t)(counter >> 8);
	msg[36] = (uint8_t)counter;
	crypto_hash_sha256(msg + 37, data, data_len);
	if (crypto_sign_ed25519_detached(sig, NULL, msg, sizeof(msg),
					 key_handle) != 0)
		return SSH_SK_ERR_GENERAL;
	if (!(r = calloc(1, sizeof(*r))) ||
	    !(r->sig_r = dup_bytes(sig, sizeof(sig)))) {
		free(r);
		return SSH_SK_ERR_GENERAL;
	}
	r->flags = told;
	r->counter = counter;
	r->sig_r_len = sizeof(sig);
	say("sign asked=0x%02x reported=0x%02x", flags, told);
	*sign_response = r;
	return 0;
}

int sk_load_resident_keys(const char *pin, struct sk_option **options,
			  struct sk_resident_key ***rks, size_t *nrks)
{
	return SSH_SK_ERR_UNSUPPORTED;
}
