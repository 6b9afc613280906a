/* names.c: name checks shared by the node and the clients. */
#include <string.h>

#include "err.h"
#include "names.h"
#include "banned.h"

bool name_user_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NAME_USER_MAX)
		return false;
	if (!((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

bool name_site_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NAME_SITE_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-'))
			return false;
	}
	return true;
}

static bool repo_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '+' ||
	       c == '-';
}

int name_repo_norm(char *out, size_t outlen, const char *in)
{
	if (!strncmp(in, "~/", 2))
		in += 2;
	else if (in[0] == '/')
		in += 1;
	size_t n = strlen(in);
	if (n > 4 && !strcmp(in + n - 4, ".git"))
		n -= 4;
	/* "x.git.git" would be stored as "x.git", which is "x" again on the
	 * next normalisation: refuse it so a name is its own normal form */
	if (n > 4 && !strncmp(in + n - 4, ".git", 4))
		return GD_EINVAL;
	if (n == 0 || n >= outlen || n > NAME_REPO_MAX)
		return GD_EINVAL;
	bool part_start = true;
	for (size_t i = 0; i < n; i++) {
		char c = in[i];
		if (c == '/') {
			if (part_start)
				return GD_EINVAL; /* empty part or "//" */
			/* "r0.git/x" would live inside r0's git dir */
			if (i >= 4 && !strncmp(in + i - 4, ".git", 4))
				return GD_EINVAL;
			part_start = true;
			continue;
		}
		if (!repo_char_ok(c) || (part_start && c == '.'))
			return GD_EINVAL;
		part_start = false;
	}
	if (part_start)
		return GD_EINVAL; /* trailing "/" */
	memcpy(out, in, n);
	out[n] = '\0';
	return 0;
}

/* An authorized_keys public key: "TYPE BASE64 [comment]", one line, no
 * options (grant-keys adds its own) and nothing sshd would parse. */
bool name_pubkey_ok(const char *k)
{
	static const char *types[] = { "ssh-ed25519 ", "ssh-rsa ",
				       "ecdsa-sha2-nistp256 ",
				       "ecdsa-sha2-nistp384 ",
				       "ecdsa-sha2-nistp521 ",
				       "sk-ssh-ed25519@openssh.com ",
				       "sk-ecdsa-sha2-nistp256@openssh.com " };
	const char *p = NULL;

	for (size_t i = 0; i < GD_ARRAY_SIZE(types); i++)
		if (!strncmp(k, types[i], strlen(types[i])))
			p = k + strlen(types[i]);
	if (!p || !*p)
		return false;
	size_t n = 0;
	for (; *p && *p != ' '; p++, n++)
		if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		      (*p >= '0' && *p <= '9') || *p == '+' || *p == '/' ||
		      *p == '='))
			return false;
	if (n < 16)
		return false;
	for (; *p; p++)
		if (*p == '"' || *p == '\\' || *p == '\n' || *p == '\r')
			return false;
	return true;
}

