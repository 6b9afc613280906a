/* err.c: descriptions of enum gd_err. */
#include "err.h"

const char *gd_strerror(int err)
{
	switch (err) {
	case GD_OK: return "success";
	case GD_EINVAL: return "invalid input";
	case GD_ENOMEM: return "out of memory";
	case GD_EIO: return "i/o error";
	case GD_ENOTFOUND: return "not found";
	case GD_EEXIST: return "already exists";
	case GD_EDENIED: return "denied";
	case GD_EUNREACH: return "node unreachable";
	case GD_ETOOBIG: return "too big";
	case GD_ECRYPTO: return "cryptographic failure";
	case GD_EPROTO: return "protocol error";
	case GD_EAGAIN: return "try again";
	}
	return "unknown error";
}
