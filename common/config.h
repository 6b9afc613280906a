/*
 * config.h: the INI configuration (docs/operations.md, grantd.conf(5)),
 * shared by the node and the clients so both read the same file the same
 * way.
 *
 * Every error names the file and line: "grantd.conf:12: unknown key 'foo'
 * in [node] (did you mean ...?)".  Unknown sections and keys, bad values and
 * duplicate site names are errors.  The clients need only the socket and
 * repository paths; the node also reads its key file (config_read_keyfile).
 */
#ifndef GD_CONFIG_H
#define GD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"

#define CONFIG_DEFAULT_PATH "/etc/grantd/grantd.conf"
#define CONFIG_MAX_PEERS    16
#define Z85_KEY_LEN         40

/* [node] role and [peer NAME] role (docs/mirrors.md).  A frontend takes
 * pushes and 2fa and votes on token uses; a mirror is read-only: it receives
 * repositories and their settings, never secrets, marks or grants, and
 * never votes. */
enum config_role { CONFIG_ROLE_FRONTEND, CONFIG_ROLE_MIRROR };

/* [policy] token_quorum (docs/replication.md section 8): local, a site
 * decides a token's use by itself (peers learn it within the replication
 * lag); majority, a use is accepted only once a majority of the
 * frontends has recorded it. */
enum config_quorum { CONFIG_QUORUM_LOCAL, CONFIG_QUORUM_MAJORITY };

struct config_peer {
	char *site;
	enum config_role role; /* default frontend */
	char *publish;
	char *sync;
	char public_key[Z85_KEY_LEN + 1];
	int line; /* where its section starts, for errors */
	int key_line; /* where its public_key is, for errors */
	/* Its operation-signing key, NAME+HEXID+BASE64 (common/opsig.h),
	 * checked by the node at start (gdconf has no crypto); NULL: its
	 * operations are taken unchecked (a warning says so). */
	char *verifier_key;
	int vkey_line;
};

/* [policy] security_keys: what a push over an SSH security key (FIDO2:
 * sk-ssh-ed25519@openssh.com, sk-ecdsa-sha2-nistp256@openssh.com) counts
 * as.  off: an ordinary key; touch (the default): two factors, sshd having
 * checked the touch; pin: two factors, grant-keys asking sshd for user
 * verification too (verify-required). */
enum config_sk { CONFIG_SK_OFF, CONFIG_SK_TOUCH, CONFIG_SK_PIN };

struct config_policy {
	enum config_sk security_keys;
	enum config_quorum token_quorum;
	int64_t token_quorum_timeout_ms; /* how long an origin waits for
	                                  * votes (100 ms to 10 s) */
	int64_t grant_default; /* seconds */
	int64_t grant_max;
	int64_t grant_subnet; /* val-subnet and val-session: 8h */
	int totp_window; /* steps either side of now */
	int hotp_lookahead;
	int lockout_failures;
	int64_t lockout_window; /* seconds */
};

struct config {
	char *path;
	char *site;
	char *data_dir;
	char *repo_dir;
	char *user_socket;
	char *admin_socket;
	char *keys_socket; /* grant-keys' plain socket (default:
	                    * keys.sock beside user_socket) */
	char *publish;
	char *sync;
	char *secret_key;
	int secret_key_line; /* for errors about the key file */
	enum config_role role; /* default frontend */
	char *log_level; /* error, warn, info (default), debug */
	char *host; /* the name users ssh to, for hints and the
	             * otpauth issuer (NULL: the machine's) */
	char *log_http; /* HOST:PORT of the public push log (C2SP
	                 * tlog-tiles, node/daemon/loghttp.h); NULL: off */
	char *metrics; /* HOST:PORT of the HTTP endpoint
	                * (/metrics, /health, /ready); NULL: off */
	int64_t oplog_retention; /* seconds operations stay in the log */
	struct config_peer peers[CONFIG_MAX_PEERS];
	int npeers;
	struct config_policy policy;
	/* [gitolite]: the node works beside gitolite (docs/gitolite.md).
	 * gitolite_home NULL = not (the section absent). */
	char *gitolite_home; /* the hosting account's HOME */
	char *gitolite_program; /* the gitolite command (default
	                         * "gitolite", found in PATH) */
};

/* The frontends of the cluster: this site if it is one, and every
 * frontend peer.  token_quorum = majority needs more than half of them. */
int config_frontends(const struct config *c);
int config_majority(const struct config *c);

/* "frontend" or "mirror". */
const char *config_role_name(enum config_role role);

/* c's [peer site]; NULL when it has none. */
const struct config_peer *config_peer_named(const struct config *c,
                                            const char *site);

/* The path to use when no --config was given: $GRANTD_CONFIG, then
 * CONFIG_DEFAULT_PATH.  Borrowed. */
const char *config_default_path(void);

/*
 * Read and check FILE.  On success *out is the caller's (config_free).  On
 * failure returns GD_EINVAL or GD_EIO with a one-line message in err.
 */
int config_load(struct config **out, const char *path, struct buf *err);

void config_free(struct config **cp);

/*
 * Read a key file written by `grantctl keygen`.  sec may be NULL when only
 * the public key is wanted; when it is not, a file readable by group or
 * others is refused (GD_EINVAL, "chmod 600" in the message), as sshd
 * refuses such host keys.  Returns 0, or GD_EIO/GD_EINVAL with a message
 * in err.  The caller wipes sec when done.
 */
int config_read_keyfile(const char *path,
                        char pub[Z85_KEY_LEN + 1],
                        char sec[Z85_KEY_LEN + 1],
                        struct buf *err);

/*
 * Refuse a [peer] whose public_key is this node's own (own_pub, the
 * public half of secret_key): the node would count itself as that peer,
 * and one machine twice toward a majority.  (Two peers with one key are
 * refused by config_load.)  Returns 0, or GD_EINVAL with "PATH:LINE: ..."
 * in err.
 */
int config_check_own_key(const struct config *c,
                         const char own_pub[Z85_KEY_LEN + 1],
                         struct buf *err);

#endif
