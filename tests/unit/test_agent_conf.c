/*
 * usbgw-agent's configuration (client/agent/aconf.c): every key, the
 * defaults, -l and -a over the file, allow-from against peers, and every
 * error with its FILE:LINE:COLUMN, all of them reported in one pass.
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../client/agent/aconf.h"
#include "tap.h"
#include "base/util.h"

static struct aconf *
parse(const char *text, char **errs)
{
	struct aconf *c = aconf_new();

	if (aconf_parse_buf(c, "a.conf", text, strlen(text), errs) != 0) {
		aconf_free(c);
		return NULL;
	}
	aconf_finish(c);
	return c;
}

/* The whole error text of a bad file must be exactly want. */
static void
bad(const char *text, const char *want)
{
	char *errs = NULL, desc[60];
	struct aconf *c = parse(text, &errs);
	size_t i;

	snprintf(desc, sizeof(desc), "%s", text);
	for (i = 0; desc[i] != '\0'; i++)
		if ((unsigned char)desc[i] < 0x20)
			desc[i] = '|';
	ok(c == NULL, "refused: %s", desc);
	is_str(errs != NULL ? errs : "(none)", want, "... error text");
	aconf_free(c);
	free(errs);
}

static bool
peer_ok(const struct aconf *c, const char *addr)
{
	struct sockaddr_in in;
	struct sockaddr_in6 in6;

	memset(&in, 0, sizeof(in));
	memset(&in6, 0, sizeof(in6));
	if (inet_pton(AF_INET, addr, &in.sin_addr) == 1) {
		in.sin_family = AF_INET;
		return aconf_allowed(c, (struct sockaddr *)&in);
	}
	if (inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1) {
		in6.sin6_family = AF_INET6;
		return aconf_allowed(c, (struct sockaddr *)&in6);
	}
	return false;
}

static void
t_defaults(void)
{
	const struct net_addr *la;
	struct aconf *c;
	char *errs = NULL;

	c = parse("", &errs);
	ok(c != NULL, "an empty file is fine");
	is_int((int)aconf_listen_addrs(c, &la), 1, "default: one listener");
	is_str(la[0].host, "", "... on every address");
	is_str(la[0].port, "3240", "... port 3240");
	is_int((int)c->nallow, 0, "default: nobody allowed");
	ok(!peer_ok(c, "127.0.0.1"), "... not even loopback");
	is_str(c->state_file, ACONF_DEFAULT_STATE, "default state file");
	is_str(c->audit_log, "", "no audit file by default");
	is_int((int)c->max_connections, 64, "max-connections 64");
	ok(c->zero_copy, "zero-copy on by default");
	is_int((int)keep_list_len(c->keep), 3, "built-in keep-list: 3 rules");
	is_int((int)keep_list_len(c->noreset), 2, "built-in no-reset: 2 rules");
	aconf_free(c);
}

static void
t_keys(void)
{
	const struct net_addr *la;
	struct aconf *c;
	char *errs = NULL, err[256];

	c = parse("# a comment\n"
	    "name tc-17.desk_3\n"
	    "  listen 127.0.0.1:3241   # trailing comment\n"
	    "listen [::1]:3242\n"
	    "allow-from 10.0.0.0/8 192.0.2.7\n"
	    "allow-from 2001:db8::/32\n"
	    "keep-local serial \"KEEP\"\n"
	    "export id 1234:5678\n"
	    "no-reset id 0781:5567\n"
	    "audit-log /var/log/usbgw-agent.audit\n"
	    "state-file none\n"
	    "gateway gw1.example.org\n"
	    "gateway 192.0.2.1:4000\n"
	    "zero-copy off\n"
	    "max-connections 8\r\n", &errs);
	ok(c != NULL, "every key parses");
	if (c == NULL) {
		diag("%s", errs);
		free(errs);
		return;
	}
	is_str(c->name, "tc-17.desk_3", "name");
	is_int((int)aconf_listen_addrs(c, &la), 2, "two listeners");
	is_str(la[0].host, "127.0.0.1", "... first host");
	is_str(la[1].host, "::1", "... second host (IPv6)");
	is_str(la[1].port, "3242", "... its port");
	is_int((int)c->nallow, 3, "three allow-from networks");
	ok(peer_ok(c, "10.1.2.3"), "10.1.2.3 in 10.0.0.0/8");
	ok(peer_ok(c, "::ffff:10.9.9.9"), "a mapped IPv6 peer in 10.0.0.0/8");
	ok(peer_ok(c, "192.0.2.7"), "a single address");
	ok(!peer_ok(c, "192.0.2.8"), "... and not its neighbour");
	ok(peer_ok(c, "2001:db8::5"), "IPv6 network");
	ok(!peer_ok(c, "2001:db9::5"), "... not outside it");
	is_int((int)keep_list_len(c->keep), 5, "two file rules + 3 built-in");
	is_int((int)keep_list_len(c->noreset), 3, "one no-reset + 2 built-in");
	is_str(c->audit_log, "/var/log/usbgw-agent.audit", "audit-log");
	is_str(c->state_file, "", "state-file none");
	is_int((int)c->ngateways, 2, "two gateways");
	is_str(c->gateways[0].port, "3240", "... default port 3240");
	is_str(c->gateways[1].port, "4000", "... explicit port");
	is_int((int)c->max_connections, 8, "max-connections");
	ok(!c->zero_copy, "zero-copy off");

	/* -l replaces the file's listen lines, -a adds. */
	ok(aconf_flag_listen(c, "127.0.0.1:5000", err, sizeof(err)) == 0, "-l");
	ok(aconf_flag_listen(c, "127.0.0.2:5001", err, sizeof(err)) == 0,
	    "second -l");
	is_int((int)aconf_listen_addrs(c, &la), 2, "-l replaced the file's");
	is_str(la[0].port, "5000", "... first -l");
	ok(aconf_flag_allow(c, "127.0.0.1", err, sizeof(err)) == 0, "-a");
	ok(peer_ok(c, "127.0.0.1") && peer_ok(c, "10.0.0.1"), "-a adds");
	ok(aconf_flag_allow(c, "127.0.0.1/8", err, sizeof(err)) == -1,
	    "-a with host bits refused");
	ok(strstr(err, "-a 127.0.0.1/8: ") == err &&
	    strstr(err, "host bits") != NULL, "... saying so: %s", err);
	ok(aconf_flag_listen(c, "localhost:1", err, sizeof(err)) == -1,
	    "-l with a host name refused");
	aconf_free(c);

	c = parse("listen none\n", &errs);
	ok(c != NULL && aconf_listen_addrs(c, &la) == 0, "listen none");
	aconf_free(c);
}

static void
t_errors(void)
{
	char text[5000], *errs = NULL, *p;
	struct aconf *c;
	int i, n;

	bad("nmae x\n", "a.conf:1:1: unknown key 'nmae': expected name, "
	    "listen, allow-from, keep-local, export, no-reset, audit-log, "
	    "state-file, gateway, max-connections, tls, tls-dir, tls-renew-days, "
	    "tls-renew-check or zero-copy\n");
	bad("zero-copy maybe\n", "a.conf:1:11: zero-copy: expected on or off, "
	    "got 'maybe'\n");
	bad("zero-copy on\nzero-copy off\n", "a.conf:2:11: zero-copy: already "
	    "set at line 1\n");
	bad("listen 1.2.3.4:99999\n", "a.conf:1:8: listen: expected a port "
	    "number from 0 to 65535, got '1.2.3.4:99999'\n");
	bad("listen host.example:1\n", "a.conf:1:8: listen: expected a "
	    "numeric IPv4 or [IPv6] address or '*' before the port, got "
	    "'host.example:1'\n");
	bad("allow-from 10.0.0.0/8  10.1.2.3/8\n", "a.conf:1:24: allow-from: "
	    "10.1.2.3/8 has host bits set; did you mean 10.0.0.0/8?\n");
	bad("allow-from vdi.example\n", "a.conf:1:12: allow-from: expected an "
	    "address or CIDR network, got 'vdi.example'\n");
	bad("allow-from\n", "a.conf:1:11: allow-from: expected an address "
	    "or CIDR network\n");
	bad("keep-local id 1234:5678 to-host x\n", "a.conf:1:25: keep-local: "
	    "attribute 'to-host' is not allowed here (only id, name, "
	    "manufacturer, serial, hash, with-interface, via-port)\n");
	bad("\texport\tid 1234:5678 if true\n", "a.conf:1:22: export: 'if' is "
	    "not allowed here (only id, name, manufacturer, serial, hash, "
	    "with-interface, via-port)\n");
	bad("keep-local name \"\xc3\xa9t\xc3\xa9\" colour red\n",
	    "a.conf:1:23: keep-local: expected attribute name, got 'colour'\n");
	bad("export\n", "a.conf:1:7: export: expected a rule (id, name, "
	    "manufacturer, serial, hash, with-interface, via-port)\n");
	bad("max-connections 0\n", "a.conf:1:17: max-connections: expected a "
	    "number from 1 to 1024, got '0'\n");
	bad("name a b\n", "a.conf:1:8: name: expected the end of the line "
	    "after a name, got 'b'\n");
	bad("name tc1\nname tc2\n", "a.conf:2:6: name: already set at line 1\n");
	bad("name bad/name\n", "a.conf:1:6: name: expected 1 to 31 letters, "
	    "digits, '.', '-' or '_', got 'bad/name'\n");
	bad("listen none\nlisten 127.0.0.1:1\n", "a.conf:2:8: listen: line 1 "
	    "said none\n");
	bad("audit-log relative.log\n", "a.conf:1:11: audit-log: expected an "
	    "absolute path of at most 1023 bytes, got 'relative.log'\n");
	bad("state-file\n", "a.conf:1:11: state-file: expected an absolute "
	    "path or none\n");
	bad("gateway :80\n", "a.conf:1:9: gateway: expected a host, got "
	    "':80'\n");
	bad("name\001x\n", "a.conf:1:5: expected text, got control character "
	    "0x01\n");

	/* Every error at once, each with its place. */
	bad("name tc1\n"
	    "listen 127.0.0.1:http\n"
	    "allow-from 127.0.0.1\n"
	    "allow-from 300.1.1.1\n"
	    "keep-local id 1234:zzzz\n"
	    "max-connections many\n",
	    "a.conf:2:8: listen: expected a port number from 0 to 65535, got "
	    "'127.0.0.1:http'\n"
	    "a.conf:4:12: allow-from: '300.1.1.1' is not a valid IPv4 "
	    "address\n"
	    "a.conf:5:15: keep-local: expected vid:pid after 'id', got "
	    "'1234:zzzz'\n"
	    "a.conf:6:17: max-connections: expected a number from 1 to 1024, "
	    "got 'many'\n");

	/* Bounded: at most ACONF_MAX_ERRORS, then one "giving up". */
	p = text;
	for (i = 0; i < 60; i++)
		p += snprintf(p, sizeof(text) - (size_t)(p - text), "bogus\n");
	c = parse(text, &errs);
	ok(c == NULL && errs != NULL, "60 bad lines refused");
	for (n = 0, p = errs; p != NULL && (p = strchr(p, '\n')) != NULL; p++)
		n++;
	is_int(n, ACONF_MAX_ERRORS + 1, "... %d errors and one more line",
	    ACONF_MAX_ERRORS);
	ok(errs != NULL && strstr(errs, "a.conf:50:1: unknown key") != NULL &&
	    strstr(errs, "a.conf:51:") == NULL, "... the first 50");
	ok(errs != NULL && strstr(errs, "a.conf: too many errors, giving "
	    "up\n") != NULL, "... then 'too many errors'");
	free(errs);
	aconf_free(c);

	/* A line longer than the bound. */
	memset(text, 'x', sizeof(text));
	text[sizeof(text) - 1] = '\0';
	c = aconf_new();
	ok(aconf_parse_buf(c, "a.conf", text, sizeof(text) - 1, &errs) == -1,
	    "an overlong line refused");
	ok(errs != NULL && strncmp(errs, "a.conf:1:4097: expected a line of "
	    "at most 4096 bytes", 50) == 0, "... at its place: %s",
	    errs != NULL ? errs : "");
	free(errs);
	aconf_free(c);
	c = aconf_new();
	ok(aconf_parse_buf(c, "a.conf", "name x\0y\n", 9, &errs) == -1 &&
	    errs != NULL && strcmp(errs, "a.conf:1:7: expected text, got a "
	    "NUL byte\n") == 0, "a NUL byte refused at its column");
	free(errs);
	aconf_free(c);
}

int
main(void)
{
	t_defaults();
	t_keys();
	t_errors();
	/* tls-renew-days, tls-renew-check */
	{
		struct aconf *rc = aconf_new();
		char *e = NULL;
		int n;
		static const char ok_txt[] = "name tc17\ntls-renew-days 7\n"
		    "tls-renew-check 90m\n";
		static const char bad_txt[] = "tls-renew-days 0\n"
		    "tls-renew-check 500ms\n";

		is_int(aconf_parse_buf(rc, "r.conf", ok_txt, sizeof(ok_txt) - 1,
		    &e), 0, "tls-renew-days 7, tls-renew-check 90m");
		ok(rc->renew_days == 7 && rc->renew_check_ms == 90 * 60 * 1000,
		    "... in force (%u days, %llu ms)", rc->renew_days,
		    (unsigned long long)rc->renew_check_ms);
		free(e);
		e = NULL;
		aconf_free(rc);
		rc = aconf_new();
		ok(rc->renew_days == 30 && rc->renew_check_ms == 12 * 3600 *
		    1000ULL, "defaults: 30 days, every 12 h");
		n = aconf_parse_buf(rc, "r.conf", bad_txt, sizeof(bad_txt) - 1,
		    &e);
		ok(n != 0 && e != NULL && strstr(e, "r.conf:1:16: "
		    "tls-renew-days: expected a number of days from 1 to 3650, "
		    "got '0'") != NULL && strstr(e, "r.conf:2:17: "
		    "tls-renew-check: expected a duration from 1s to 7d") !=
		    NULL, "bad values refused, each named: %s", e ? e : "");
		free(e);
		aconf_free(rc);
	}

	return done_testing();
}
