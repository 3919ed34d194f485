/*
 * tlsid-issue: give a vhci host (or agent) a certificate from a gateway's
 * TLS store, as enrollment will (issue 15 item 2; until then, for tests).
 *
 *   tlsid-issue [-r ROLE] [-d DAYS | -e SECONDS] [-x] [-o] [-D DB | -N]
 *               STOREDIR CLIENTDIR NAME
 *   tlsid-issue -G SECONDS STOREDIR
 *
 * Makes (or loads) CLIENTDIR/ROLE.key with tlsid_client_key, issues a
 * certificate for its CSR from STOREDIR (the gateway's tls-dir: the
 * gateway must have started once) and installs it with the CA as
 * CLIENTDIR/ROLE.pem and gateway-ca.pem (tlsid_client_install).
 *
 *   -r ROLE  host (default) or agent
 *   -d DAYS  validity (default 30)
 *   -x       expired: issued 10 days ago for 1 day
 *   -e SECS  valid for SECS seconds from now (issued 1 day - SECS ago)
 *   -o       from another CA (made in memory): a certificate this
 *            gateway did not issue; gateway-ca.pem is then that CA
 *   -D DB    register the certificate as an active row of DB's agents
 *            table (as `usbgw agent approve` would; an active row of
 *            the same name is marked replaced).  Default: the one *.db
 *            file beside STOREDIR that has an agents table, if exactly
 *            one has; -N: do not register (an "unknown" certificate)
 *   -G SECS  re-issue STOREDIR's gateway.pem (same key) to expire in
 *            SECS seconds (tests of the gateway's renewal timer)
 *
 * Prints the certificate's fingerprint.  Exit 0, 1 on error, 2 on usage.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "tls/tlsid.h"
#include "base/util.h"

/* STOREDIR's sibling *.db with an agents table, if exactly one; or NULL. */
static char *
find_db(const char *storedir)
{
	char *copy = xstrdup(storedir), *dir = dirname(copy), *found = NULL;
	char path[2048];
	struct dirent *de;
	sqlite3 *db;
	size_t n;
	int count = 0;
	DIR *d;

	if ((d = opendir(dir)) == NULL) {
		free(copy);
		return NULL;
	}
	while ((de = readdir(d)) != NULL) {
		n = strlen(de->d_name);
		if (n < 4 || strcmp(de->d_name + n - 3, ".db") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) ==
		    SQLITE_OK && sqlite3_exec(db, "SELECT 1 FROM agents LIMIT 0",
		    NULL, NULL, NULL) == SQLITE_OK) {
			count++;
			free(found);
			found = xstrdup(path);
		}
		sqlite3_close(db);
	}
	closedir(d);
	free(copy);
	if (count != 1) {
		free(found);
		return NULL;
	}
	return found;
}

/* An active row for the certificate (the name's earlier one replaced). */
static int
register_cert(const char *dbpath, const char *cert, const char *csr)
{
	struct tlsid_peer p;
	char kf[TLSID_FPR_HEX + 1], err[256];
	sqlite3_stmt *st = NULL;
	sqlite3 *db = NULL;
	int rc = -1;

	if (tlsid_cert_info(cert, strlen(cert), &p) == -1 ||
	    tlsid_csr_key_fpr(csr, strlen(csr), kf, err, sizeof(err)) == -1) {
		fprintf(stderr, "tlsid-issue: cannot read what was issued\n");
		return -1;
	}
	if (sqlite3_open_v2(dbpath, &db, SQLITE_OPEN_READWRITE, NULL) !=
	    SQLITE_OK)
		goto out;
	sqlite3_busy_timeout(db, 10000);
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_prepare_v2(db, "UPDATE agents SET state = 'replaced', "
	    "ended_at = ?2, end_reason = 'tlsid-issue' WHERE name = ?1 AND "
	    "state = 'active'", -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(st, 1, p.name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)time(NULL));
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out;
	sqlite3_finalize(st);
	if (sqlite3_prepare_v2(db, "INSERT INTO agents (name, role, state, "
	    "fingerprint, serial, key_fingerprint, not_after, created_at, "
	    "approved_at, approved_by) VALUES (?1, ?2, 'active', ?3, ?4, ?5, "
	    "?6, ?7, ?7, 'tlsid-issue')", -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(st, 1, p.name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 2, tlsid_role_name(p.role), -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 3, p.fpr, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, p.serial, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, kf, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)p.not_after);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)time(NULL));
	if (sqlite3_step(st) != SQLITE_DONE)
		goto out;
	if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	rc = 0;
out:
	if (rc == -1)
		fprintf(stderr, "tlsid-issue: %s: %s\n", dbpath,
		    db != NULL ? sqlite3_errmsg(db) : "cannot open");
	sqlite3_finalize(st);
	sqlite3_close(db);
	return rc;
}

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
	fprintf(stderr, "usage: tlsid-issue [-r host|agent] [-d days | -e secs] "
	    "[-x] [-o] [-D db | -N] storedir clientdir name\n"
	    "       tlsid-issue -G secs storedir\n");
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
	int ch, days = 30, expired = 0, other = 0, noreg = 0;
	long secs = 0, gwsecs = 0;
	char *dbpath = NULL;
	time_t now = time(NULL);

	while ((ch = getopt(argc, argv, "D:d:e:G:Nor:x")) != -1) {
		switch (ch) {
		case 'D':
			dbpath = xstrdup(optarg);
			break;
		case 'd':
			days = atoi(optarg);
			break;
		case 'e':
			secs = atol(optarg);
			if (secs < 1 || secs >= 86400)
				usage();
			break;
		case 'G':
			gwsecs = atol(optarg);
			if (gwsecs < 1 || gwsecs > 30 * 86400)
				usage();
			break;
		case 'N':
			noreg = 1;
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
	if (gwsecs > 0) {
		struct tlsid_store_opts o;

		if (argc != 1)
			usage();
		memset(&o, 0, sizeof(o));
		o.name = "usbgw";
		if ((st = tlsid_store_open(argv[0], &o, err, sizeof(err))) ==
		    NULL || tlsid_store_renew(st, now + gwsecs - (gwsecs / 86400 +
		    1) * 86400, (int)(gwsecs / 86400 + 1), err, sizeof(err)) ==
		    -1) {
			fprintf(stderr, "tlsid-issue: %s\n", err);
			return 1;
		}
		printf("%s\n", tlsid_store_fpr(st));
		tlsid_store_free(st);
		return 0;
	}
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
	    expired ? now - 10 * 86400 : secs > 0 ? now - 86400 + secs : now,
	    expired || secs > 0 ? 1 : days, &cert, fpr,
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
	if (!noreg && dbpath == NULL)
		dbpath = find_db(argv[0]);
	if (!noreg && dbpath != NULL && register_cert(dbpath, cert, csr) == -1)
		return 1;
	printf("%s\n", fpr);
	free(dbpath);
	free(ca);
	free(cert);
	tlsid_client_free(cl);
	tlsid_store_free(st);
	return 0;
}
