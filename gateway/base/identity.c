/*
 * Device identity helpers: the descriptor hash and address handling.
 */
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/identity.h"

int
identity_hash(const struct iovec *parts, size_t n,
    char out[USBGW_HASH_HEX + 1])
{
	static const char hex[] = "0123456789abcdef";
	EVP_MD_CTX	*ctx;
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	size_t		 i;
	int		 rv = -1;

	out[0] = '\0';
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		return -1;
	if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1)
		goto done;
	for (i = 0; i < n; i++) {
		if (parts[i].iov_len == 0)
			continue;
		if (EVP_DigestUpdate(ctx, parts[i].iov_base,
		    parts[i].iov_len) != 1)
			goto done;
	}
	if (EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != 32)
		goto done;
	for (i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 0xf];
	}
	out[USBGW_HASH_HEX] = '\0';
	rv = 0;
done:
	EVP_MD_CTX_free(ctx);
	return rv;
}

int
usbgw_addr_parse(const char *s, struct usbgw_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (strchr(s, ':') != NULL) {
		if (inet_pton(AF_INET6, s, out->addr) != 1)
			return -1;
		out->family = AF_INET6;
		return 0;
	}
	if (inet_pton(AF_INET, s, out->addr) != 1)
		return -1;
	out->family = AF_INET;
	return 0;
}

char *
usbgw_addr_format(const struct usbgw_addr *a, char *buf, size_t len)
{
	if (len == 0)
		return buf;
	buf[0] = '\0';
	if (a->family == AF_INET || a->family == AF_INET6) {
		if (inet_ntop(a->family, a->addr, buf, len) == NULL)
			buf[0] = '\0';
	}
	return buf;
}

char *
identity_ifaces_format(const struct usbgw_identity *id, char *buf, size_t len)
{
	size_t	i, off = 0;
	int	n;

	if (len == 0)
		return buf;
	buf[0] = '\0';
	for (i = 0; i < id->n_ifaces && i < USBGW_IFACE_MAX; i++) {
		n = snprintf(buf + off, len - off, "%s%02x:%02x:%02x",
		    i ? " " : "", id->ifaces[i].cls, id->ifaces[i].subcls,
		    id->ifaces[i].proto);
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = '\0';	/* whole entries only */
			break;
		}
		off += (size_t)n;
	}
	return buf;
}

static int
prefix_match(const uint8_t *net, const uint8_t *a, unsigned prefix)
{
	unsigned	full = prefix / 8, rem = prefix % 8;
	uint8_t		mask;

	if (memcmp(net, a, full) != 0)
		return 0;
	if (rem == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rem));
	return (net[full] & mask) == (a[full] & mask);
}

/*
 * Is host inside net/prefix?  An IPv4 network also takes an IPv4-mapped
 * IPv6 host (::ffff:a.b.c.d, what a dual-stack listener sees).
 */
bool
usbgw_addr_in(const struct usbgw_addr *net, unsigned prefix,
    const struct usbgw_addr *host)
{
	static const uint8_t v4mapped[12] = {
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
	};

	if (host->family == net->family)
		return prefix_match(net->addr, host->addr, prefix);
	if (net->family == AF_INET && host->family == AF_INET6 &&
	    memcmp(host->addr, v4mapped, sizeof(v4mapped)) == 0)
		return prefix_match(net->addr, host->addr + 12, prefix);
	return false;
}
