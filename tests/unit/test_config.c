/*
 * usbgwd.conf parsing: defaults, every key, exporters and hooks, the
 * dump/re-parse round trip, command-line overrides, and every error
 * message with its FILE:LINE, all reported in one pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/config.h"
#include "control/hooks.h"
#include "base/log.h"
#include "tap.h"
#include "base/util.h"

static struct config *
parse(const char *text, char **errs)
{
	struct config *c = config_new();

	*errs = NULL;
	if (config_parse_buf(c, "t.conf", text, strlen(text), errs) != 0) {
		config_free(c);
		return NULL;
	}
	return c;
}

/* One bad line: the whole error text must be exactly want. */
static void
bad(const char *text, const char *want)
{
	char *errs, desc[64];
	struct config *c = parse(text, &errs);
	size_t i;

	snprintf(desc, sizeof(desc), "%s", text);
	for (i = 0; desc[i] != '\0'; i++)
		if ((unsigned char)desc[i] < 0x20)
			desc[i] = '|';
	ok(c == NULL, "refused: %s", desc);
	is_str(errs, want, "message for %s", desc);
	free(errs);
	config_free(c);
}

/*
 * Where the daemon listens: what is configured, else *:3240 in proxy
 * mode and nothing in local mode (issue 12, item 10).
 */
static void
test_listen_addrs(void)
{
	static const char local[] = "mode = local\n";
	static const char local_l[] = "mode = local\nlisten = 127.0.0.1:0\n";
	const struct net_addr *a;
	struct config *c;
	char *errs, err[256];
	size_t n;

	c = config_new();
	n = config_listen_addrs(c, &a);
	is_int(n, 1, "proxy mode, no listen: one address");
	is_str(n == 1 ? a[0].host : "?", "", "... the wildcard");
	is_str(n == 1 ? a[0].port : "?", "3240", "... port 3240");
	config_free(c);

	c = config_new();
	ok(config_parse_buf(c, "l.conf", local, strlen(local), &errs) == 0,
	    "mode = local");
	is_int(config_listen_addrs(c, &a), 0, "local mode, no listen: none");
	config_free(c);

	c = config_new();
	ok(config_parse_buf(c, "l.conf", local_l, strlen(local_l),
	    &errs) == 0, "mode = local, listen = 127.0.0.1:0");
	n = config_listen_addrs(c, &a);
	is_int(n, 1, "local mode, one listen: that one");
	is_str(n == 1 ? a[0].host : "?", "127.0.0.1", "... its host");
	is_str(n == 1 ? a[0].port : "?", "0", "... its port");
	config_free(c);

	c = config_new();
	ok(config_set(c, "mode", "local", err, sizeof(err)) == 0 &&
	    config_set(c, "listen", "*:3240", err, sizeof(err)) == 0,
	    "mode local, then a -l flag *:3240");
	n = config_listen_addrs(c, &a);
	is_int(n, 1, "local mode, listen *:3240 set explicitly: listened on");
	is_str(n == 1 ? a[0].host : "?", "", "... every address");
	config_free(c);
}

/* tls-listen (repeatable, apart from listen) and tls-dir. */
static void
test_tls_keys(void)
{
	static const char good[] = "listen = 127.0.0.1:3240\n"
	    "tls-listen = 127.0.0.1:3241\ntls-listen = [::1]:3242\n"
	    "tls-dir = /var/lib/usbgw/tls\n";
	static const char bad[] = "tls-listen = 127.0.0.1:99999\n"
	    "tls-dir = /a\ntls-dir = /b\n";
	struct config *c;
	char *errs = NULL, *dump;

	c = config_new();
	is_int(c->ntls_listen, 0, "no TLS listener by default");
	is_str(c->tls_dir, "", "tls-dir: derived from the database");
	dump = config_dump(c);
	ok(strstr(dump, "# tls-dir = DATABASE's directory/tls (default)\n") !=
	    NULL, "config_dump says where the default tls-dir is");
	free(dump);
	ok(config_parse_buf(c, "t.conf", good, strlen(good), &errs) == 0,
	    "two tls-listen lines and a tls-dir");
	is_int(c->nlisten, 1, "listen stays one plain address");
	is_int(c->ntls_listen, 2, "tls-listen is repeatable");
	is_str(c->tls_listen[1].host, "::1", "... IPv6 host");
	is_str(c->tls_listen[1].port, "3242", "... its port");
	is_str(c->tls_dir, "/var/lib/usbgw/tls", "tls-dir");
	dump = config_dump(c);
	ok(strstr(dump, "tls-listen = 127.0.0.1:3241\ntls-listen = [::1]:3242\n")
	    != NULL, "config_dump writes both back");
	free(dump);
	config_free(c);

	c = config_new();
	ok(config_parse_buf(c, "t.conf", bad, strlen(bad), &errs) == -1,
	    "a bad tls-listen and a second tls-dir are refused");
	ok(errs != NULL && strstr(errs, "t.conf:1: tls-listen: ") != NULL,
	    "... the address, by line");
	ok(errs != NULL && strstr(errs, "t.conf:3: tls-dir: already set at "
	    "line 2") != NULL, "... the second tls-dir, by line");
	free(errs);
	config_free(c);
}

static void
test_defaults(void)
{
	struct config *c = config_new();

	is_str(c->database, CONFIG_DEFAULT_DB, "default database");
	is_str(c->control_socket, CONFIG_DEFAULT_SOCKET, "default socket");
	is_int(c->control_mode, 0660, "default socket mode");
	is_int(c->nlisten, 0, "no listen address configured");
	is_int(c->poll_interval_ms, 3000, "poll 3 s");
	is_int(c->probe_timeout_ms, 5000, "probe 5 s");
	is_int(c->attach_pending_wait_ms, 0, "no attach wait");
	is_int(c->show_pending, 0, "pending hidden");
	is_int(c->max_connections, 64, "64 control connections");
	is_int(c->max_connections_per_uid, 16, "16 per uid");
	is_int(c->control_max_message, 65536, "64k messages");
	is_int(c->hook_timeout_ms, 10000, "hooks 10 s");
	is_int(c->control_lookup_timeout_ms, 5000, "user lookups 5 s");
	is_int(c->max_sessions_per_host, 16, "16 requests at once per host");
	is_int(c->audit_limit_per_host, 60, "60 rows a minute per host");
	is_int(c->audit_limit_total, 600, "600 rows a minute in all");
	is_int(c->audit_retention_s, 30 * 86400, "audit rows kept 30 days");
	is_int(c->host_names, 1, "host names looked up");
	is_int(c->host_name_ttl_ms, 300000, "host names cached 300 s");
	is_int(c->host_name_timeout_ms, 2000, "host name lookups 2 s");
	is_int(c->max_devices_per_exporter, 64, "64 devices per exporter");
	is_int(c->max_new_devices_per_minute, 64, "64 new devices a minute");
	is_int(c->hook_max_running, 4, "4 hooks at once");
	is_int(c->mode, CONFIG_MODE_PROXY, "proxy mode");
	is_int(c->vhci_controller, -1, "any vhci controller");
	is_int(c->priv[PRIV_READ].n + c->priv[PRIV_APPROVE].n +
	    c->priv[PRIV_ADMIN].n, 0, "no privileges beyond root");
	config_free(c);
}

static const char full[] =
    "# a full configuration\n"
    "\n"
    "database = /var/lib/usbgw/test.db\n"
    "pid-file = none\n"
    "log-level = debug\n"
    "log-target = stderr\n"
    "control-socket = /run/usbgw/c.sock\n"
    "control-group = usbgw\n"
    "control-socket-mode = 0666\n"
    "max-connections = 10\n"
    "max-connections-per-uid = 3\n"
    "control-max-message = 128k\n"
    "control-max-output = 2M\n"
    "control-timeout = 1500ms\n"
    "control-lookup-timeout = 750ms\n"
    "allow-read = alice, bob @usbgw-ro\n"
    "allow-read = 1234\n"
    "allow-approve = @ops\n"
    "allow-admin = @0 carol\n"
    "  listen = 127.0.0.1:3241\n"
    "listen\t=\t[::1]:3242\n"
    "listen = *:3243\n"
    "poll-interval = 2s\n"
    "probe-timeout = 1m\n"
    "attach-pending-wait = 30s\n"
    "show-pending = yes\n"
    "max-sessions = 100\n"
    "max-sessions-per-host = 8\n"
    "audit-limit-per-host = 0\n"
    "audit-limit-total = 1000\n"
    "audit-retention = 90d\n"
    "host-names = no\n"
    "host-name-ttl = 600\n"
    "host-name-timeout = 1500ms\n"
    "max-devices-per-exporter = 12\n"
    "max-new-devices-per-minute = 5\n"
    "hook-timeout = 5s\n"
    "hook-max-running = 2\n"
    "mode = local\n"
    "vhci-controller = 1\n"
    "exporter tc17 192.0.2.17\n"
    "exporter desk-2 [2001:db8::2]:3300\n"
    "exporter sim localhost:4000\n"
    "exporter tc19 192.0.2.19:3244 agent\n"
    "agent tc20 from 2001:DB8:0:0::/64\n"
    "hook pending,access-request /usr/local/bin/notify --chat \"#ops\"\n"
    "hook all logger -t usbgw \"$USBGW_EVENT\"\n"
    "database2 = x\n";

static void
test_full(void)
{
	struct config *c, *c2;
	char *errs, *dump, *dump2;
	const char *nl;

	/* The last line is wrong: everything else must still be checked. */
	c = parse(full, &errs);
	ok(c == NULL, "unknown key refuses the file");
	is_str(errs, "t.conf:48: unknown key \"database2\" (see usbgwd.conf(5))\n",
	    "unknown key reported with its line");
	free(errs);

	nl = strstr(full, "database2");
	c = config_new();
	ok(config_parse_buf(c, "t.conf", full, (size_t)(nl - full), &errs) == 0,
	    "full configuration parses");
	is_str(errs, NULL, "no errors");
	is_str(c->database, "/var/lib/usbgw/test.db", "database");
	is_str(c->pidfile, "", "pid-file none");
	is_int(c->log_level, LOG_LVL_DEBUG, "log-level");
	is_int(c->log_stderr, 1, "log-target");
	is_str(c->control_socket, "/run/usbgw/c.sock", "control-socket");
	is_str(c->control_group, "usbgw", "control-group");
	is_int(c->control_mode, 0666, "control-socket-mode");
	is_int(c->max_connections, 10, "max-connections");
	is_int(c->max_connections_per_uid, 3, "max-connections-per-uid");
	is_int(c->control_max_message, 128 * 1024, "control-max-message 128k");
	is_int(c->control_max_output, 2 * 1024 * 1024, "control-max-output 2M");
	is_int(c->control_timeout_ms, 1500, "control-timeout 1500ms");
	is_int(c->control_lookup_timeout_ms, 750, "control-lookup-timeout 750ms");
	is_int(c->priv[PRIV_READ].n, 4, "four read principals over two lines");
	is_str(c->priv[PRIV_READ].p[0].name, "alice", "alice");
	is_int(c->priv[PRIV_READ].p[2].is_group, 1, "@usbgw-ro is a group");
	is_str(c->priv[PRIV_READ].p[2].name, "usbgw-ro", "group name");
	is_int(c->priv[PRIV_READ].p[3].is_numeric, 1, "1234 is a uid");
	is_int(c->priv[PRIV_READ].p[3].id, 1234, "uid 1234");
	is_int(c->priv[PRIV_APPROVE].n, 1, "one approve principal");
	is_int(c->priv[PRIV_ADMIN].p[0].is_group && c->priv[PRIV_ADMIN].p[0].
	    is_numeric, 1, "@0 is a numeric group");
	is_int(c->nlisten, 3, "three listen addresses replace the default");
	is_str(c->listen[0].host, "127.0.0.1", "IPv4 host");
	is_str(c->listen[0].port, "3241", "IPv4 port");
	is_str(c->listen[1].host, "::1", "IPv6 host");
	is_str(c->listen[1].port, "3242", "IPv6 port");
	is_str(c->listen[2].host, "", "* is the wildcard");
	is_int(c->poll_interval_ms, 2000, "poll-interval");
	is_int(c->probe_timeout_ms, 60000, "probe-timeout 1m");
	is_int(c->attach_pending_wait_ms, 30000, "attach-pending-wait");
	is_int(c->show_pending, 1, "show-pending");
	is_int(c->max_sessions, 100, "max-sessions");
	is_int(c->max_sessions_per_host, 8, "max-sessions-per-host");
	is_int(c->audit_limit_per_host, 0, "audit-limit-per-host 0: none");
	is_int(c->audit_limit_total, 1000, "audit-limit-total");
	is_int(c->audit_retention_s, 90 * 86400, "audit-retention 90d, in "
	    "seconds");
	is_int(c->host_names, 0, "host-names no");
	is_int(c->host_name_ttl_ms, 600000, "host-name-ttl 600: seconds");
	is_int(c->host_name_timeout_ms, 1500, "host-name-timeout 1500ms");
	is_int(c->max_devices_per_exporter, 12, "max-devices-per-exporter");
	is_int(c->max_new_devices_per_minute, 5, "max-new-devices-per-minute");
	is_int(c->hook_timeout_ms, 5000, "hook-timeout");
	is_int(c->hook_max_running, 2, "hook-max-running");
	is_int(c->mode, CONFIG_MODE_LOCAL, "mode");
	is_int(c->vhci_controller, 1, "vhci-controller");
	is_int(c->nexporters, 5, "five exporters");
	ok(c->exporters[0].kind == 0 && c->exporters[3].kind == 1 &&
	    c->exporters[4].kind == 2, "exporter kinds: usbipd, agent, dial-out");
	is_str(c->exporters[3].addr.port, "3244", "agent's port");
	is_str(c->exporters[4].addr.host, "2001:db8::/64",
	    "dial-out agent's network, canonical");
	is_str(c->exporters[0].name, "tc17", "exporter name");
	is_str(c->exporters[0].addr.host, "192.0.2.17", "exporter host");
	is_str(c->exporters[0].addr.port, "3240", "default exporter port");
	is_int(c->exporters[0].line, 41, "exporter line");
	is_str(c->exporters[1].addr.host, "2001:db8::2", "IPv6 exporter");
	is_str(c->exporters[1].addr.port, "3300", "IPv6 exporter port");
	is_int(c->nhooks, 2, "two hooks");
	is_int(c->hooks[0].events, (1u << HOOK_EV_PENDING) |
	    (1u << HOOK_EV_ACCESS_REQUEST), "hook event mask");
	is_str(c->hooks[0].command, "/usr/local/bin/notify --chat \"#ops\"",
	    "hook command kept verbatim");
	is_int(c->hooks[1].events, HOOK_EV_ALL, "hook on all events");

	/* What config_dump writes parses back to the same thing. */
	dump = config_dump(c);
	c2 = config_new();
	ok(config_parse_buf(c2, "dump", dump, strlen(dump), &errs) == 0,
	    "dump parses");
	if (errs != NULL)
		diag("%s", errs);
	free(errs);
	dump2 = config_dump(c2);
	is_str(dump2, dump, "dump round trip is stable");
	free(dump);
	free(dump2);
	config_free(c);
	config_free(c2);
}

static void
test_errors(void)
{
	char *errs;
	struct config *c;

	bad("foo\n", "t.conf:1: expected \"KEY = VALUE\", \"exporter NAME "
	    "HOST[:PORT] [agent]\", \"agent NAME from ADDRESS[/PREFIX]\" or "
	    "\"hook EVENTS COMMAND\"\n");
	bad("= x\n", "t.conf:1: expected a key before '='\n");
	bad("database =\n", "t.conf:1: database: expected a path, got nothing\n");
	bad("database = a\ndatabase = b\n",
	    "t.conf:2: database: already set at line 1\n");
	bad("control-socket = run/x\n", "t.conf:1: control-socket: expected an "
	    "absolute path of at most 107 bytes, got \"run/x\"\n");
	bad("control-group = a b\n", "t.conf:1: control-group: expected a group "
	    "name or none, got \"a b\"\n");
	bad("control-socket-mode = 0777\n", "t.conf:1: control-socket-mode: "
	    "expected 0600, 0660 or 0666, got \"0777\"\n");
	bad("show-pending = maybe\n", "t.conf:1: show-pending: expected yes or "
	    "no, got \"maybe\"\n");
	bad("max-connections = 0\n", "t.conf:1: max-connections: expected a "
	    "number from 1 to 4096, got \"0\"\n");
	bad("max-connections = 12x\n", "t.conf:1: max-connections: expected a "
	    "number from 1 to 4096, got \"12x\"\n");
	bad("control-max-message = 10\n", "t.conf:1: control-max-message: "
	    "expected a size from 1k to 16m, got \"10\"\n");
	bad("control-max-message = 1q\n", "t.conf:1: control-max-message: "
	    "expected a size in bytes (suffix k or m allowed), got \"1q\"\n");
	bad("poll-interval = 10\xc2\xb5s\n", "t.conf:1: poll-interval: expected "
	    "a duration like 1500ms, 30s, 10m, 2h or 1d, got \"10\xc2\xb5s\"\n");
	bad("poll-interval = 2d\n", "t.conf:1: poll-interval: expected a "
	    "duration from 100ms to 1h, got \"2d\"\n");
	bad("poll-interval = 5ms\n", "t.conf:1: poll-interval: expected a "
	    "duration from 100ms to 1h, got \"5ms\"\n");
	bad("poll-interval = 99999999999999999999999s\n", "t.conf:1: "
	    "poll-interval: expected a duration from 100ms to 1h, got "
	    "\"99999999999999999999999s\"\n");
	bad("max-sessions-per-host = 0\n", "t.conf:1: max-sessions-per-host: "
	    "expected a number from 1 to 1024, got \"0\"\n");
	bad("control-lookup-timeout = 10m\n", "t.conf:1: control-lookup-timeout: "
	    "expected a duration from 100ms to 5m, got \"10m\"\n");
	bad("host-names = maybe\n", "t.conf:1: host-names: expected yes or "
	    "no, got \"maybe\"\n");
	bad("host-name-ttl = 0\n", "t.conf:1: host-name-ttl: expected a "
	    "duration from 1s to 1d, got \"0\"\n");
	bad("host-name-ttl = 999ms\n", "t.conf:1: host-name-ttl: expected a "
	    "duration from 1s to 1d, got \"999ms\"\n");
	bad("host-name-ttl = 86401\n", "t.conf:1: host-name-ttl: expected a "
	    "duration from 1s to 1d, got \"86401\"\n");
	bad("host-name-ttl = 5 m\n", "t.conf:1: host-name-ttl: expected a "
	    "duration like 1500ms, 30s, 10m, 2h or 1d, got \"5 m\"\n");
	bad("host-name-timeout = 99ms\n", "t.conf:1: host-name-timeout: "
	    "expected a duration from 100ms to 30s, got \"99ms\"\n");
	bad("host-name-timeout = 2000\n", "t.conf:1: host-name-timeout: "
	    "expected a duration from 100ms to 30s, got \"2000\"\n");
	bad("host-name-timeout = 30001ms\n", "t.conf:1: host-name-timeout: "
	    "expected a duration from 100ms to 30s, got \"30001ms\"\n");
	bad("log-level = loud\n", "t.conf:1: log-level: expected error, "
	    "warning, info or debug, got \"loud\"\n");
	bad("log-target = file\n", "t.conf:1: log-target: expected stderr or "
	    "syslog, got \"file\"\n");
	bad("mode = remote\n", "t.conf:1: mode: expected proxy or local, got "
	    "\"remote\"\n");
	bad("vhci-controller = 99\n", "t.conf:1: vhci-controller: expected a "
	    "controller number from 0 to 31 or any, got \"99\"\n");
	bad("allow-read = alice b;ob\n", "t.conf:1: allow-read: expected a user "
	    "name, uid, @group or @gid, got \"b;ob\"\n");
	bad("allow-admin = @\n", "t.conf:1: allow-admin: expected a user name, "
	    "uid, @group or @gid, got \"@\"\n");
	bad("listen = ::1:3240\n", "t.conf:1: listen: expected [ADDRESS]:PORT "
	    "for an IPv6 address, got \"::1:3240\"\n");
	bad("listen = [::1\n", "t.conf:1: listen: expected ']' after an IPv6 "
	    "address, got \"[::1\"\n");
	bad("listen = host:65536\n", "t.conf:1: listen: expected a port number "
	    "from 0 to 65535, got \"host:65536\"\n");
	bad("listen = host:\n", "t.conf:1: listen: expected a port number, got "
	    "\"host:\"\n");
	bad("listen = ho/st:1\n", "t.conf:1: listen: expected a host name or "
	    "address, got \"ho/st:1\"\n");
	bad("database = \"/x\n", "t.conf:1: database: expected a closing '\"'\n");
	bad("exporter tc17\n", "t.conf:1: expected \"exporter NAME "
	    "HOST[:PORT] [agent] [tls=required|off]\"\n");
	bad("exporter tc17 h:1 extra\n", "t.conf:1: expected \"exporter NAME "
	    "HOST[:PORT] [agent] [tls=required|off]\"\n");
	bad("exporter tc17 h:1 agent extra\n", "t.conf:1: expected \"exporter "
	    "NAME HOST[:PORT] [agent] [tls=required|off]\"\n");
	bad("agent tc17\n", "t.conf:1: expected \"agent NAME from "
	    "ADDRESS[/PREFIX] [tls=required|optional|off]\"\n");
	bad("agent tc17 at 10.0.0.0/8\n", "t.conf:1: expected \"agent NAME "
	    "from ADDRESS[/PREFIX] [tls=required|optional|off]\"\n");
	bad("agent tc17 from 10.0.0.0/8 x\n", "t.conf:1: expected \"agent "
	    "NAME from ADDRESS[/PREFIX] [tls=required|optional|off]\"\n");
	bad("exporter tc17 h:1 agent tls=optional\n", "t.conf:1: exporter "
	    "tc17: expected tls=required or tls=off, got \"tls=optional\" "
	    "(optional is offered for dial-out agents only: the gateway would "
	    "fall back to plaintext on a connection an attacker can make "
	    "fail)\n");
	bad("agent tc17 from 10.0.0.0/8 tls=sometimes\n", "t.conf:1: agent "
	    "tc17: expected tls=required, tls=optional or tls=off, got "
	    "\"tls=sometimes\"\n");
	bad("listen = 127.0.0.1:1 tls=required\n", "t.conf:1: listen: "
	    "expected ADDRESS:PORT [tls=optional|off] (a TLS-only listener is "
	    "tls-listen), got \"127.0.0.1:1 tls=required\"\n");
	bad("agent a:b from 10.0.0.1\n", "t.conf:1: agent: expected a name of "
	    "1 to 31 letters, digits, '.', '-' or '_', got \"a:b\"\n");
	bad("agent tc17 from 10.0.0.1/8\n", "t.conf:1: agent tc17: host bits "
	    "set in the network, got \"10.0.0.1/8\"\n");
	bad("agent tc17 from 10.0.0.0/33\n", "t.conf:1: agent tc17: expected "
	    "a prefix length 0-32, got \"10.0.0.0/33\"\n");
	bad("agent tc17 from thinclient\n", "t.conf:1: agent tc17: expected "
	    "an IPv4 or IPv6 address, got \"thinclient\"\n");
	bad("agent tc17 from ::1\nexporter tc17 h\n", "t.conf:2: exporter "
	    "tc17: already declared at line 1\n");
	bad("exporter a/b h:1\n", "t.conf:1: exporter: expected a name of 1 to "
	    "31 letters, digits, '.', '-' or '_', got \"a/b\"\n");
	bad("exporter a *:1\n", "t.conf:1: exporter a: expected a host, got "
	    "\"*:1\"\n");
	bad("exporter a h:99999\n", "t.conf:1: exporter a: expected a port "
	    "number from 1 to 65535, got \"h:99999\"\n");
	bad("exporter a h\nexporter a g\n", "t.conf:2: exporter a: already "
	    "declared at line 1\n");
	bad("hook pending\n", "t.conf:1: expected \"hook EVENT[,EVENT...] "
	    "COMMAND\"\n");
	bad("hook pending,plugged /bin/true\n", "t.conf:1: hook: expected an "
	    "event name (pending, access-request, approve, deny, revoke, "
	    "identity-change, gone, attach, detach, probed, exporter-up, "
	    "exporter-down, policy, identity-anomaly, pairing, pairing-end or "
	    "all), got \"plugged\"\n");
	bad("hook , /bin/true\n", "t.conf:1: hook: expected at least one "
	    "event\n");
	bad("database = a\x01\n", "t.conf:1: expected text, got control "
	    "character 0x01\n");

	/* All errors of a file in one pass, in line order. */
	c = parse("# ok\nfoo = 1\nlisten = x:y\n\npoll-interval = 1\n"
	    "show-pending = 2\nexporter e h\nexporter e h\n", &errs);
	ok(c == NULL, "file with several errors refused");
	is_str(errs,
	    "t.conf:2: unknown key \"foo\" (see usbgwd.conf(5))\n"
	    "t.conf:3: listen: expected a port number from 0 to 65535, got "
	    "\"x:y\"\n"
	    "t.conf:6: show-pending: expected yes or no, got \"2\"\n"
	    "t.conf:8: exporter e: already declared at line 7\n",
	    "every error reported at once");
	free(errs);

	/* A NUL byte and an overlong line. */
	{
		char buf[CONFIG_MAX_LINE + 64];

		c = config_new();
		ok(config_parse_buf(c, "t.conf", "pid-file = b\n\0\n", 15, &errs) != 0,
		    "NUL byte refused");
		is_str(errs, "t.conf:2: expected text, got a NUL byte\n",
		    "NUL byte message");
		free(errs);
		memset(buf, 'x', sizeof(buf));
		ok(config_parse_buf(c, "t.conf", buf, sizeof(buf), &errs) != 0,
		    "overlong line refused");
		is_str(errs, "t.conf:1: line longer than 4096 bytes\n",
		    "overlong line message");
		free(errs);
		config_free(c);
	}

	/* The error list is bounded. */
	{
		char *many = NULL;
		size_t i;
		int nl = 0;

		many = calloc(200, 8);
		for (i = 0; i < 200; i++)
			strcat(many, "bogus\n");
		c = parse(many, &errs);
		ok(c == NULL, "200 bad lines refused");
		for (i = 0; errs != NULL && errs[i] != '\0'; i++)
			nl += errs[i] == '\n';
		is_int(nl, CONFIG_MAX_ERRORS + 1, "errors capped, then one "
		    "'too many errors' line");
		ok(errs != NULL && strstr(errs, "t.conf: too many errors, "
		    "giving up\n") != NULL, "too many errors line");
		free(errs);
		free(many);
	}
}

static void
test_set_and_load(void)
{
	struct config *c = config_new();
	char err[256], *errs, path[] = "/tmp/test_config.XXXXXX";
	FILE *f;
	int fd;

	is_int(config_set(c, "database", "/tmp/x.db", err, sizeof(err)), 0,
	    "set database");
	is_str(c->database, "/tmp/x.db", "database overridden");
	is_int(config_set(c, "nope", "1", err, sizeof(err)), -1, "unknown key");
	is_str(err, "unknown key \"nope\"", "unknown key message");
	is_int(config_set(c, "poll-interval", "x", err, sizeof(err)), -1,
	    "bad value");
	is_str(err, "poll-interval: expected a duration like 1500ms, 30s, 10m, "
	    "2h or 1d, got \"x\"", "bad value message");
	/* host-name-* at their bounds, from the command line */
	is_int(config_set(c, "host-name-ttl", "1s", err, sizeof(err)), 0,
	    "host-name-ttl 1s");
	is_int(c->host_name_ttl_ms, 1000, "1 s");
	is_int(config_set(c, "host-name-ttl", "1d", err, sizeof(err)), 0,
	    "host-name-ttl 1d");
	is_int(c->host_name_ttl_ms, 86400000, "86400 s");
	is_int(config_set(c, "host-name-timeout", "100ms", err, sizeof(err)),
	    0, "host-name-timeout 100ms");
	is_int(c->host_name_timeout_ms, 100, "100 ms");
	is_int(config_set(c, "host-name-timeout", "30s", err, sizeof(err)), 0,
	    "host-name-timeout 30s");
	is_int(c->host_name_timeout_ms, 30000, "30000 ms");
	is_int(config_set(c, "host-names", "off", err, sizeof(err)), 0,
	    "host-names off");
	is_int(c->host_names, 0, "host names off");
	is_int(config_set(c, "host-name-timeout", "31s", err, sizeof(err)), -1,
	    "host-name-timeout 31s refused");
	is_str(err, "host-name-timeout: expected a duration from 100ms to 30s, "
	    "got \"31s\"", "its message");
	is_int(c->host_name_timeout_ms, 30000, "and the value unchanged");
	is_int(config_set(c, "audit-retention", "0", err, sizeof(err)), 0,
	    "audit-retention 0");
	is_int(c->audit_retention_s, 0, "0: a prune may go up to now");
	is_int(config_set(c, "audit-retention", "3650d", err, sizeof(err)), 0,
	    "audit-retention 3650d");
	is_int(c->audit_retention_s, 3650 * 86400, "3650 days in seconds");
	is_int(config_set(c, "audit-retention", "1500ms", err, sizeof(err)),
	    -1, "audit-retention 1500ms refused");
	is_str(err, "audit-retention: expected whole seconds, got \"1500ms\"",
	    "its message");
	is_int(config_set(c, "audit-retention", "3651d", err, sizeof(err)),
	    -1, "audit-retention 3651d refused");
	is_str(err, "audit-retention: expected a duration from 0s to 3650d, "
	    "got \"3651d\"", "its message");
	is_int(c->audit_retention_s, 3650 * 86400, "and the value unchanged");
	is_int(config_set(c, "listen", "127.0.0.1:5000", err, sizeof(err)), 0,
	    "first -l");
	is_int(config_set(c, "listen", "[::1]:5000", err, sizeof(err)), 0,
	    "second -l");
	is_int(c->nlisten, 2, "flags replace the default listen, then add");
	is_str(c->listen[1].host, "::1", "second listen host");

	/* A missing file is fine unless required. */
	errs = NULL;
	is_int(config_load(c, "/nonexistent/usbgwd.conf", 0, &errs), 0,
	    "missing optional file");
	is_int(config_load(c, "/nonexistent/usbgwd.conf", 1, &errs), -1,
	    "missing required file");
	is_str(errs, "/nonexistent/usbgwd.conf: No such file or directory\n",
	    "missing file message");
	free(errs);

	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fputs("poll-interval = 250ms\nbogus = 1\n", f);
	fclose(f);
	is_int(config_load(c, path, 1, &errs), -1, "file with an error");
	ok(errs != NULL && strstr(errs, ":2: unknown key \"bogus\"") != NULL &&
	    strncmp(errs, path, strlen(path)) == 0, "error names the file path");
	free(errs);
	f = fopen(path, "w");
	fputs("poll-interval = 250ms\n", f);
	fclose(f);
	config_free(c);
	c = config_new();
	is_int(config_load(c, path, 1, &errs), 0, "good file loads");
	is_int(c->poll_interval_ms, 250, "value from the file");
	is_str(c->path, path, "path recorded");
	unlink(path);
	is_int(config_load(c, "/tmp", 1, &errs), -1, "a directory is refused");
	is_str(errs, "/tmp: not a regular file\n", "directory message");
	free(errs);
	config_free(c);
}

static void
test_durations(void)
{
	uint64_t ms;
	const char *es;

	is_int(parse_duration("30s", UINT64_MAX, &ms, &es), 0, "30s");
	is_int(ms, 30000, "30s in ms");
	is_int(parse_duration("10m", UINT64_MAX, &ms, &es), 0, "10m");
	is_int(ms, 600000, "10m in ms");
	is_int(parse_duration("2h", UINT64_MAX, &ms, &es), 0, "2h");
	is_int(ms, 7200000, "2h in ms");
	is_int(parse_duration("1d", UINT64_MAX, &ms, &es), 0, "1d");
	is_int(ms, 86400000, "1d in ms");
	is_int(parse_duration("45", UINT64_MAX, &ms, &es), 0, "bare");
	is_int(ms, 45000, "bare number is seconds");
	is_int(parse_duration("1500ms", UINT64_MAX, &ms, &es), 0, "ms");
	is_int(ms, 1500, "1500ms");
	ok(parse_duration("", UINT64_MAX, &ms, &es) == -1, "empty");
	ok(parse_duration("-1s", UINT64_MAX, &ms, &es) == -1, "negative");
	ok(parse_duration("1.5h", UINT64_MAX, &ms, &es) == -1, "fraction");
	ok(parse_duration("1 h", UINT64_MAX, &ms, &es) == -1, "space");
	ok(parse_duration("1w", UINT64_MAX, &ms, &es) == -1, "weeks");
	is_str(es, "unit must be ms, s, m, h or d", "unit message");
	ok(parse_duration("2h", 3600000, &ms, &es) == -1, "over max");
	is_str(es, "too large", "over max message");
}

/* Exporter hosts written one way (issue 18 item 4). */
static void
test_host_canon(void)
{
	static const struct { const char *in, *out; } v[] = {
		{ "2001:DB8:0:0::2", "2001:db8::2" },
		{ "0:0:0:0:0:0:0:1", "::1" },
		{ "fe80::1%Eth0", "fe80::1%Eth0" },
		{ "FE80:0::1%eth0", "fe80::1%eth0" },
		{ "192.0.2.7", "192.0.2.7" },
		{ "Thin-Client.Example", "thin-client.example" },
		{ "::ffff:192.0.2.1", "::ffff:192.0.2.1" },
	};
	char h[CONFIG_HOST_MAX];
	size_t i;

	for (i = 0; i < nitems(v); i++) {
		usbgw_strlcpy(h, v[i].in, sizeof(h));
		config_host_canon(h, sizeof(h));
		is_str(h, v[i].out, "canonical host of %s", v[i].in);
	}
}

/* A duplicate address: refused in the config file, naming both. */
static void
test_dup_addr(void)
{
	bad("exporter a 192.0.2.1\nexporter b 192.0.2.1:3240\n", "t.conf:2: "
	    "exporter b: address 192.0.2.1:3240 is exporter a's (line 1): one "
	    "exporter, one name\n");
	bad("exporter a [2001:db8::1]:9\nexporter b [2001:DB8:0::1]:9\n",
	    "t.conf:2: exporter b: address [2001:db8::1]:9 is exporter a's "
	    "(line 1): one exporter, one name\n");
	bad("exporter a Host.Example:1\nexporter b host.example:1 agent\n",
	    "t.conf:2: exporter b: address host.example:1 is exporter a's "
	    "(line 1): one exporter, one name\n");
	{
		char *errs;
		struct config *c = parse("exporter a h:1\nexporter b h:2\n"
		    "agent c from 10.0.0.0/8\nagent d from 10.0.0.0/8\n", &errs);

		ok(c != NULL, "other ports, and dial-out agents from one "
		    "network: not duplicates");
		config_free(c);
		free(errs);
	}
}

/* usbgw exporter import's file: every bad line, nothing taken. */
static void
test_import_list(void)
{
	static const char good[] =
	    "# thin clients, floor 2\n"
	    "\n"
	    "tc201 192.0.2.201\n"
	    "  tc202   192.0.2.202:3300   # no: a comment is a line\n";
	static const char ok_text[] =
	    "# thin clients\n\ntc201 192.0.2.201\n"
	    "tc202 [2001:DB8::202]:3300 agent tls=required\n"
	    "exporter tc203 TC203.example\n";
	static const char five[] =
	    "tc1 192.0.2.1\n"
	    "bad/name 192.0.2.2\n"		/* name rules */
	    "tc3 192.0.2.3:0\n"			/* port */
	    "tc4 192.0.2.4:99999\n"		/* port */
	    "tc5 host name\n"			/* form */
	    "tc1 192.0.2.6\n"			/* duplicate name */
	    "tc7 192.0.2.1:3240\n"		/* duplicate address */
	    "tc8 192.0.2.8 tls=optional\n"	/* option */
	    "tc9 [::1\n";			/* address */
	struct config *c = config_new();
	char *errs = NULL;

	ok(config_parse_exporter_list(c, "f.txt", good, strlen(good), &errs) ==
	    -1, "a trailing word (an inline comment) is refused");
	is_str(errs, "f.txt:4: expected \"NAME HOST[:PORT] [agent] "
	    "[tls=required|off]\"\n", "... with the line and the form");
	free(errs);
	config_free(c);

	c = config_new();
	is_int(config_parse_exporter_list(c, "f.txt", ok_text, strlen(ok_text),
	    &errs), 0, "a good import file");
	is_int(c->nexporters, 3, "three exporters");
	is_str(c->exporters[1].addr.host, "2001:db8::202", "IPv6 canonical");
	is_int(c->exporters[1].kind, 1, "agent option");
	is_int(c->exporters[1].tls, 2, "tls=required option");
	is_str(c->exporters[2].name, "tc203", "a leading \"exporter\" word");
	is_str(c->exporters[2].addr.host, "tc203.example", "host name lower "
	    "case");
	is_int(c->exporters[2].line, 5, "line numbers count every line");
	config_free(c);

	c = config_new();
	is_int(config_parse_exporter_list(c, "f.txt", five, strlen(five),
	    &errs), -1, "a file with bad lines is refused");
	is_str(errs,
	    "f.txt:2: exporter: expected a name of 1 to 31 letters, digits, "
	    "'.', '-' or '_', got \"bad/name\"\n"
	    "f.txt:3: exporter tc3: expected a port number from 1 to 65535, "
	    "got \"192.0.2.3:0\"\n"
	    "f.txt:4: exporter tc4: expected a port number from 1 to 65535, "
	    "got \"192.0.2.4:99999\"\n"
	    "f.txt:5: expected \"NAME HOST[:PORT] [agent] [tls=required|off]\"\n"
	    "f.txt:6: exporter tc1: already declared at line 1\n"
	    "f.txt:7: exporter tc7: address 192.0.2.1:3240 is exporter tc1's "
	    "(line 1): one exporter, one name\n"
	    "f.txt:8: exporter tc8: expected tls=required or tls=off, got "
	    "\"tls=optional\" (optional is offered for dial-out agents only: "
	    "the gateway would fall back to plaintext on a connection an "
	    "attacker can make fail)\n"
	    "f.txt:9: exporter tc9: expected ']' after an IPv6 address, got "
	    "\"[::1\"\n",
	    "every bad line named, with what was expected");
	free(errs);
	config_free(c);

	c = config_new();
	is_int(config_parse_exporter_list(c, "f.txt", "agent x from ::1\n", 17,
	    &errs), -1, "no dial-out agents in an import");
	free(errs);
	config_free(c);
}

/* exporters.d: read in name order, errors by file:line, dups across. */
static void
test_exporters_dir(void)
{
	char dir[] = "/tmp/test_config.XXXXXX", conf[128], d[256], p[300];
	char got[1400], *errs;
	struct config *c;
	FILE *f;

	if (mkdtemp(dir) == NULL) {
		ok(0, "mkdtemp");
		return;
	}
	snprintf(conf, sizeof(conf), "%s/usbgwd.conf", dir);
	c = config_new();
	is_int(config_load_exporters_dir(c, conf, got, sizeof(got), &errs), 0,
	    "no exporters.d: no exporters, no error");
	snprintf(d, sizeof(d), "%s/exporters.d", dir);
	is_str(got, d, "the default directory is beside the config file");
	is_int(c->nexporters, 0, "none");
	config_free(c);

	mkdir(d, 0755);
	snprintf(p, sizeof(p), "%s/b.conf", d);
	f = fopen(p, "w");
	fputs("# floor 2\nexporter tc2 192.0.2.2\nagent dial from 10.0.0.0/8\n",
	    f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/a.conf", d);
	f = fopen(p, "w");
	fputs("exporter tc1 192.0.2.1\n", f);
	fclose(f);
	snprintf(p, sizeof(p), "%s/c.conf.off", d);
	f = fopen(p, "w");
	fputs("garbage\n", f);
	fclose(f);
	c = config_new();
	config_parse_buf(c, conf, "exporter main 192.0.2.9\n", 24, &errs);
	is_int(config_load_exporters_dir(c, conf, NULL, 0, &errs), 0,
	    "exporters.d read");
	is_int(c->nexporters, 4, "the config file's and two files' exporters "
	    "(not *.conf.off)");
	is_str(c->exporters[1].name, "tc1", "a.conf before b.conf");
	is_str(config_exporter_where(c, &c->exporters[2], got, sizeof(got)),
	    "b.conf:2", "where: file:line");
	is_str(config_exporter_where(c, &c->exporters[0], got, sizeof(got)),
	    "usbgwd.conf:1", "the config file's");
	config_free(c);

	/* a duplicate across files, and a setting in exporters.d */
	snprintf(p, sizeof(p), "%s/c.conf", d);
	f = fopen(p, "w");
	fputs("exporter tc3 192.0.2.1\nexporter tc1 192.0.2.33\n"
	    "poll-interval = 1s\n", f);
	fclose(f);
	c = config_new();
	config_parse_buf(c, conf, "exporter main 192.0.2.9\n", 24, &errs);
	is_int(config_load_exporters_dir(c, conf, NULL, 0, &errs), -1,
	    "a bad exporters.d file: refused");
	snprintf(got, sizeof(got), "%s/c.conf:1: exporter tc3: address "
	    "192.0.2.1:3240 is exporter tc1's (a.conf:1): one exporter, one "
	    "name\n%s/c.conf:2: exporter tc1: already declared at a.conf:1\n"
	    "%s/c.conf:3: expected \"exporter NAME HOST[:PORT] [agent] "
	    "[tls=required|off]\" or \"agent NAME from ADDRESS[/PREFIX]\" (an "
	    "exporters.d file holds exporters only; other settings go in the "
	    "config file)\n", d, d, d);
	is_str(errs, got, "every error, by file:line, naming the other file");
	free(errs);
	config_free(c);

	/* exporters-dir = none; a relative one */
	c = config_new();
	usbgw_strlcpy(c->exporters_dir, "none", sizeof(c->exporters_dir));
	is_int(config_load_exporters_dir(c, conf, NULL, 0, &errs), 0,
	    "exporters-dir none");
	is_int(c->nexporters, 0, "... reads nothing");
	config_free(c);

	unlink(p);
	snprintf(p, sizeof(p), "%s/a.conf", d);
	unlink(p);
	snprintf(p, sizeof(p), "%s/b.conf", d);
	unlink(p);
	snprintf(p, sizeof(p), "%s/c.conf.off", d);
	unlink(p);
	rmdir(d);
	rmdir(dir);
}

int
main(void)
{
	test_defaults();
	test_listen_addrs();
	test_tls_keys();
	test_full();
	test_errors();
	test_set_and_load();
	test_durations();
	test_host_canon();
	test_dup_addr();
	test_import_list();
	test_exporters_dir();
	return done_testing();
}
