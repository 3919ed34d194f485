#!/usr/bin/env bash
# log-format = json (issue 18 item 3): every line usbgwd writes is one
# JSON object with time, level, event, busid, exporter, host and message;
# audited events carry their fields (a state change names its busid and
# exporter, an import its host); untrusted bytes (a device's strings with
# quotes, control characters and invalid UTF-8) cannot break a line; the
# text format stays the default.
. "$(dirname "$0")/../lib/common.sh"
. "$(dirname "$0")/../lib/sim.sh"
. "$(dirname "$0")/../lib/gw.sh"

need_prog "$SIM" "$TC" "$USBGWD" "$USBGW" perl
plan 15

cat >"$T/sim.conf" <<'EOF'
device 1-1 { type sourcesink; product_name "Evil \"quote\"\x01\\ end"; }
device 1-2 { type storage; }
EOF
sim_start sim -c "$T/sim.conf" || bail_out "simulator did not start"
gw_conf gw "exporter sim1 127.0.0.1:$(sim_port sim)" "poll-interval = 200ms" \
    "log-format = json" "log-level = debug"
gw_start gw || bail_out "usbgwd did not start"
gw_wait_state gw sim1:1-1 pending 10 || bail_out "not pending"
gwctl gw approve sim1:1-1
"$TC" import "$(gw_addr gw)" sim1:1-1 >/dev/null 2>&1
"$TC" import "$(gw_addr gw)" sim1:9-9 >/dev/null 2>&1
gw_wait_sql gw "SELECT count(*) FROM audit_log WHERE event = 'import-unknown'" 1
sleep 0.3
LOG=$(bg_log gw)

# every line: one object with the seven members, of the right types
perl -MJSON::PP -e '
	my ($n, $bad) = (0, 0);
	while (my $l = <STDIN>) {
		chomp $l; $n++;
		my $o = eval { JSON::PP->new->decode($l) };
		if (!$o || ref $o ne "HASH") { $bad++; print STDERR "not JSON: $l\n"; next }
		for my $k (qw(time level event busid exporter host message)) {
			if (!exists $o->{$k}) { $bad++; print STDERR "no $k: $l\n" }
		}
		$bad++, print STDERR "bad time: $l\n"
		    unless $o->{time} =~ /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
		$bad++, print STDERR "bad level: $l\n"
		    unless $o->{level} =~ /^(error|warning|info|debug)$/;
	}
	print "$n $bad\n"' <"$LOG" >"$T/check" 2>"$T/check.err"
read -r nlines nbad <"$T/check"
num_cmp "$nlines" -ge 20 "the log has lines ($nlines)"
is "$nbad" 0 "every line is a JSON object with time, level, event, busid, exporter, host, message"
[ "$nbad" = 0 ] || diag "$(head -5 "$T/check.err")"

j() {	# j PERL-CONDITION: how many lines satisfy it ($o the object)
	perl -MJSON::PP -ne 'my $o = eval { decode_json($_) } or next;
	    $n++ if ('"$1"'); END { print $n + 0, "\n" }' <"$LOG"
}
num_cmp "$(j '$o->{event} eq "state" && $o->{busid} eq "sim1:1-1" && $o->{exporter} eq "sim1" && $o->{message} =~ /pending -> authorized by root/')" -ge 1 \
    "the approval's state change: event state, busid, exporter, message"
num_cmp "$(j '$o->{event} eq "approve" && $o->{busid} eq "sim1:1-1" && $o->{level} eq "info"')" -ge 1 \
    "the approve event itself"
num_cmp "$(j '$o->{event} eq "state" && $o->{busid} eq "sim1:1-1" && $o->{host} eq "127.0.0.1" && $o->{message} =~ /-> attached/')" -ge 1 \
    "the import: attached, with the host"
num_cmp "$(j '$o->{event} eq "import-unknown" && $o->{busid} eq "sim1:9-9" && $o->{host} eq "127.0.0.1"')" -ge 1 \
    "an unknown busid: its busid and host"
num_cmp "$(j '$o->{event} eq "log" && !defined $o->{busid} && $o->{message} =~ /started/')" -ge 1 \
    "a plain line: event log, no busid"
num_cmp "$(j '$o->{level} eq "debug"')" -ge 1 "debug lines too (log-level debug)"
# the device's product string: quotes and bytes that are not UTF-8 escaped
unlike "$(grep -c $'\x01' "$LOG")" '^[1-9]' "no raw control byte in the log"

# the default stays text
stop_bg gw TERM
gw_conf gw2 "exporter sim1 127.0.0.1:$(sim_port sim)"
gw_start gw2 || bail_out "usbgwd did not start"
like "$(head -1 "$(bg_log gw2)")" '^[0-9][0-9]:[0-9][0-9]:[0-9][0-9]\.[0-9]{3} usbgwd\[' \
    "without log-format: the text format"
echo 'log-format = xml' >"$T/xml.conf"
run "$USBGWD" -n -c "$T/xml.conf"
is "$RC" 2 "log-format = xml: refused"
like "$ERR" 'log-format: expected text or json' "... naming the key and what is expected"
gw_finish gw2
