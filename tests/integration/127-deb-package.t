#!/usr/bin/env bash
# `make deb` builds the Debian packages (contrib/debian): lintian finds
# nothing, each package holds its files with the right modes and
# conffiles, and the installed files work: dpkg -i creates the users and
# /var/lib/usbgw, every Exec*= of every unit names an installed program,
# `usbgwd -n` passes on the installed conffile, the daemon started from
# the unit's ExecStart= (as its User=) answers the installed usbgw CLI,
# dpkg -r keeps configuration and state, dpkg -P removes both.
#
# Where it installs:
#   USBGW_PKG_INSTALL=1 (set by .ci/run, root on a throwaway machine):
#     on the machine itself, with systemctl when systemd runs it;
#   root, and the kernel allows overlayfs: a throwaway root, / under an
#     overlay in a private mount namespace (dpkg, adduser and the daemon
#     run chrooted in it; nothing reaches the real /, and it all goes
#     when the test ends);
#   otherwise: dpkg -x into a temp dir, the binaries run from there with
#     a database and socket in the temp dir (no install/remove/purge).
# Once, on the normal build's stage (the packages build their own).

# The throwaway root needs a mount namespace of its own: re-run there.
if [ "${USBGW_PKG_INSTALL:-0}" != 1 ] && [ -z "${_USBGW_DEB_NS:-}" ] &&
    [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
	export _USBGW_DEB_NS=1
	exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/../lib/common.sh"

[ "${USBGW_ASAN:-0}" = 1 ] && skip_all "packages are built once, in the normal build's stage"
need_prog dpkg-buildpackage dh dpkg-deb lintian
TEST_TIMEOUT=60

# ---- build ----------------------------------------------------------------
DEB=$T/deb
t0=$SECONDS
run -t 900 make -s -C "$TOP" deb DEB_DIR="$DEB"
is "$RC" 0 "make deb" || { _diag_output; bail_out "make deb failed"; }
diag "make deb: $((SECONDS - t0)) s"
VER=$(dpkg-parsechangelog -l "$TOP/contrib/debian/changelog" -S Version)
for p in usbgw usbgw-agent usbgw-attach; do
	eval "DEB_${p//-/_}=\$(ls \"\$DEB\"/${p}_${VER}_*.deb 2>/dev/null)"
done
like "$OUT" "usbgw_${VER}_[a-z0-9]+\\.deb" "make deb prints the packages' names"
ok "usbgw, usbgw-agent and usbgw-attach built" \
    test -f "$DEB_usbgw" -a -f "$DEB_usbgw_agent" -a -f "$DEB_usbgw_attach"

run -t 300 lintian --info --pedantic --fail-on error,warning,info,pedantic \
    "$DEB"/usbgw_"${VER}"_*.changes
is "$RC" 0 "lintian --pedantic: no tag left (the overrides say why)" || _diag_output
is "$OUT" "" "... and prints none"

# ---- contents ---------------------------------------------------------------
# has DEB "MODE OWNER PATH"...: dpkg-deb -c lists each (MODE as ls -l).
has() {
	local deb=$1 list miss=() want
	shift
	list=$(dpkg-deb -c "$deb" | awk '{ print $1, $2, $6 }')
	for want in "$@"; do
		grep -qxF -- "$want" <<<"$list" || miss+=("$want")
	done
	[ ${#miss[@]} -eq 0 ] || { printf '# missing: %s\n' "${miss[@]}"; return 1; }
}
R_=root/root
has "$DEB_usbgw" \
    "-rwxr-xr-x $R_ ./usr/sbin/usbgwd" "-rwxr-xr-x $R_ ./usr/bin/usbgw" \
    "-rw-r--r-- $R_ ./lib/systemd/system/usbgwd.service" \
    "-rw-r--r-- $R_ ./lib/systemd/system/usbgwd-local.service" \
    "drwxr-xr-x $R_ ./etc/usbgw/" \
    "-rw-r--r-- $R_ ./etc/usbgw/usbgwd.conf" \
    "drwxr-xr-x $R_ ./etc/usbgw/exporters.d/" \
    "-rw-r--r-- $R_ ./usr/lib/tmpfiles.d/usbgw.conf" \
    "-rw-r--r-- $R_ ./usr/share/man/man8/usbgwd.8.gz" \
    "-rw-r--r-- $R_ ./usr/share/man/man5/usbgwd.conf.5.gz" \
    "-rw-r--r-- $R_ ./usr/share/man/man1/usbgw.1.gz" \
    "-rw-r--r-- $R_ ./usr/share/doc/usbgw/audit-queries.sql" \
    "-rw-r--r-- $R_ ./usr/share/doc/usbgw/examples/example.conf"
check $? "usbgw: programs, units, conffile, exporters.d, tmpfiles, man pages, audit-queries.sql"
has "$DEB_usbgw_agent" \
    "-rwxr-xr-x $R_ ./usr/sbin/usbgw-agent" \
    "-rw-r--r-- $R_ ./lib/systemd/system/usbgw-agent.service" \
    "-rw-r--r-- $R_ ./etc/usbgw/usbgw-agent.conf" \
    "-rw-r--r-- $R_ ./lib/udev/rules.d/70-usbgw-agent.rules" \
    "-rw-r--r-- $R_ ./usr/share/man/man8/usbgw-agent.8.gz"
check $? "usbgw-agent: program, unit, conffile, udev rule in /lib/udev/rules.d, man page"
has "$DEB_usbgw_attach" \
    "-rwxr-xr-x $R_ ./usr/sbin/usbgw-attach" \
    "-rw-r--r-- $R_ ./lib/systemd/system/usbgw-attach.service" \
    "-rw-r--r-- $R_ ./usr/share/man/man8/usbgw-attach.8.gz" \
    "drwx------ $R_ ./var/lib/usbgw-attach/"
check $? "usbgw-attach: program, unit, man page, its TLS directory 0700"
is "$(for d in "$DEB_usbgw" "$DEB_usbgw_agent" "$DEB_usbgw_attach"; do dpkg-deb -c "$d"; done |
    awk '{ print $6 }' | grep -E '^\./(usr/local|var/lib/usbgw/|run/)')" "" \
    "nothing in /usr/local, /var/lib/usbgw or /run (made at install or by the units)"
conffiles() { dpkg-deb -I "$1" conffiles 2>/dev/null; }
is "$(conffiles "$DEB_usbgw")" "/etc/usbgw/usbgwd.conf" "usbgw's conffiles: usbgwd.conf"
is "$(conffiles "$DEB_usbgw_agent")" "/etc/usbgw/usbgw-agent.conf" \
    "usbgw-agent's conffiles: usbgw-agent.conf"
is "$(conffiles "$DEB_usbgw_attach")" "" "usbgw-attach: no conffile"
like "$(dpkg-deb -f "$DEB_usbgw" Depends)" '(^|, )adduser(,|$).*libsqlite3-0' \
    "usbgw depends on adduser and, by shlibs, libsqlite3"
like "$(dpkg-deb -f "$DEB_usbgw_agent" Depends)" 'libusb-1\.0-0' "usbgw-agent: on libusb"
# The units' ExecReload runs /bin/kill (procps: important, not essential).
for p in usbgw usbgw_agent; do
	v=DEB_$p
	like "$(dpkg-deb -f "${!v}" Depends)" '(^|, )procps(,|$)' \
	    "${p/_/-} depends on procps (ExecReload=/bin/kill)"
done
like "$(dpkg-deb -f "$DEB_usbgw_attach" Recommends)" '(^|, )usbip(,|$)' "usbgw-attach recommends usbip"

# ---- where to install ---------------------------------------------------------
MODE=extract
R=$T/root
if [ "${USBGW_PKG_INSTALL:-0}" = 1 ]; then
	[ "$(id -u)" = 0 ] || bail_out "USBGW_PKG_INSTALL=1 needs root"
	MODE=machine R=
elif [ -n "${_USBGW_DEB_NS:-}" ]; then
	# An overlay over /: reads see the machine, writes land in $T/up.
	# Fresh proc, /tmp and /run; of /dev, only the nodes programs need.
	mkdir -p "$T/up" "$T/work" "$R"
	if mount -t overlay overlay -o "lowerdir=/,upperdir=$T/up,workdir=$T/work" "$R" 2>/dev/null; then
		MODE=overlay
		mount -t proc proc "$R/proc" && mount -t tmpfs tmpfs "$R/tmp" &&
		    mount -t tmpfs -o mode=0755 tmpfs "$R/run" &&
		    mount -t tmpfs -o mode=0755 tmpfs "$R/dev" || bail_out "cannot set up the throwaway root"
		for n in null zero random urandom; do
			: >"$R/dev/$n" && mount --bind "/dev/$n" "$R/dev/$n" || bail_out "cannot bind /dev/$n"
		done
		ln -s /proc/self/fd "$R/dev/fd"
		# Unmounted before common.sh's cleanup removes $T.
		trap '_st=$?; umount -R -l "$R" 2>/dev/null; (exit $_st); _cleanup' EXIT
	fi
fi
note "installing: $MODE"
# "${IN[@]}" CMD...: CMD in the installed root.
IN=()
[ $MODE = overlay ] && IN=(chroot "$R")
P=${R:-}
[ $MODE = overlay ] && P=

if [ $MODE = extract ]; then
	for d in "$DEB_usbgw" "$DEB_usbgw_agent" "$DEB_usbgw_attach"; do
		dpkg-deb -x "$d" "$R" || bail_out "dpkg-deb -x $d failed"
	done
	pass "dpkg-deb -x into a temp root"
	skip 3 "no install: not root, no overlayfs, USBGW_PKG_INSTALL unset"
else
	if [ $MODE = overlay ]; then
		mkdir -p "$R/tmp/debs" && cp "$DEB_usbgw" "$DEB_usbgw_agent" "$DEB_usbgw_attach" "$R/tmp/debs/"
		D=/tmp/debs
	else
		D=$DEB
	fi
	# (adduser: /etc/passwd is the machine's, one test at a time changes it)
	with_lock users run -t 300 "${IN[@]}" dpkg -i "$D/${DEB_usbgw##*/}" "$D/${DEB_usbgw_agent##*/}" \
	    "$D/${DEB_usbgw_attach##*/}"
	is "$RC" 0 "dpkg -i usbgw usbgw-agent usbgw-attach" || _diag_output
	run "${IN[@]}" sh -c 'id -u usbgw; id -gn usbgw; id -u usbgw-agent; id -gn usbgw-agent;
	    getent passwd usbgw usbgw-agent | cut -d: -f7 | sort -u'
	like "$OUT" '^[1-9][0-9]?[0-9]?
usbgw
[1-9][0-9]?[0-9]?
usbgw-agent
/usr/sbin/nologin$' "system users usbgw and usbgw-agent (uid < 1000, own group, nologin)"
	is "$("${IN[@]}" stat -c '%a %U:%G' /var/lib/usbgw)" "750 usbgw:usbgw" "/var/lib/usbgw: 0750 usbgw:usbgw"
	is "$("${IN[@]}" stat -c '%a %U:%G' /etc/usbgw/usbgwd.conf)" "640 root:usbgw" \
	    "/etc/usbgw/usbgwd.conf 0640 root:usbgw after configure (it may hold a database password)"
fi

# ---- the units, from the installed files ------------------------------------
UNITS=/lib/systemd/system
# unit_keys UNIT KEY: the values of KEY= in the installed unit, one a line.
unit_keys() { sed -n "s/^$2=//p" "$R$UNITS/$1"; }
# Every program an Exec*= line starts is installed and executable (but
# for a "-" line, whose failure the unit ignores: usbgw-attach's
# /sbin/modprobe, from kmod, which the package recommends).
bad= n=0
for u in usbgwd.service usbgwd-local.service usbgw-agent.service usbgw-attach.service; do
	[ -f "$R$UNITS/$u" ] || { bad+=" $u:missing"; continue; }
	while read -r cmd _; do
		n=$((n + 1))
		case $cmd in -*) continue ;; esac
		cmd=${cmd#[+@!:]}; cmd=${cmd#[+@!:]}
		# (unpacked: the system's own programs, /bin/kill, are not in $R)
		[ -x "$R$cmd" ] || { [ $MODE = extract ] && [ -x "$cmd" ]; } || bad+=" $u:$cmd"
	done <<<"$(sed -n 's/^Exec[A-Za-z]*=//p' "$R$UNITS/$u")"
done
is "$bad" "" "every unit's Exec*= programs are in the installed root"
num_cmp "$n" -ge 12 "... all $n Exec*= lines of the 4 units read"
like "$(dpkg-deb -f "$DEB_usbgw_attach" Recommends)" '(^|, )kmod(,|$)' \
    "usbgw-attach recommends kmod (its unit's ExecStartPre=-/sbin/modprobe vhci-hcd)"
is "$(unit_keys usbgwd.service StateDirectoryMode)" "0750" \
    "usbgwd.service keeps /var/lib/usbgw at the package's 0750"
is "$(unit_keys usbgwd.service User)" "usbgw" "usbgwd.service: User=usbgw"

# The ExecStartPre= checks, on the installed conffiles.
# execline UNIT KEY: the command of the unit's KEY=, in the installed root.
execline() { unit_keys "$1" "$2" | head -n 1 | sed -e 's/^[-+@!:]*//'; }
pre=$(execline usbgwd.service ExecStartPre)
like "$pre" '^/usr/sbin/usbgwd -n -c /etc/usbgw/usbgwd.conf$' "usbgwd.service checks its config first"
if [ $MODE = extract ]; then pre=${pre//\/etc\//$R/etc/}; fi
run "${IN[@]}" ${pre/\/usr\/sbin\//$P/usr/sbin/}
is "$RC" 0 "usbgwd -n passes on the installed usbgwd.conf" || _diag_output
apre=$(execline usbgw-agent.service ExecStartPre)
if [ $MODE = extract ]; then apre=${apre//\/etc\//$R/etc/}; fi
run "${IN[@]}" ${apre/\/usr\/sbin\//$P/usr/sbin/}
is "$RC" 0 "usbgw-agent -n passes on the installed usbgw-agent.conf" || _diag_output
# The version is written in the C sources too: they must agree.
run "${IN[@]}" sh -c "$P/usr/sbin/usbgwd -V; $P/usr/bin/usbgw -V; $P/usr/sbin/usbgw-agent -V; $P/usr/sbin/usbgw-attach -V"
is "$OUT" "usbgwd ${VER%%-*}
usbgw ${VER%%-*} (control protocol 1)
usbgw-agent ${VER%%-*}
usbgw-attach ${VER%%-*}" "every program's -V: the package's upstream version (gateway/base/version.h)"

# ---- the daemon ---------------------------------------------------------------
start=$(execline usbgwd.service ExecStart)
like "$start" '^/usr/sbin/usbgwd -f .*-c /etc/usbgw/usbgwd.conf' "ExecStart= runs the installed usbgwd"
SOCK=/run/usbgw/control.sock
if [ $MODE = machine ] && [ -d /run/systemd/system ]; then
	# systemd runs it: the unit as installed.
	run systemctl start usbgwd.service
	is "$RC" 0 "systemctl start usbgwd" || _diag_output
	gwpid() { systemctl show -p MainPID --value usbgwd.service; }
	wait_for -t 15 test -S "$SOCK"
	check $? "the control socket appears"
else
	# What systemd would do: User=, Group=, UMask=, no capabilities,
	# RuntimeDirectory=.  Listening on loopback, port 0: other tests on
	# the machine may want *:3240.
	if [ $MODE = extract ]; then
		start=${start//\/etc\//$R/etc/}
		mkdir -p "$T/state" "$T/run"
		SOCK=$T/run/control.sock
		extra=(-d "$T/state/usbgw.db" -s "$SOCK" -P "$T/run/port")
		PORTFILE=$T/run/port
		as=()
	else
		"${IN[@]}" install -d -o usbgw -g usbgw -m 0755 /run/usbgw
		extra=(-P /run/usbgw/port)
		PORTFILE=$R/run/usbgw/port
		as=(setpriv --reuid="$(unit_keys usbgwd.service User)" \
		    --regid="$(unit_keys usbgwd.service Group)" --init-groups \
		    --inh-caps=-all --bounding-set=-all --no-new-privs)
	fi
	start_bg gw "${IN[@]}" "${as[@]}" sh -c "umask $(unit_keys usbgwd.service UMask); exec \"\$@\"" sh \
	    ${start/\/usr\/sbin\//$P/usr/sbin/} -l 127.0.0.1:0 "${extra[@]}"
	wait_file "$PORTFILE" 15 gw
	check $? "usbgwd started from the installed unit's ExecStart=" ||
	    diag "$(cat "$(bg_log gw)")"
	gwpid() { bg_pid gw; }
fi
run "${IN[@]}" "$P/usr/bin/usbgw" -s "$SOCK" status
is "$RC" 0 "the installed usbgw: status (hello)" || _diag_output
like "$OUT" 'privilege admin' "... root administers it"
run "${IN[@]}" "$P/usr/bin/usbgw" -s "$SOCK" list
is "$RC" 0 "the installed usbgw: list" || _diag_output
if [ $MODE != extract ]; then
	# (setpriv and sh exec: the pid is the daemon's)
	like "$(grep '^Uid:' "/proc/$(gwpid)/status")" "^Uid:[[:space:]]+$("${IN[@]}" id -u usbgw)[[:space:]]" "it runs as usbgw"
	is "$("${IN[@]}" stat -c '%a %U' /var/lib/usbgw/usbgw.db)" "600 usbgw" \
	    "its database: /var/lib/usbgw/usbgw.db, 0600 usbgw"
else
	skip 2 "not installed"
fi
if [ $MODE = machine ] && [ -d /run/systemd/system ]; then
	run systemctl stop usbgwd.service
	is "$RC" 0 "systemctl stop usbgwd"
else
	stop_bg gw TERM
	is "$RC" 0 "SIGTERM: clean exit" || diag "$(cat "$(bg_log gw)")"
fi

# ---- remove, purge ------------------------------------------------------------
if [ $MODE = extract ]; then
	skip 8 "no install: not root, no overlayfs, USBGW_PKG_INSTALL unset"
	done_testing
fi
"${IN[@]}" sh -c 'echo "# edited by the admin" >>/etc/usbgw/usbgwd.conf'
run -t 120 "${IN[@]}" dpkg -r usbgw usbgw-agent usbgw-attach
is "$RC" 0 "dpkg -r" || _diag_output
ok "... removes the programs" "${IN[@]}" sh -c '! test -e /usr/sbin/usbgwd && ! test -e /usr/sbin/usbgw-agent && ! test -e /usr/sbin/usbgw-attach'
like "$("${IN[@]}" tail -n 1 /etc/usbgw/usbgwd.conf)" 'edited by the admin' "... keeps the edited configuration"
ok "... keeps the database" "${IN[@]}" test -f /var/lib/usbgw/usbgw.db
is "$("${IN[@]}" dpkg-query -W -f '${Status}' usbgw)" "deinstall ok config-files" "... usbgw: config-files"
run -t 120 "${IN[@]}" dpkg -P usbgw usbgw-agent usbgw-attach
is "$RC" 0 "dpkg -P" || _diag_output
ok "... removes /etc/usbgw" "${IN[@]}" sh -c '! test -e /etc/usbgw'
ok "... and /var/lib/usbgw" "${IN[@]}" sh -c '! test -e /var/lib/usbgw'
done_testing
