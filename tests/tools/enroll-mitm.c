/*
 * enroll-mitm: a man in the middle of an enrollment (tests, protocol.md
 * 1.10.4 and 1.10.10).  It terminates the client's TLS with a certificate
 * of its own (an in-memory CA and server identity), reads the client's
 * ENROLL, and enrolls at the gateway with a key of its own (MITMDIR's),
 * in a pairing session of its own; then relays what the gateway answers
 * back to the client.
 *
 *   enroll-mitm [-f | -r] PORT GATEWAY:PORT MITMDIR
 *
 *   -f  forward the client's CSR instead of one for the MITM's key (the
 *       gateway must refuse it: not the session's key)
 *   -r  no gateway at all: answer the client's ENROLL with PENDING and
 *       REFUSED ("refused at once") in one write (a client must take two
 *       messages that arrive together)
 *
 * Prints "client-code C" (the code of its session with the client) and
 * "gateway-code G" (of its session with the gateway), then what the
 * gateway answered ("answer PENDING|ISSUED|REFUSED"); with ISSUED it also
 * stores the certificate in MITMDIR (its key got one) and prints
 * "mitm-stored".  Exit 0, 1 on error, 2 usage.
 */
#include <sys/socket.h>
#include <sys/stat.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/enrollproto.h"
#include "tls/tlsclient.h"
#include "tls/tlsid.h"
#include "base/util.h"

#define IO_MS	60000

/* One whole message from ssl into buf; its length, or -1. */
static long
read_msg(SSL *ssl, int fd, uint8_t *buf, int from_client,
    struct enroll_msg *m)
{
	const char *why = NULL;
	char err[256];
	size_t blen;
	long r;

	if (tlsclient_read(ssl, fd, buf, ENROLL_HDR_LEN, IO_MS, err,
	    sizeof(err)) == -1) {
		fprintf(stderr, "enroll-mitm: read: %s\n", err);
		return -1;
	}
	blen = (size_t)buf[6] << 8 | buf[7];
	if (blen > ENROLL_BODY_MAX || (blen > 0 && tlsclient_read(ssl, fd,
	    buf + ENROLL_HDR_LEN, blen, IO_MS, err, sizeof(err)) == -1)) {
		fprintf(stderr, "enroll-mitm: read body\n");
		return -1;
	}
	if ((r = enroll_decode(buf, ENROLL_HDR_LEN + blen, from_client, m,
	    &why)) <= 0) {
		fprintf(stderr, "enroll-mitm: decode: %s\n", why ? why : "short");
		return -1;
	}
	return r;
}

/* Everything run() makes, freed by main after it (not atexit: OpenSSL's
 * own atexit cleanup, registered later, would run first). */
static struct tlsid_store *st;
static struct tlsid_client *mc;
static char *csr, *cert, *ca;
static uint8_t *buf, *out;
static SSL_CTX *sctx, *cctx;
static SSL *cs, *gs;

static void
cleanup(void)
{
	SSL_free(cs);
	SSL_free(gs);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	tlsid_client_free(mc);
	tlsid_store_free(st);
	free(csr);
	free(cert);
	free(ca);
	free(buf);
	free(out);
}

static int
run(int argc, char **argv)
{
	struct sockaddr_in sin;
	struct enroll_msg m;
	const char *f[ENROLL_F_MAX] = { NULL };
	char err[512], code[TLSID_CODE_LEN + 1], name[TLSID_NAME_MAX + 2],
	    role[16];
	int ch, fwd = 0, quick = 0, lfd, cfd, gfd, one = 1;
	long n;

	buf = xcalloc(1, ENROLL_MSG_MAX);
	out = xcalloc(1, ENROLL_MSG_MAX);

	while ((ch = getopt(argc, argv, "fr")) != -1) {
		if (ch != 'f' && ch != 'r') {
			fprintf(stderr, "usage: enroll-mitm [-f | -r] port "
			    "gateway:port mitmdir\n");
			return 2;
		}
		if (ch == 'f')
			fwd = 1;
		else
			quick = 1;
	}
	argc -= optind;
	argv += optind;
	if (argc != 3)
		return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	(void)mkdir(argv[2], 0700);
	if ((st = tlsid_store_generate("gw", err, sizeof(err))) == NULL ||
	    (sctx = tlsid_ctx_server(st, TLSID_PAIRING, NULL, NULL, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "enroll-mitm: %s\n", err);
		return 1;
	}
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(argv[0]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) == -1 ||
	    listen(lfd, 1) == -1) {
		perror("enroll-mitm: listen");
		return 1;
	}
	printf("listening\n");
	if ((cfd = accept(lfd, NULL, NULL)) == -1)
		return 1;
	cs = SSL_new(sctx);
	SSL_set_fd(cs, cfd);
	if (SSL_accept(cs) != 1 || tlsid_pair_code(cs, code) == -1) {
		fprintf(stderr, "enroll-mitm: the client's handshake failed\n");
		return 1;
	}
	printf("client-code %s\n", code);
	if (read_msg(cs, cfd, buf, 1, &m) == -1 || m.type != ENROLL_T_ENROLL)
		return 1;
	enroll_field(&m, ENROLL_F_NAME, name, sizeof(name));
	enroll_field(&m, ENROLL_F_ROLE, role, sizeof(role));
	csr = xcalloc(1, m.flen[ENROLL_F_CSR] + 1);
	enroll_field(&m, ENROLL_F_CSR, csr, m.flen[ENROLL_F_CSR] + 1);
	if (quick) {
		n = enroll_encode(out, ENROLL_T_PENDING, NULL);
		f[ENROLL_F_REASON] = "refused at once";
		n += enroll_encode(out + n, ENROLL_T_REFUSED, f);
		if (tlsclient_write(cs, cfd, out, (size_t)n, IO_MS, err,
		    sizeof(err)) == -1)
			return 1;
		printf("answer PENDING+REFUSED\n");
		sleep(1);
		return 0;
	}

	/* its own pairing at the gateway, as the client's name */
	if ((mc = tlsid_client_key(argv[2], name, tlsid_role_parse(role), err,
	    sizeof(err))) == NULL || (cctx = tlsid_ctx_client(mc,
	    TLSID_PAIRING, NULL, NULL, err, sizeof(err))) == NULL) {
		fprintf(stderr, "enroll-mitm: %s\n", err);
		return 1;
	}
	{
		char host[256], *colon;
		struct sockaddr_in g;

		usbgw_strlcpy(host, argv[1], sizeof(host));
		if ((colon = strrchr(host, ':')) == NULL)
			return 2;
		*colon = '\0';
		memset(&g, 0, sizeof(g));
		g.sin_family = AF_INET;
		g.sin_port = htons((uint16_t)atoi(colon + 1));
		inet_pton(AF_INET, host, &g.sin_addr);
		gfd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(gfd, (struct sockaddr *)&g, sizeof(g)) == -1) {
			perror("enroll-mitm: connect");
			return 1;
		}
	}
	if ((gs = tlsclient_connect(cctx, gfd, IO_MS, err, sizeof(err))) ==
	    NULL || tlsid_pair_code(gs, code) == -1) {
		fprintf(stderr, "enroll-mitm: gateway: %s\n", err);
		return 1;
	}
	printf("gateway-code %s\n", code);
	f[ENROLL_F_NAME] = name;
	f[ENROLL_F_ROLE] = role;
	f[ENROLL_F_CSR] = fwd ? csr : tlsid_client_csr(mc);
	if ((n = enroll_encode(out, ENROLL_T_ENROLL, f)) < 0 ||
	    tlsclient_write(gs, gfd, out, (size_t)n, IO_MS, err,
	    sizeof(err)) == -1)
		return 1;
	for (;;) {
		if ((n = read_msg(gs, gfd, buf, 0, &m)) == -1)
			return 1;
		printf("answer %s\n", enroll_type_name(m.type));
		if (tlsclient_write(cs, cfd, buf, (size_t)n, IO_MS, err,
		    sizeof(err)) == -1)
			fprintf(stderr, "enroll-mitm: to the client: %s\n", err);
		if (m.type == ENROLL_T_ISSUED) {
			free(cert);
			free(ca);
			cert = xcalloc(1, m.flen[ENROLL_F_CERT] + 1);
			ca = xcalloc(1, m.flen[ENROLL_F_CA] + 1);
			enroll_field(&m, ENROLL_F_CERT, cert,
			    m.flen[ENROLL_F_CERT] + 1);
			enroll_field(&m, ENROLL_F_CA, ca, m.flen[ENROLL_F_CA] + 1);
			if (tlsid_client_install(mc, cert, strlen(cert), ca,
			    strlen(ca), err, sizeof(err)) == 0)
				printf("mitm-stored\n");
			else
				fprintf(stderr, "enroll-mitm: %s\n", err);
		}
		if (m.type != ENROLL_T_PENDING)
			break;
	}
	sleep(1);	/* let the client read it */
	return 0;
}

int
main(int argc, char **argv)
{
	int rc = run(argc, argv);

	cleanup();
	return rc;
}
