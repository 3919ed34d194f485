-- A usbgw database as schema version 1 made it (fixture for the
-- migration test, tests/unit/test_db.c).  Made by opening a database
-- with db_open_version(path, 1), a short scenario through the db and
-- audit APIs, then: sqlite3 DB .dump, plus the user_version line.
-- Frozen: never regenerate it with a newer schema.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
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
INSERT INTO exporters VALUES(1,'tc17','10.0.0.17',3240,'unknown',1700000000,NULL,NULL);
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
INSERT INTO rules VALUES(1,1,'block with-interface one-of { 03:*:* }','block','admin',NULL,'no keyboards',1700000000,'root',NULL,NULL);
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
INSERT INTO devices VALUES(1,1,'1-1','tc17-1-1',1921,21863,0,0,0,0,0,'SanDisk','Cruzer Blade','4C530001','aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa','authorized',1700000010,NULL,1700000000,1700000010);
INSERT INTO devices VALUES(2,1,'1-2','tc17-1-2',1133,49948,0,0,0,0,0,'SanDisk','Keyboard','','bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb','blocked',1700000031,1,1700000030,1700000031);
CREATE TABLE interfaces (
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	idx		INTEGER NOT NULL CHECK (idx BETWEEN 0 AND 31),
	class		INTEGER NOT NULL CHECK (class BETWEEN 0 AND 255),
	subclass	INTEGER NOT NULL CHECK (subclass BETWEEN 0 AND 255),
	protocol	INTEGER NOT NULL CHECK (protocol BETWEEN 0 AND 255),
	PRIMARY KEY (device_id, idx)
) WITHOUT ROWID;
INSERT INTO interfaces VALUES(1,0,8,6,80);
INSERT INTO interfaces VALUES(2,0,3,1,1);
CREATE TABLE presences (
	id		INTEGER PRIMARY KEY,
	device_id	INTEGER NOT NULL REFERENCES devices(id),
	busid		TEXT NOT NULL,
	arrived_at	INTEGER NOT NULL,
	departed_at	INTEGER,
	depart_reason	TEXT
);
INSERT INTO presences VALUES(1,1,'tc17-1-1',1700000000,NULL,NULL);
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
INSERT INTO approvals VALUES(1,1,NULL,'allow','for',NULL,1700000010,1700003600,1000,'alice','backup',NULL,NULL,NULL,NULL);
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
INSERT INTO attachments VALUES(1,1,1,1,NULL,'proxy','vdi01','10.1.0.1',1700000020,1700000080,'detached',1048576,4096,300,300);
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
INSERT INTO access_requests VALUES(1,2,'tc17-1-2','vdi01','10.1.0.1',1700000040,'refused',1700000040,NULL,NULL);
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
INSERT INTO audit_log VALUES(1,1700000001,'state',1,'tc17-1-1','tc17',NULL,'probing','pending','system',NULL,NULL,NULL,NULL,NULL,NULL,'0000000000000000000000000000000000000000000000000000000000000000','96007533c4cce854038f5517732f890c7da800f1912d36cdddb6469c153579f4');
INSERT INTO audit_log VALUES(2,1700000010,'approve',1,'tc17-1-1',NULL,NULL,'pending','authorized','operator',1000,'alice',NULL,NULL,'backup',NULL,'96007533c4cce854038f5517732f890c7da800f1912d36cdddb6469c153579f4','2bcf944f544ffdc93a4ba5af39b097e6e2bddc4abd88a798022a42df6d044f89');
INSERT INTO audit_log VALUES(3,1700000031,'state',2,'tc17-1-2',NULL,NULL,'probing','blocked','rule',NULL,NULL,1,NULL,NULL,NULL,'2bcf944f544ffdc93a4ba5af39b097e6e2bddc4abd88a798022a42df6d044f89','499dd52458661159116a898ca49358e2818b9abeeabaedaeba8d192e9f097bc1');
CREATE TABLE audit_prune_guard (
	through_seq	INTEGER NOT NULL
);
CREATE INDEX rules_position ON rules(position) WHERE position IS NOT NULL;
CREATE UNIQUE INDEX rules_device ON rules(device_id)
    WHERE device_id IS NOT NULL AND removed_at IS NULL;
CREATE TRIGGER rules_text_immutable BEFORE UPDATE OF text, target ON rules
BEGIN
	SELECT RAISE(ABORT, 'rules: text is immutable (remove the rule, add a new one)');
END;
CREATE UNIQUE INDEX devices_busid_present ON devices(busid)
    WHERE state != 'gone';
CREATE INDEX devices_state ON devices(state);
CREATE INDEX devices_port ON devices(exporter_id, exporter_busid, vid, pid);
CREATE INDEX presences_device ON presences(device_id, arrived_at);
CREATE UNIQUE INDEX presences_open ON presences(device_id)
    WHERE departed_at IS NULL;
CREATE INDEX approvals_device ON approvals(device_id, created_at);
CREATE INDEX approvals_expiry ON approvals(expires_at)
    WHERE ended_at IS NULL AND expires_at IS NOT NULL;
CREATE INDEX attachments_device ON attachments(device_id, started_at);
CREATE UNIQUE INDEX attachments_open ON attachments(device_id)
    WHERE ended_at IS NULL;
CREATE INDEX access_requests_time ON access_requests(requested_at);
CREATE INDEX access_requests_device ON access_requests(device_id);
CREATE INDEX audit_log_device ON audit_log(device_id, seq)
    WHERE device_id IS NOT NULL;
CREATE INDEX audit_log_ts ON audit_log(ts);
CREATE INDEX audit_log_event ON audit_log(event, seq);
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
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
WHEN NOT EXISTS (SELECT 1 FROM audit_prune_guard
    WHERE OLD.seq <= through_seq)
BEGIN
	SELECT RAISE(ABORT, 'audit_log is append-only (use: usbgw audit prune)');
END;
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
	datetime(d.state_since, 'unixepoch') AS state_since,
	d.rule_id			AS rule_id,
	datetime(d.first_seen, 'unixepoch') AS first_seen,
	datetime(d.last_seen, 'unixepoch') AS last_seen
FROM devices d
JOIN exporters e ON e.id = d.exporter_id;
CREATE VIEW v_pending AS
SELECT
	v.device_id, v.busid, v.exporter, v.exporter_busid, v.vid, v.pid,
	v.manufacturer, v.product, v.serial, v.interfaces,
	v.state_since			AS pending_since,
	CAST(strftime('%s', 'now') AS INTEGER) - d.state_since
					AS waiting_seconds,
	(SELECT count(*) FROM access_requests r
	    WHERE r.device_id = d.id AND r.outcome = 'waiting')
					AS hosts_waiting
FROM v_devices v
JOIN devices d ON d.id = v.device_id
WHERE d.state = 'pending'
ORDER BY d.state_since;
CREATE VIEW v_rules AS
SELECT
	r.position, r.id AS rule_id, r.text, r.target, r.origin,
	r.device_id, r.comment, datetime(r.created_at, 'unixepoch') AS created,
	r.created_by
FROM rules r
WHERE r.position IS NOT NULL
ORDER BY r.position;
CREATE VIEW v_approvals AS
SELECT
	a.id				AS approval_id,
	v.busid, v.exporter, v.exporter_busid, v.vid, v.pid, v.product,
	v.serial,
	a.decision, a.scope, a.to_host,
	datetime(a.created_at, 'unixepoch') AS decided_at,
	a.actor_name			AS decided_by,
	a.actor_uid			AS decided_by_uid,
	a.reason,
	datetime(a.expires_at, 'unixepoch') AS until,
	CASE
	    WHEN a.ended_at IS NOT NULL THEN a.end_reason
	    WHEN a.expires_at IS NOT NULL AND
		a.expires_at <= CAST(strftime('%s', 'now') AS INTEGER)
		THEN 'expired'
	    ELSE 'active'
	END				AS status,
	datetime(a.ended_at, 'unixepoch') AS ended_at,
	a.ended_by,
	a.rule_id,
	a.device_id
FROM approvals a
JOIN v_devices v ON v.device_id = a.device_id;
CREATE VIEW v_device_history AS
SELECT
	l.device_id, d.busid AS busid, l.seq,
	datetime(l.ts, 'unixepoch')	AS at,
	l.event, l.old_state, l.new_state, l.actor, l.actor_name,
	l.rule_id, l.host, l.reason, l.detail
FROM audit_log l
JOIN devices d ON d.id = l.device_id
ORDER BY l.device_id, l.seq;
CREATE VIEW v_access_requests AS
SELECT
	r.id				AS request_id,
	datetime(r.requested_at, 'unixepoch') AS requested_at,
	r.busid, r.host_name, r.host_addr,
	r.device_id,
	v.vid, v.pid, v.product, v.serial,
	r.outcome,
	datetime(r.decided_at, 'unixepoch') AS decided_at,
	r.decided_by,
	r.decided_at - r.requested_at	AS wait_seconds,
	r.approval_id
FROM access_requests r
LEFT JOIN v_devices v ON v.device_id = r.device_id;
CREATE VIEW v_attachment_traffic AS
SELECT
	t.id				AS attachment_id,
	v.busid, v.exporter, v.vid, v.pid, v.product, v.serial,
	t.mode, t.host_name, t.host_addr,
	datetime(t.started_at, 'unixepoch') AS started_at,
	datetime(t.ended_at, 'unixepoch') AS ended_at,
	IFNULL(t.ended_at, CAST(strftime('%s', 'now') AS INTEGER)) -
	    t.started_at		AS seconds,
	t.bytes_to_device, t.bytes_from_device,
	t.urbs_to_device, t.urbs_from_device,
	t.end_reason, t.approval_id, t.rule_id, t.device_id
FROM attachments t
JOIN v_devices v ON v.device_id = t.device_id;
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
	datetime(b.first_seen, 'unixepoch') AS changed_at,
	b.state				AS new_state
FROM devices a
JOIN devices b ON b.exporter_id = a.exporter_id
    AND b.exporter_busid = a.exporter_busid
    AND b.vid = a.vid AND b.pid = a.pid AND b.serial = a.serial
    AND b.hash != a.hash AND b.id > a.id
JOIN exporters e ON e.id = a.exporter_id;
CREATE VIEW v_audit AS
SELECT
	seq, datetime(ts, 'unixepoch') AS at, event, device_id, busid,
	exporter, object, old_state, new_state, actor, actor_uid, actor_name,
	rule_id, host, reason, detail
FROM audit_log;
COMMIT;
PRAGMA user_version = 1;
