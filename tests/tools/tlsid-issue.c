/*
 * tlsid-issue: give a vhci host (or agent) a certificate from a gateway's
 * TLS store, as enrollment will (issue 15 item 2; until then, for tests).
 *
 *   tlsid-issue [-r ROLE] [-d DAYS] [-x] [-o] STOREDIR CLIENTDIR NAME
 *
 * Makes (or loads) CLIENTDIR/ROLE.key with tlsid_client_key, issues a
 * certificate for its CSR from STOREDIR (the gateway's tls-dir: the
 * gateway must have started once) and installs it with the CA as
 * CLIENTDIR/ROLE.pem and gateway-ca.pem (tlsid_client_install).
 *
 *   -r ROLE  host (default) or agent
 *   -d DAYS  validity (default 30)
 *   -x       expired: issued 10 days ago for 1 day
 *   -o       from another CA (made in memory): a certificate this
 *            gateway did not issue; gateway-ca.pem is then that CA
 *
 * Prints the certificate's fingerprint.  Exit 0, 1 on error, 2 on usage.
 */
#include <sys/stat.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tlsid.h"
#include "util.h"

/* DIR/ROLE.pem or DIR/gateway-ca.pem, 0644. */
static int
write_file(const char *dir, enum tlsid_role role, const char *which,
    const char *pem)
{
	char path[1024];
	FILE *f;

	if (strcmp(which, "ca") == 0)
		snprintf(path, sizeof(path), "%s/gateway-ca.pem", dir);
	else
		snprintf(path, sizeof(path), "%s/%s.pem", dir,
		    tlsid_role_name(role));
	if ((f = fopen(path, "w")) == NULL || fputs(pem, f) == EOF ||
	    fclose(f) == EOF) {
		perror(path);
		return -1;
	}
	return 0;
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr, "usage: tlsid-issue [-r host|agent] [-d days] [-x] "
	    "[-o] storedir clientdir name\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	struct tlsid_store *st;
	struct tlsid_client *cl;
	enum tlsid_role role = TLSID_ROLE_HOST;
	char err[512], fpr[TLSID_FPR_HEX + 1], *cert = NULL, *ca;
	const char *csr;
	int ch, days = 30, expired = 0, other = 0;
	time_t now = time(NULL);

	while ((ch = getopt(argc, argv, "d:or:x")) != -1) {
		switch (ch) {
		case 'd':
			days = atoi(optarg);
			break;
		case 'o':
			other = 1;
			break;
		case 'r':
			role = tlsid_role_parse(optarg);
			if (role != TLSID_ROLE_HOST && role != TLSID_ROLE_AGENT)
				usage();
			break;
		case 'x':
			expired = 1;
			break;
		default:
			usage();
		}
	}
	argc -= optind;
	argv += optind;
	if (argc != 3)
		usage();
	if (other)
		st = tlsid_store_generate("other-gw", err, sizeof(err));
	else {
		struct tlsid_store_opts o;

		memset(&o, 0, sizeof(o));
		o.name = "usbgw";
		st = tlsid_store_open(argv[0], &o, err, sizeof(err));
	}
	if (st == NULL) {
		fprintf(stderr, "tlsid-issue: %s\n", err);
		return 1;
	}
	if (mkdir(argv[1], 0700) == -1 && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	if ((cl = tlsid_client_key(argv[1], argv[2], role, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "tlsid-issue: %s\n", err);
		return 1;
	}
	csr = tlsid_client_csr(cl);
	if (tlsid_issue_at(st, csr, strlen(csr), argv[2], role,
	    expired ? now - 10 * 86400 : now, expired ? 1 : days, &cert, fpr,
	    err, sizeof(err)) == -1) {
		fprintf(stderr, "tlsid-issue: %s\n", err);
		return 1;
	}
	ca = tlsid_store_ca_pem(st);
	if (expired) {
		/* install checks the validity: write the files as it would */
		if (write_file(argv[1], role, "pem", cert) == -1 ||
		    write_file(argv[1], role, "ca", ca) == -1)
			return 1;
	} else if (tlsid_client_install(cl, cert, strlen(cert), ca, strlen(ca),
	    err, sizeof(err)) == -1) {
		fprintf(stderr, "tlsid-issue: %s\n", err);
		return 1;
	}
	printf("%s\n", fpr);
	free(ca);
	free(cert);
	tlsid_client_free(cl);
	tlsid_store_free(st);
	return 0;
}
