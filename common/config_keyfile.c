/*
 * config_keyfile.c: the node's key file (`grantctl keygen`'s [curve]
 * public-key and secret-key) and the check that no [peer] has this
 * node's own public key; the key-file half of config.h.
 */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "err.h"
#include "banned.h"

int config_check_own_key(const struct config *c,
                         const char own_pub[Z85_KEY_LEN + 1],
                         struct buf *err)
{
	for (int i = 0; i < c->npeers; i++) {
		const struct config_peer *p = &c->peers[i];
		if (strcmp(p->public_key, own_pub))
			continue;
		buf_printf(err,
		           "%s:%d: [peer %s] has this node's own "
		           "public_key (the public half of secret_key %s): "
		           "give the key that site's grantctl keygen printed",
		           c->path, p->key_line, p->site,
		           c->secret_key ? c->secret_key : "");
		return GD_EINVAL;
	}
	return 0;
}

struct key_state {
	char *pub;
	char *sec;
	int bad;
};

static int key_handler(void *user,
                       const char *section,
                       const char *name,
                       const char *value)
{
	struct key_state *ks = user;
	char *dst = NULL;

	if (!name)
		return 1;
	if (strcmp(section, "curve")) {
		ks->bad = 1;
		return 0;
	}
	if (!strcmp(name, "public-key"))
		dst = ks->pub;
	else if (!strcmp(name, "secret-key"))
		dst = ks->sec;
	else {
		ks->bad = 1;
		return 0;
	}
	if (!dst) /* secret not wanted */
		return 1;
	if (strlen(value) != Z85_KEY_LEN) {
		ks->bad = 1;
		return 0;
	}
	memcpy(dst, value, Z85_KEY_LEN + 1);
	return 1;
}

int config_read_keyfile(const char *path,
                        char pub[Z85_KEY_LEN + 1],
                        char sec[Z85_KEY_LEN + 1],
                        struct buf *err)
{
	struct key_state ks = {.pub = pub, .sec = sec};
	pub[0] = '\0';
	if (sec)
		sec[0] = '\0';
	FILE *fp = fopen(path, "r");
	if (!fp) {
		buf_printf(err, "%s: cannot read key file: %s", path,
		           strerror(errno));
		return GD_EIO;
	}
	struct stat st;
	/* as sshd does for its host keys: a secret others can read is no
	 * secret */
	if (sec && (fstat(fileno(fp), &st) < 0 || (st.st_mode & 077))) {
		buf_printf(err,
		           "%s: the key file is readable by group or "
		           "others (mode %04o); run: chmod 600 %s",
		           path, (unsigned)(st.st_mode & 07777), path);
		fclose(fp);
		return GD_EINVAL;
	}
	int r = ini_parse_file(fp, key_handler, &ks);
	fclose(fp);
	if (r != 0 || ks.bad || !pub[0] || (sec && !sec[0])) {
		buf_printf(err, "%s: not a key file from 'grantctl keygen'",
		           path);
		return GD_EINVAL;
	}
	return 0;
}
