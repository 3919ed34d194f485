-- usbgw database schema: the one source of it.
--
-- usbgwd embeds this file and applies it with PRAGMA user_version:
--   * "-- @migration N" starts the statements that bring a database from
--     version N-1 to N.  A database at version V gets every migration
--     above V, in order, each in its own transaction; each ends by
--     setting PRAGMA user_version = N.
--   * "-- @views" starts the views.  They are dropped and created again
--     after any migration (a change of view only needs a new, possibly
--     empty, migration).  The section opens with a DROP VIEW of every
--     view, up to the first CREATE VIEW: those also run before the first
--     migration, so that a view may read columns of the latest version.
-- Never edit a migration that has been released: add a new one.
--
-- Conventions: times are INTEGER Unix seconds (UTC); the views show them
-- as ISO 8601 text.  Device states are the operator's names.  Rows are
-- never deleted except audit rows by the audited prune command: rules,
-- approvals and exporters are ended/removed by setting a column.
--
-- The connection sets journal_mode=WAL, foreign_keys=ON and
-- synchronous=NORMAL (durable across a daemon crash; the last commits may
-- be lost on power loss).

-- @migration 1

CREATE TABLE exporters (
	id		INTEGER PRIMARY KEY,
	name		TEXT NOT NULL UNIQUE
			    CHECK (length(name) BETWEEN 1 AND 31),
	host		TEXT NOT NULL,
	port		INTEGER NOT NULL DEFAULT 3240
			    CHECK (port BETWEEN 1 AND 65535),
	status		TEXT NOT NULL DEFAULT 'unknown'
			    CHECK (status IN ('unknown', 'up', 'down')),
	created_at	INTEGER NOT NULL,
	last_seen	INTEGER,
	removed_at	INTEGER
);

-- The policy: active rules have a position (1, 2, ... without gaps);
-- removed rules keep their row (decisions refer to them) with position
-- NULL.  text is the canonical rule text and never changes.
CREATE TABLE rules (
	id		INTEGER PRIMARY KEY,
	position	INTEGER CHECK (position >= 1),
	text		TEXT NOT NULL,
	target		TEXT NOT NULL
			    CHECK (target IN ('allow', 'block', 'reject', 'ask')),
	origin		TEXT NOT NULL DEFAULT 'admin'
			    CHECK (origin IN ('admin', 'approval', 'denial',
			    'import', 'config')),
	device_id	INTEGER REFERENCES devices(id),
	comment		TEXT,
	created_at	INTEGER NOT NULL,
	created_by	TEXT NOT NULL,
	removed_at	INTEGER,
	removed_by	TEXT,
	CHECK ((position IS NULL) = (removed_at IS NOT NULL))
);
CREATE INDEX rules_position ON rules(position) WHERE position IS NOT NULL;
-- At most one active rule written for a device by a permanent approval
-- or denial: a new one replaces it (no upsert failure).
CREATE UNIQUE INDEX rules_device ON rules(device_id)
    WHERE device_id IS NOT NULL AND removed_at IS NULL;
CREATE TRIGGER rules_text_immutable BEFORE UPDATE OF text, target ON rules
BEGIN
	SELECT RAISE(ABORT, 'rules: text is immutable (remove the rule, add a new one)');
END;

-- One row per identity seen at an exporter port.  A device that comes
-- back with the same identity is the same row; one that changed its
-- descriptors or strings is a new row (v_identity_changes).
CREATE TABLE devices (
	id		INTEGER PRIMARY KEY,
	exporter_id	INTEGER NOT NULL REFERENCES exporters(id),
	exporter_busid	TEXT NOT NULL,
	busid		TEXT NOT NULL,
	vid		INTEGER NOT NULL CHECK (vid BETWEEN 0 AND 65535),
	pid		INTEGER NOT NULL CHECK (pid BETWEEN 0 AND 65535),
	bcd_device	INTEGER NOT NULL DEFAULT 0,
	dev_class	INTEGER NOT NULL DEFAULT 0,
	dev_subclass	INTEGER NOT NULL DEFAULT 0,
	dev_protocol	INTEGER NOT NULL DEFAULT 0,
	speed		INTEGER NOT NULL DEFAULT 0,
	manufacturer	TEXT NOT NULL DEFAULT '',
	product		TEXT NOT NULL DEFAULT '',
	serial		TEXT NOT NULL DEFAULT '',
	hash		TEXT NOT NULL CHECK (length(hash) = 64),
	state		TEXT NOT NULL DEFAULT 'probing'
			    CHECK (state IN ('probing', 'pending', 'authorized',
			    'attached', 'blocked', 'gone')),
	state_since	INTEGER NOT NULL,
	rule_id		INTEGER REFERENCES rules(id),
	first_seen	INTEGER NOT NULL,
	last_seen	INTEGER NOT NULL,
	UNIQUE (exporter_id, exporter_busid, hash, serial, manufacturer, product)
);
-- The gateway's busids are unique among devices that are not gone.
CREATE UNIQUE INDEX devices_busid_present ON devices(busid)
    WHERE state != 'gone';
CREATE INDEX devices_state ON devices(state);
CREATE INDEX devices_port ON devices(exporter_id, exporter_busid, vid, pid);

CREATE TABLE interfaces (
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	idx		INTEGER NOT NULL CHECK (idx BETWEEN 0 AND 31),
	class		INTEGER NOT NULL CHECK (class BETWEEN 0 AND 255),
	subclass	INTEGER NOT NULL CHECK (subclass BETWEEN 0 AND 255),
	protocol	INTEGER NOT NULL CHECK (protocol BETWEEN 0 AND 255),
	PRIMARY KEY (device_id, idx)
) WITHOUT ROWID;

-- One row per stay of a device at its exporter (plug-in to removal).
CREATE TABLE presences (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	busid		TEXT NOT NULL,
	arrived_at	INTEGER NOT NULL,
	departed_at	INTEGER,
	depart_reason	TEXT
);
CREATE INDEX presences_device ON presences(device_id, arrived_at);
CREATE UNIQUE INDEX presences_open ON presences(device_id)
    WHERE departed_at IS NULL;

-- Operator decisions.  scope: once (this presence), for / until (expires_at
-- set), permanent (rule_id: the rule written from the identity).
-- An approval ends by expiry, revocation, the device leaving (once) or a
-- newer decision; ended rows stay.
CREATE TABLE approvals (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	presence_id	INTEGER REFERENCES presences(id),
	decision	TEXT NOT NULL CHECK (decision IN ('allow', 'deny')),
	scope		TEXT NOT NULL
			    CHECK (scope IN ('once', 'for', 'until', 'permanent')),
	to_host		TEXT,
	created_at	INTEGER NOT NULL,
	expires_at	INTEGER,
	actor_uid	INTEGER,
	actor_name	TEXT NOT NULL,
	reason		TEXT,
	rule_id		INTEGER REFERENCES rules(id),
	ended_at	INTEGER,
	end_reason	TEXT,
	ended_by	TEXT,
	CHECK ((scope IN ('for', 'until')) = (expires_at IS NOT NULL)),
	CHECK (scope != 'once' OR presence_id IS NOT NULL),
	CHECK ((ended_at IS NULL) = (end_reason IS NULL))
);
CREATE INDEX approvals_device ON approvals(device_id, created_at);
CREATE INDEX approvals_expiry ON approvals(expires_at)
    WHERE ended_at IS NULL AND expires_at IS NOT NULL;

-- A vhci host using a device: counters are updated while it runs.
CREATE TABLE attachments (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	presence_id	INTEGER REFERENCES presences(id),
	approval_id	INTEGER REFERENCES approvals(id),
	rule_id		INTEGER REFERENCES rules(id),
	mode		TEXT NOT NULL CHECK (mode IN ('proxy', 'local')),
	host_name	TEXT,
	host_addr	TEXT,
	started_at	INTEGER NOT NULL,
	ended_at	INTEGER,
	end_reason	TEXT,
	bytes_to_device		INTEGER NOT NULL DEFAULT 0,
	bytes_from_device	INTEGER NOT NULL DEFAULT 0,
	urbs_to_device		INTEGER NOT NULL DEFAULT 0,
	urbs_from_device	INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX attachments_device ON attachments(device_id, started_at);
CREATE UNIQUE INDEX attachments_open ON attachments(device_id)
    WHERE ended_at IS NULL;

-- A vhci host asked to import a device that it may not use (yet).
-- outcome: waiting (held), granted, refused (answered at once), denied
-- (by an operator), timeout, withdrawn (the host went away), interrupted
-- (the gateway stopped without answering it: closed at its next start;
-- migration 4 adds it).
CREATE TABLE access_requests (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER REFERENCES devices(id),
	busid		TEXT NOT NULL,
	host_name	TEXT,
	host_addr	TEXT NOT NULL,
	requested_at	INTEGER NOT NULL,
	outcome		TEXT NOT NULL DEFAULT 'waiting'
			    CHECK (outcome IN ('waiting', 'granted', 'refused',
			    'denied', 'timeout', 'withdrawn')),
	decided_at	INTEGER,
	decided_by	TEXT,
	approval_id	INTEGER REFERENCES approvals(id)
);
CREATE INDEX access_requests_time ON access_requests(requested_at);
CREATE INDEX access_requests_device ON access_requests(device_id);

-- The audit log: append-only, each row chained to the previous one by
-- hash = SHA-256(prev_hash, the row's fields) (gateway/db/audit.c documents
-- the encoding; `usbgw audit verify` recomputes it).  device_id has no
-- foreign key on purpose: the log refers, it never constrains.
CREATE TABLE audit_log (
	seq		INTEGER PRIMARY KEY,
	ts		INTEGER NOT NULL,
	event		TEXT NOT NULL CHECK (length(event) > 0),
	device_id	INTEGER,
	busid		TEXT,
	exporter	TEXT,
	object		TEXT,
	old_state	TEXT,
	new_state	TEXT,
	actor		TEXT NOT NULL
			    CHECK (actor IN ('system', 'rule', 'operator')),
	actor_uid	INTEGER,
	actor_name	TEXT,
	rule_id		INTEGER,
	host		TEXT,
	reason		TEXT,
	detail		TEXT,
	prev_hash	TEXT NOT NULL CHECK (length(prev_hash) = 64),
	hash		TEXT NOT NULL CHECK (length(hash) = 64)
);
CREATE INDEX audit_log_device ON audit_log(device_id, seq)
    WHERE device_id IS NOT NULL;
CREATE INDEX audit_log_ts ON audit_log(ts);
CREATE INDEX audit_log_event ON audit_log(event, seq);

-- Rows are appended with the next sequence number only.
CREATE TRIGGER audit_log_append_only BEFORE INSERT ON audit_log
WHEN NEW.seq IS NULL OR
    NEW.seq != (SELECT IFNULL(MAX(seq), 0) + 1 FROM audit_log)
BEGIN
	SELECT RAISE(ABORT, 'audit_log: rows are appended with the next seq');
END;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
	SELECT RAISE(ABORT, 'audit_log is append-only');
END;
-- The prune command (gateway/db/audit.c) inserts a guard row, deletes the
-- old rows and removes the guard in one transaction after appending an
-- audited checkpoint row; any other DELETE is refused.  (The triggers
-- stop mistakes; the hash chain is what detects tampering.)
CREATE TABLE audit_prune_guard (
	through_seq	INTEGER NOT NULL
);
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN NOT EXISTS (SELECT 1 FROM audit_prune_guard
    WHERE OLD.seq <= through_seq)
BEGIN
	SELECT RAISE(ABORT, 'audit_log is append-only (use: usbgw audit prune)');
END;

PRAGMA user_version = 1;

-- @migration 2

-- An operator's label for a device ("reception scanner").
ALTER TABLE devices ADD COLUMN label TEXT;

-- Daemon settings that must survive restarts (key/value).
CREATE TABLE settings (
	key		TEXT PRIMARY KEY,
	value		TEXT NOT NULL,
	updated_at	INTEGER NOT NULL
);

PRAGMA user_version = 2;

-- @migration 3

-- The decision core (protocol.md part 3, "Precedence").  Rules written
-- by a permanent approval or denial (origin approval/denial) form the
-- operator tier, evaluated after every admin rule; they are renumbered
-- after the admin rules so that positions read in evaluation order.
UPDATE rules SET position = position + 1000000000
    WHERE position IS NOT NULL AND origin IN ('approval', 'denial');
UPDATE rules SET position = (SELECT n FROM (SELECT id, row_number()
    OVER (ORDER BY position) AS n FROM rules WHERE position IS NOT NULL) r
    WHERE r.id = rules.id) WHERE position IS NOT NULL;
-- An admin's explicit override of an admin rule that blocks the device.
ALTER TABLE approvals ADD COLUMN override INTEGER NOT NULL DEFAULT 0
    CHECK (override IN (0, 1));

PRAGMA user_version = 3;

-- @migration 4

-- The keyed chain (protocol.md 1.8): each row written with the daemon's
-- audit key carries mac = HMAC-SHA256(key, seq || hash).  Rows written
-- before the key existed have none; the key file says from which seq on
-- every row must have one.
ALTER TABLE audit_log ADD COLUMN mac TEXT
    CHECK (mac IS NULL OR length(mac) = 64);
-- Signed checkpoints of the chain's head (also logged to syslog as
-- anchor lines): seq, its hash, when, the signing key's fingerprint and
-- the Ed25519 signature.  Append-only like the log.
CREATE TABLE audit_checkpoints (
	id		INTEGER PRIMARY KEY,
	seq		INTEGER NOT NULL CHECK (seq > 0),
	ts		INTEGER NOT NULL,
	hash		TEXT NOT NULL CHECK (length(hash) = 64),
	key		TEXT NOT NULL CHECK (length(key) = 16),
	sig		TEXT NOT NULL CHECK (length(sig) = 128)
);
CREATE INDEX audit_checkpoints_seq ON audit_checkpoints(seq);
CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
	SELECT RAISE(ABORT, 'audit_checkpoints is append-only');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
	SELECT RAISE(ABORT, 'audit_checkpoints is append-only');
END;

PRAGMA user_version = 4;

-- @migration 5

-- An access request a killed gateway left waiting is closed at the next
-- start: outcome 'interrupted' (the gateway, not the host, went away).
-- SQLite cannot change a CHECK constraint: the table is rebuilt.  The
-- views that read it are dropped first (created again after this).
DROP VIEW IF EXISTS v_pending;
DROP VIEW IF EXISTS v_access_requests;
CREATE TABLE access_requests_new (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER REFERENCES devices(id),
	busid		TEXT NOT NULL,
	host_name	TEXT,
	host_addr	TEXT NOT NULL,
	requested_at	INTEGER NOT NULL,
	outcome		TEXT NOT NULL DEFAULT 'waiting'
			    CHECK (outcome IN ('waiting', 'granted', 'refused',
			    'denied', 'timeout', 'withdrawn', 'interrupted')),
	decided_at	INTEGER,
	decided_by	TEXT,
	approval_id	INTEGER REFERENCES approvals(id)
);
INSERT INTO access_requests_new SELECT id, device_id, busid, host_name,
    host_addr, requested_at, outcome, decided_at, decided_by, approval_id
    FROM access_requests;
DROP TABLE access_requests;
ALTER TABLE access_requests_new RENAME TO access_requests;
CREATE INDEX access_requests_time ON access_requests(requested_at);
CREATE INDEX access_requests_device ON access_requests(device_id);
CREATE INDEX access_requests_waiting ON access_requests(id)
    WHERE outcome = 'waiting';
CREATE INDEX attachments_open_all ON attachments(id) WHERE ended_at IS NULL;

PRAGMA user_version = 5;

-- @migration 6

-- What an exporter is (protocol.md 1.9.4): a stock usbipd, polled; a
-- usbgw-agent the gateway keeps a control connection to ('agent'); or a
-- usbgw-agent that connects to the gateway ('agent-dialout', host holds
-- the network it may come from, NET/PREFIX).
ALTER TABLE exporters ADD COLUMN kind TEXT NOT NULL DEFAULT 'usbip'
    CHECK (kind IN ('usbip', 'agent', 'agent-dialout'));

PRAGMA user_version = 6;

-- @migration 7

-- How a vhci host reached the device (issue 15, protocol.md 1.10.7):
-- 'tcp' plain USB/IP, 'tls' a tls-listen connection, 'local' the
-- gateway's own vhci.  host_cert: the name (CN) of the certificate the
-- TLS handshake verified, NULL without one; host_name is then that name.
ALTER TABLE attachments ADD COLUMN transport TEXT NOT NULL DEFAULT 'tcp'
    CHECK (transport IN ('tcp', 'tls', 'local'));
ALTER TABLE attachments ADD COLUMN host_cert TEXT;
UPDATE attachments SET transport = 'local' WHERE mode = 'local';

PRAGMA user_version = 7;

-- @migration 8

-- Enrolled agents and vhci hosts (issue 15, protocol.md 1.10.10): one row
-- per pairing, and so per certificate.  state: 'pending' (waiting for the
-- operator; no certificate yet), 'active' (issued; the TLS check admits
-- its fingerprint until not_after), 'revoked' (by an operator: refused,
-- its connections cut), 'replaced' (a renewal or an approved
-- re-enrollment of the name issued a newer one), 'rejected' (the
-- operator said no), 'lapsed' (never approved: expired, the client left,
-- or the gateway restarted).  A name is unique among active rows.
CREATE TABLE agents (
	id		INTEGER PRIMARY KEY,
	name		TEXT NOT NULL,
	role		TEXT NOT NULL CHECK (role IN ('agent', 'host')),
	state		TEXT NOT NULL CHECK (state IN ('pending', 'active',
			    'revoked', 'replaced', 'rejected', 'lapsed')),
	fingerprint	TEXT UNIQUE,	-- SHA-256 of the certificate (hex)
	serial		TEXT,
	key_fingerprint	TEXT NOT NULL,	-- SHA-256 of the public key (hex)
	not_after	INTEGER,
	address		TEXT,		-- where the pairing came from
	created_at	INTEGER NOT NULL,
	approved_at	INTEGER,
	approved_by	TEXT,
	ended_at	INTEGER,
	end_reason	TEXT,
	renewed_from	INTEGER REFERENCES agents(id)
);
CREATE UNIQUE INDEX agents_active_name ON agents(name)
    WHERE state = 'active';
CREATE INDEX agents_state ON agents(state, name);

PRAGMA user_version = 8;

-- @migration 9

-- TLS towards an exporter (issue 15, protocol.md 1.10.8): 'off' plain
-- USB/IP (stock usbipd), 'required' every connection TLS with an agent
-- certificate naming the exporter, 'optional' (dial-out agents only)
-- either.  The exporter leg of an attachment: up_transport 'tcp' or
-- 'tls', up_cert the agent certificate's CN (NULL without TLS).
ALTER TABLE exporters ADD COLUMN tls TEXT NOT NULL DEFAULT 'off'
    CHECK (tls IN ('off', 'optional', 'required'));
ALTER TABLE attachments ADD COLUMN up_transport TEXT NOT NULL DEFAULT 'tcp'
    CHECK (up_transport IN ('tcp', 'tls'));
ALTER TABLE attachments ADD COLUMN up_cert TEXT;

PRAGMA user_version = 9;

-- @migration 10

-- Exporters in bulk (issue 18 item 4, protocol.md 1.11): source 'file'
-- for an exporter the config file or an exporters.d file declares (the
-- files own it: a reload removes it when its line goes), 'cli' for one
-- usbgw exporter add or import made (the database owns it); origin
-- where a file declares it ("site-a.conf:3").  last_seen
-- (already there) is the last good device list; last_error the last
-- failure's reason and when (last_error_at), NULL until one.
ALTER TABLE exporters ADD COLUMN source TEXT NOT NULL DEFAULT 'cli'
    CHECK (source IN ('cli', 'file'));
ALTER TABLE exporters ADD COLUMN origin TEXT;	-- a file's: "FILE:LINE"
ALTER TABLE exporters ADD COLUMN last_error TEXT;
ALTER TABLE exporters ADD COLUMN last_error_at INTEGER;

PRAGMA user_version = 10;

-- @migration 11

-- The views name their time columns for their zone (issue 18 item 5):
-- every text time is UTC, as datetime() writes it ("2025-01-31
-- 17:00:00"), in a column ending in _utc (at_utc, started_at_utc, ...);
-- the tables keep INTEGER Unix seconds.  Only the views change, and they
-- are made again after any migration: this one changes no table.

PRAGMA user_version = 11;

-- @migration 12

-- Several gateways on one store (protocol.md 4.3, 4.5).  gateways: one
-- row per gateway (its gateway-name), written at its start and by its
-- heartbeat; address is what it advertises (its first listener), version
-- its build.  changes: the change feed, one row per write of shared state
-- (rules, approvals, settings, agents, exporters), appended in the same
-- transaction; other gateways read it past the last seq they applied.  On
-- SQLite (one gateway) both stay empty but for this gateway's row.
-- audit_log.gateway: the gateway that wrote the row (NULL: one gateway;
-- a row with it is hashed as version 2, gateway/db/audit.c).
CREATE TABLE gateways (
	name		TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 63),
	started_at	INTEGER NOT NULL,
	heartbeat	INTEGER NOT NULL,
	address		TEXT,
	version		TEXT NOT NULL
);
CREATE TABLE changes (
	seq		INTEGER PRIMARY KEY,
	at		INTEGER NOT NULL,
	gateway		TEXT,
	kind		TEXT NOT NULL CHECK (kind IN ('rule', 'approval',
			    'setting', 'agent', 'exporter')),
	ref		TEXT
);
ALTER TABLE audit_log ADD COLUMN gateway TEXT;

PRAGMA user_version = 12;

-- @migration 13

-- Exporter leases (protocol.md 4.4): which gateway polls and claims an
-- exporter's devices.  Written only on PostgreSQL, where several
-- gateways share the store; on SQLite the one gateway holds every
-- exporter without a row.  expires_ms is Unix milliseconds by the
-- database server's clock; epoch grows each time the lease changes hands.
CREATE TABLE exporter_leases (
	exporter_id	INTEGER PRIMARY KEY REFERENCES exporters(id),
	gateway		TEXT NOT NULL,
	epoch		INTEGER NOT NULL,
	acquired_at	INTEGER NOT NULL,	-- Unix seconds, this holder's
	expires_ms	INTEGER NOT NULL
);

PRAGMA user_version = 13;

-- @migration 14

-- The change feed's exporters trigger fires on any column a gateway
-- applies, not only name, host, port and removed_at (schema_pg.sql's
-- migration 14, protocol.md 4.3).  The feed's triggers exist on
-- PostgreSQL only: on SQLite (one gateway) this migration changes
-- nothing but the version, which stays the same number on both.

PRAGMA user_version = 14;

-- @migration 15

-- An attachment's URBs and control requests to denied interfaces that
-- the relay answered itself with a stall (protocol.md 1.6, "Per-interface
-- enforcement"), all of them: the audit log has the first 16 one by one
-- and one summary row.  Written with the other counters when the
-- attachment ends; 0 for a local attachment the kernel relays (direct),
-- and for attachments before this version.
ALTER TABLE attachments ADD COLUMN iface_refused INTEGER NOT NULL DEFAULT 0;

PRAGMA user_version = 15;

-- @views

DROP VIEW IF EXISTS v_devices;
DROP VIEW IF EXISTS v_pending;
DROP VIEW IF EXISTS v_rules;
DROP VIEW IF EXISTS v_approvals;
DROP VIEW IF EXISTS v_device_history;
DROP VIEW IF EXISTS v_access_requests;
DROP VIEW IF EXISTS v_attachment_traffic;
DROP VIEW IF EXISTS v_identity_changes;
DROP VIEW IF EXISTS v_audit;
DROP VIEW IF EXISTS v_agents;
DROP VIEW IF EXISTS v_refused_requests;
DROP VIEW IF EXISTS v_storage_attachments;

-- Every device identity, readable.
CREATE VIEW v_devices AS
SELECT
	d.id				AS device_id,
	d.busid				AS busid,
	e.name				AS exporter,
	d.exporter_busid		AS exporter_busid,
	printf('%04x', d.vid)		AS vid,
	printf('%04x', d.pid)		AS pid,
	d.manufacturer			AS manufacturer,
	d.product			AS product,
	d.serial			AS serial,
	(SELECT group_concat(t, ' ') FROM (SELECT printf('%02x:%02x:%02x',
	    i.class, i.subclass, i.protocol) AS t FROM interfaces i
	    WHERE i.device_id = d.id ORDER BY i.idx)) AS interfaces,
	d.hash				AS hash,
	d.state				AS state,
	datetime(d.state_since, 'unixepoch') AS state_since_utc,
	d.rule_id			AS rule_id,
	datetime(d.first_seen, 'unixepoch') AS first_seen_utc,
	datetime(d.last_seen, 'unixepoch') AS last_seen_utc
FROM devices d
JOIN exporters e ON e.id = d.exporter_id;

-- Devices waiting for a decision now, oldest first, with how many vhci
-- hosts are waiting for them.
CREATE VIEW v_pending AS
SELECT
	v.device_id, v.busid, v.exporter, v.exporter_busid, v.vid, v.pid,
	v.manufacturer, v.product, v.serial, v.interfaces,
	v.state_since_utc		AS pending_since_utc,
	CAST(strftime('%s', 'now') AS INTEGER) - d.state_since
					AS waiting_seconds,
	(SELECT count(*) FROM access_requests r
	    WHERE r.device_id = d.id AND r.outcome = 'waiting')
					AS hosts_waiting
FROM v_devices v
JOIN devices d ON d.id = v.device_id
WHERE d.state = 'pending'
ORDER BY d.state_since;

-- The active policy in order.
CREATE VIEW v_rules AS
SELECT
	r.position, r.id AS rule_id, r.text, r.target, r.origin,
	r.device_id, r.comment, datetime(r.created_at, 'unixepoch') AS created_utc,
	r.created_by
FROM rules r
WHERE r.position IS NOT NULL
ORDER BY r.position;

-- Who approved (or denied) what, when, why, until when, and its status.
CREATE VIEW v_approvals AS
SELECT
	a.id				AS approval_id,
	v.busid, v.exporter, v.exporter_busid, v.vid, v.pid, v.product,
	v.serial,
	a.decision, a.scope, a.to_host,
	datetime(a.created_at, 'unixepoch') AS decided_at_utc,
	a.actor_name			AS decided_by,
	a.actor_uid			AS decided_by_uid,
	a.reason,
	datetime(a.expires_at, 'unixepoch') AS until_utc,
	CASE
	    WHEN a.ended_at IS NOT NULL THEN a.end_reason
	    WHEN a.expires_at IS NOT NULL AND
		a.expires_at <= CAST(strftime('%s', 'now') AS INTEGER)
		THEN 'expired'
	    ELSE 'active'
	END				AS status,
	datetime(a.ended_at, 'unixepoch') AS ended_at_utc,
	a.ended_by,
	a.rule_id,
	a.device_id
FROM approvals a
JOIN v_devices v ON v.device_id = a.device_id;

-- Everything the audit log says about each device (filter by busid or
-- device_id), in order.
CREATE VIEW v_device_history AS
SELECT
	l.device_id, d.busid AS busid, l.seq,
	datetime(l.ts, 'unixepoch')	AS at_utc,
	l.event, l.old_state, l.new_state, l.actor, l.actor_name,
	l.rule_id, l.host, l.reason, l.detail
FROM audit_log l
JOIN devices d ON d.id = l.device_id
ORDER BY l.device_id, l.seq;

-- Access requests and what became of them.
CREATE VIEW v_access_requests AS
SELECT
	r.id				AS request_id,
	datetime(r.requested_at, 'unixepoch') AS requested_at_utc,
	r.busid, r.host_name, r.host_addr,
	r.device_id,
	v.vid, v.pid, v.product, v.serial,
	r.outcome,
	datetime(r.decided_at, 'unixepoch') AS decided_at_utc,
	r.decided_by,
	r.decided_at - r.requested_at	AS wait_seconds,
	r.approval_id
FROM access_requests r
LEFT JOIN v_devices v ON v.device_id = r.device_id;

-- Traffic per attachment.
CREATE VIEW v_attachment_traffic AS
SELECT
	t.id				AS attachment_id,
	v.busid, v.exporter, v.vid, v.pid, v.product, v.serial,
	t.mode, t.host_name, t.host_addr,
	t.transport, t.host_cert, t.up_transport, t.up_cert,
	datetime(t.started_at, 'unixepoch') AS started_at_utc,
	datetime(t.ended_at, 'unixepoch') AS ended_at_utc,
	IFNULL(t.ended_at, CAST(strftime('%s', 'now') AS INTEGER)) -
	    t.started_at		AS seconds,
	t.bytes_to_device, t.bytes_from_device,
	t.urbs_to_device, t.urbs_from_device, t.iface_refused,
	t.end_reason, t.approval_id, t.rule_id, t.device_id
FROM attachments t
JOIN v_devices v ON v.device_id = t.device_id;

-- Devices that changed identity: same exporter port, vid:pid and serial,
-- different descriptor hash (a later identity row than the earlier one).
CREATE VIEW v_identity_changes AS
SELECT
	e.name				AS exporter,
	a.exporter_busid,
	printf('%04x:%04x', a.vid, a.pid) AS id,
	a.serial,
	a.id				AS old_device_id,
	a.hash				AS old_hash,
	b.id				AS new_device_id,
	b.hash				AS new_hash,
	datetime(b.first_seen, 'unixepoch') AS changed_at_utc,
	b.state				AS new_state
FROM devices a
JOIN devices b ON b.exporter_id = a.exporter_id
    AND b.exporter_busid = a.exporter_busid
    AND b.vid = a.vid AND b.pid = a.pid AND b.serial = a.serial
    AND b.hash != a.hash AND b.id > a.id
JOIN exporters e ON e.id = a.exporter_id;

-- The audit log with readable times.
CREATE VIEW v_audit AS
SELECT
	seq, datetime(ts, 'unixepoch') AS at_utc, event, device_id, busid,
	exporter, object, old_state, new_state, actor, actor_uid, actor_name,
	rule_id, host, reason, detail
FROM audit_log;

-- Enrolled agents and hosts with their effective state ('expired' for an
-- active certificate past its notAfter).
CREATE VIEW v_agents AS
SELECT
	id, name, role,
	CASE WHEN state = 'active' AND not_after IS NOT NULL AND
	    not_after <= CAST(strftime('%s', 'now') AS INTEGER)
	    THEN 'expired' ELSE state END AS state,
	fingerprint, serial, datetime(not_after, 'unixepoch') AS not_after_utc,
	address, datetime(created_at, 'unixepoch') AS created_utc,
	datetime(approved_at, 'unixepoch') AS approved_utc, approved_by,
	datetime(ended_at, 'unixepoch') AS ended_utc, end_reason
FROM agents;
-- Every import a vhci host asked for and did not get, whatever the
-- reason: a device pending or being probed (the access request ended
-- without a grant: refused, timed out, withdrawn, ...), blocked, rejected
-- or not authorized for that host (import-refused), or a busid the
-- gateway does not have (import-unknown).  One row per request; times in
-- UTC.  Rows written before the host and busid columns were filled for
-- refusals (schema 9 and earlier) read them from object and detail.
CREATE VIEW v_refused_requests AS
SELECT
	datetime(r.requested_at, 'unixepoch') AS at_utc,
	IFNULL(r.host_name, r.host_addr) AS host,
	r.busid,
	r.device_id,
	'pending: ' || r.outcome	AS why
FROM access_requests r
WHERE r.outcome NOT IN ('granted', 'waiting')
UNION ALL
SELECT
	datetime(l.ts, 'unixepoch')	AS at_utc,
	COALESCE(l.host, CASE WHEN instr(l.object, ' ') > 0
	    THEN substr(l.object, 1, instr(l.object, ' ') - 1)
	    ELSE l.object END)		AS host,
	COALESCE(l.busid, CASE WHEN l.event = 'import-unknown'
	    THEN l.detail END)		AS busid,
	l.device_id,
	CASE
	    WHEN l.event = 'import-unknown' THEN 'unknown busid'
	    WHEN l.busid IS NULL THEN 'refused'
	    ELSE IFNULL(l.detail, 'refused')
	END				AS why
FROM audit_log l
WHERE l.event IN ('import-refused', 'import-unknown');

-- Attachments of mass-storage devices (an interface of class 08), for a
-- time range: WHERE started_at_utc < :to AND IFNULL(ended_at_utc, :to) >=
-- :from, with :to and :from UTC text as datetime() writes it.
CREATE VIEW v_storage_attachments AS
SELECT a.*
FROM v_attachment_traffic a
WHERE EXISTS (SELECT 1 FROM interfaces i
    WHERE i.device_id = a.device_id AND i.class = 8);
