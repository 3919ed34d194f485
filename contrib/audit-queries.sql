-- usbgw: audit with SQL.
--
-- Questions an auditor asks the gateway's database, one query per block.
-- Open the database read-only (the daemon keeps writing; WAL lets you read
-- meanwhile):
--
--     sqlite3 -readonly -box /var/lib/usbgw/usbgw.db
--
-- Words like :busid are parameters; in the sqlite3 shell set them first:
--
--     .param set :busid "'tc17:1-1.2'"
--     .param set :since "strftime('%s', 'now', '-1 day')"
--
-- Times are Unix seconds in the tables (ts, created_at, ...) and UTC text
-- in the v_* views, in columns whose names end in _utc ("2025-01-31
-- 17:00:00", as SQLite's datetime() writes it; compare them with
-- datetime(:unix, 'unixepoch')).  Durations end in seconds.
-- Each query below is run by tests/unit/test_audit_queries.c against a
-- database produced by a scripted scenario, and its rows are checked.
-- `usbgw audit verify` checks that nobody edited the audit log itself.

-- name: pending-now
-- Devices waiting for a decision right now, oldest first: how long they
-- have waited and how many vhci hosts are asking for them.
SELECT busid, exporter, vid || ':' || pid AS id, product, serial,
       pending_since_utc, waiting_seconds, hosts_waiting
FROM v_pending
ORDER BY pending_since_utc;

-- name: approvals-active
-- Who allowed or denied which device, when, why and until when: the
-- operator decisions in force now.
SELECT approval_id, busid, vid || ':' || pid AS id, serial, decision, scope,
       IFNULL(to_host, 'any') AS to_host, decided_by, decided_at_utc, reason,
       IFNULL(until_utc, 'no expiry') AS until_utc
FROM v_approvals
WHERE status = 'active'
ORDER BY decided_at_utc;

-- name: approvals-history
-- Every operator decision ever taken, and how it ended (expired,
-- revoked, gone with the device, superseded by a newer decision).
SELECT approval_id, busid, decision, scope, decided_by, decided_at_utc,
       reason, until_utc, status, ended_at_utc, ended_by
FROM v_approvals
ORDER BY approval_id;

-- name: expiring-soon
-- Decisions that expire within :within seconds from now.
SELECT approval_id, busid, decided_by, until_utc
FROM v_approvals
WHERE status = 'active' AND until_utc IS NOT NULL
  AND until_utc <= datetime('now', '+' || :within || ' seconds')
ORDER BY until_utc;

-- name: device-history
-- The full history of one device (by the gateway's busid), as the audit
-- log tells it: arrival, decisions and who took them, attachments.
SELECT seq, at_utc, event, old_state, new_state, actor, actor_name,
       rule_id, host, reason
FROM v_device_history
WHERE busid = :busid
ORDER BY seq;

-- name: access-requests
-- Access requests since :since (Unix seconds) and what became of them.
SELECT request_id, requested_at_utc, busid,
       IFNULL(host_name, host_addr) AS host, product, outcome, decided_by,
       wait_seconds
FROM v_access_requests
WHERE requested_at_utc >= datetime(:since, 'unixepoch')
ORDER BY request_id;

-- name: access-unknown-busids
-- Hosts asking for busids that do not exist: scanning, or a stale
-- configuration.
SELECT host, count(*) AS requests,
       group_concat(DISTINCT busid) AS busids, min(at_utc) AS first_utc,
       max(at_utc) AS last_utc
FROM v_refused_requests
WHERE why = 'unknown busid'
GROUP BY host
ORDER BY requests DESC, host;

-- name: hosts-refused
-- Which hosts asked for devices they did not get since :since (Unix
-- seconds): pending, blocked and unknown busids alike, with the reasons.
SELECT host, count(*) AS requests, count(DISTINCT busid) AS busids,
       group_concat(DISTINCT why) AS why, min(at_utc) AS first_utc,
       max(at_utc) AS last_utc
FROM v_refused_requests
WHERE at_utc >= datetime(:since, 'unixepoch')
GROUP BY host
ORDER BY requests DESC, host;

-- name: storage-attached-between
-- Mass-storage devices attached between :from and :to (Unix seconds):
-- which, to which host, when, and how much data moved.
SELECT busid, vid || ':' || pid AS id, product, serial,
       IFNULL(host_name, host_addr) AS host, started_at_utc, ended_at_utc,
       bytes_to_device, bytes_from_device
FROM v_storage_attachments
WHERE started_at_utc < datetime(:to, 'unixepoch')
  AND IFNULL(ended_at_utc, datetime(:to, 'unixepoch')) >=
      datetime(:from, 'unixepoch')
ORDER BY started_at_utc;

-- name: attached-now
-- Devices in use right now, by which vhci host, since when, and how
-- much data they have moved.
SELECT busid, vid || ':' || pid AS id, product, host_name, host_addr,
       started_at_utc, seconds, bytes_to_device + bytes_from_device AS bytes
FROM v_attachment_traffic
WHERE ended_at_utc IS NULL
ORDER BY started_at_utc;

-- name: traffic-per-attachment
-- Traffic of every attachment, biggest first (bytes and URBs each way).
SELECT attachment_id, busid, product, host_name, started_at_utc,
       ended_at_utc, seconds, bytes_to_device, bytes_from_device, urbs_to_device,
       urbs_from_device, end_reason
FROM v_attachment_traffic
ORDER BY bytes_to_device + bytes_from_device DESC;

-- name: iface-refusals
-- Attachments with refused interface URBs, most first: URBs and control
-- requests to interfaces an interface-policy denies, which the gateway
-- answered itself with a stall and never forwarded (the audit log has
-- the first 16 of each attachment, event iface-refused).
SELECT attachment_id, busid, product, host_name, started_at_utc,
       ended_at_utc, iface_refused, urbs_to_device, end_reason
FROM v_attachment_traffic
WHERE iface_refused > 0
ORDER BY iface_refused DESC, attachment_id;

-- name: traffic-per-host
-- Traffic per vhci host, all attachments together.
SELECT host_name, count(*) AS attachments,
       sum(bytes_to_device) AS bytes_to_devices,
       sum(bytes_from_device) AS bytes_from_devices, sum(seconds) AS seconds
FROM v_attachment_traffic
GROUP BY host_name
ORDER BY sum(bytes_to_device) + sum(bytes_from_device) DESC;

-- name: attachment-legs
-- How each attachment reached its device, newest first: the host leg
-- (vhci host -> gateway: tcp, tls or local) and the exporter leg
-- (gateway -> exporter or agent: tcp or tls), each with the name of the
-- certificate its TLS handshake verified.
SELECT attachment_id, busid, exporter, host_name, started_at_utc, transport,
       IFNULL(host_cert, '-') AS host_cert, up_transport,
       IFNULL(up_cert, '-') AS up_cert
FROM v_attachment_traffic
ORDER BY attachment_id DESC;

-- name: identity-changes
-- Devices that changed identity: same exporter port, vid:pid and serial,
-- but different descriptors (BadUSB-style re-enumeration, firmware
-- change, or a swapped device that copies ids).
SELECT exporter, exporter_busid, id, serial, old_hash, new_hash,
       changed_at_utc, new_state
FROM v_identity_changes
ORDER BY changed_at_utc;

-- name: blocked-by-rule
-- Devices kept out by a rule, with the rule's text.
SELECT d.busid, d.vid || ':' || d.pid AS id, d.product, d.state,
       r.id AS rule_id, r.text AS rule
FROM v_devices d
JOIN rules r ON r.id = d.rule_id
WHERE d.state = 'blocked'
ORDER BY d.busid;

-- name: revocations
-- Authorizations and attachments taken away (revoke, expiry, a time
-- window closing, a changed policy): who, when, why.
SELECT seq, at_utc, busid, old_state, new_state, actor, actor_name, reason
FROM v_audit
WHERE event = 'state' AND old_state IN ('authorized', 'attached')
  AND new_state IN ('pending', 'blocked')
ORDER BY seq;

-- name: operator-activity
-- What each operator did since :since, by kind of action.
SELECT actor_name, actor_uid, event, count(*) AS times,
       min(at_utc) AS first_utc, max(at_utc) AS last_utc
FROM v_audit
WHERE actor = 'operator' AND at_utc >= datetime(:since, 'unixepoch')
GROUP BY actor_name, actor_uid, event
ORDER BY actor_name, event;

-- name: refused-control
-- Control requests refused for lack of privilege: who tried what.
SELECT seq, at_utc, actor_uid, actor_name, object, detail
FROM v_audit
WHERE event = 'refused'
ORDER BY seq;

-- name: malformed-sessions
-- USB/IP sessions closed for protocol violations (possible attacks on
-- the gateway or an exporter), with the peer and what was wrong.
SELECT seq, at_utc, IFNULL(busid, object) AS peer_or_device, detail
FROM v_audit
WHERE event = 'malformed'
ORDER BY seq;

-- name: over-limits
-- Peers and exporters that went over the gateway's bounds: requests whose
-- audit rows were held back (one audit-suppressed row per address or IPv6
-- /64 and minute, with the counts by kind and the connections refused),
-- and exporters listing more devices than allowed. Scanning, a flood, or
-- a misbehaving thin client.
SELECT seq, at_utc, event, object AS address_or_exporter, detail
FROM v_audit
WHERE event IN ('audit-suppressed', 'exporter-over-limit')
ORDER BY seq;

-- name: policy-changes
-- The rule set's history: every rule ever added, by whom, and when and
-- by whom it was removed (removed rules are kept).
SELECT id AS rule_id, text, origin,
       datetime(created_at, 'unixepoch') AS added_utc, created_by,
       datetime(removed_at, 'unixepoch') AS removed_utc, removed_by
FROM rules
ORDER BY id;

-- name: devices-per-exporter
-- How many devices each exporter has in each state.
SELECT exporter, state, count(*) AS devices
FROM v_devices
GROUP BY exporter, state
ORDER BY exporter, state;

-- name: audit-head
-- The newest audit row's seq and hash.  Unsigned: prefer `usbgw audit
-- anchor -o FILE` (a signed anchor line) and keep it on another host;
-- `usbgw audit verify --anchor FILE` (or --seq N --hash H) later also
-- detects a log cut short.
SELECT seq, datetime(ts, 'unixepoch') AS at_utc, hash
FROM audit_log
ORDER BY seq DESC
LIMIT 1;
