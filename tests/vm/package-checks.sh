#!/bin/bash
# Guest script of tests/vm/package-test.sh: reel's Debian package under a real systemd (PID 1).
# Installs DEB1, waits for reel.service to be active (Type=notify: only after READY=1), checks
# its user and hardening, logs in with the kernel initiator to the packaged library, writes a
# tar archive through the changer and the first drive and reads it back, stops the service
# (clean stop within its timeout), upgrades to DEB2 (the service restarts; the archive is still
# there), purges (the user goes, the data stays).
# shellcheck disable=SC1091
. "$REEL_VM_LIB"
CMD_TIMEOUT=180
PORTAL=127.0.0.1:3260
IQN=iqn.2026-11.org.reel:library
SRC=/usr/share/common-licenses

[ "$(cat /proc/1/comm)" = systemd ] && ok "systemd is PID 1 ($(systemctl --version | head -n 1))" ||
	not_ok "systemd is PID 1" "PID 1 is $(cat /proc/1/comm)"

# wait_active: reel.service active (a notify service is "activating" until READY=1)
wait_active() {
	local st
	for _ in $(seq 1 180); do
		st=$(systemctl is-active reel 2>/dev/null)
		[ "$st" = active ] && return 0
		[ "$st" = failed ] && return 1
		sleep 1
	done
	return 1
}
journal() { journalctl -u reel --no-pager -n "${1:-20}" 2>&1; }
main_pid() { systemctl show -p MainPID --value reel; }

# login_and_map: the library's changer (sg) and first drive (nst), in CH and NST
login_and_map() {
	CH="" NST=""
	run iscsiadm -m discovery -t st -p "$PORTAL" || return 1
	run iscsiadm -m node -T "$IQN" -p "$PORTAL" --login || return 1
	for _ in $(seq 1 100); do
		CH=$(lsscsi -g 2>/dev/null | awk '$2 == "mediumx" {print $NF; exit}')
		# LUN 1 is the first drive (drive element 0).
		NST=$(lsscsi 2>/dev/null | awk '$1 ~ /:1\]$/ && $2 == "tape" {print $NF; exit}')
		[ -n "$CH" ] && [ -n "$NST" ] && break
		sleep 0.2
	done
	NST=${NST/\/st/\/nst}
	[ -n "$CH" ] && [ -c "$NST" ]
}
logout() { run iscsiadm -m node -T "$IQN" -p "$PORTAL" --logout; }

# --- install -----------------------------------------------------------------------------------
run dpkg -i "/vm/bin/$DEB1"
check "dpkg -i $DEB1" "$RUN_RC" "$RUN_OUT"
if wait_active; then
	ok "reel.service is active: systemd got READY=1 (Type=$(systemctl show -p Type --value reel))"
else
	not_ok "reel.service becomes active" "$(systemctl status reel --no-pager 2>&1 | head -n 15)" "$(journal)"
fi
pid=$(main_pid)
user=$(ps -o user= -p "$pid" 2>/dev/null | tr -d ' ')
[ "$user" = reel ] && ok "reel runs as user reel (pid $pid)" || not_ok "reel runs as user reel" "user '$user', pid '$pid'"
hard="$(systemctl show -p ProtectSystem --value reel) $(systemctl show -p NoNewPrivileges --value reel)"
[ "$hard" = "strict yes" ] && ok "hardening in force: ProtectSystem=strict, NoNewPrivileges=yes" ||
	not_ok "hardening in force" "ProtectSystem NoNewPrivileges: $hard"
mode=$(stat -c '%a %U' /var/lib/reel 2>/dev/null)
[ "$mode" = "700 reel" ] && ok "/var/lib/reel is 0700, owned by reel" || not_ok "/var/lib/reel is 0700 reel" "$mode"

# --- a cartridge written and read through the kernel initiator ------------------------------
if login_and_map; then
	ok "kernel initiator logged in to $IQN: changer $CH, drive 0 $NST"
	run mtx -f "$CH" load 1 0
	check "mtx load 1 0" "$RUN_RC" "$RUN_OUT"
	run tar -cf "$NST" -C "$SRC" .
	check "tar writes $SRC to $NST" "$RUN_RC" "$RUN_OUT"
	run mt -f "$NST" rewind
	run tar -df "$NST" -C "$SRC"
	check "tar -d: the archive reads back identical" "$RUN_RC" "$RUN_OUT"
	run mtx -f "$CH" unload 1 0
	check "mtx unload 1 0" "$RUN_RC" "$RUN_OUT"
	logout
else
	not_ok "kernel initiator login and device map" "changer '$CH' drive '$NST'" "$RUN_OUT"
fi

# --- a clean stop --------------------------------------------------------------------------
t0=$(now)
run systemctl stop reel
result=$(systemctl show -p Result --value reel)
if [ "$RUN_RC" = 0 ] && [ "$result" = success ] && [ "$(systemctl is-active reel)" = inactive ]; then
	ok "systemctl stop: clean exit in $(elapsed "$t0") s (Result=success)"
else
	not_ok "systemctl stop ends reel cleanly" "rc $RUN_RC, Result=$result" "$(journal)"
fi
if journal 200 | grep -q "stopped cleanly"; then
	ok "the journal says reel stopped cleanly (drives' data and the store synchronised)"
else
	not_ok "reel logs its clean stop" "$(journal 10)"
fi

# --- upgrade ------------------------------------------------------------------------------
run systemctl start reel
wait_active || not_ok "reel.service starts again" "$(journal)"
before=$(main_pid)
run dpkg -i "/vm/bin/$DEB2"
check "dpkg -i $DEB2 (upgrade)" "$RUN_RC" "$RUN_OUT"
if wait_active && [ "$(main_pid)" != "$before" ] && [ "$(dpkg-query -W -f '${Version}' reel)" = "${DEB2_VERSION}" ]; then
	ok "the upgrade restarted reel.service (pid $before -> $(main_pid), version $DEB2_VERSION)"
else
	not_ok "the upgrade restarts reel.service" "pid $before -> $(main_pid), version $(dpkg-query -W -f '${Version}' reel)" "$(journal)"
fi
if login_and_map; then
	run mtx -f "$CH" load 1 0
	run tar -df "$NST" -C "$SRC"
	check "after the upgrade the archive on cartridge 1 reads back identical" "$RUN_RC" "$RUN_OUT"
	run mtx -f "$CH" unload 1 0
	logout
else
	not_ok "login after the upgrade" "$RUN_OUT"
fi

# --- purge ----------------------------------------------------------------------------------
run dpkg --purge reel
check "dpkg --purge reel" "$RUN_RC" "$RUN_OUT"
if ! id reel >/dev/null 2>&1 && [ -d /var/lib/reel ] && ! systemctl is-active -q reel; then
	ok "purged: service gone, user reel removed, /var/lib/reel kept (REEL_PURGE_DATA not set)"
else
	not_ok "purge removes the user and keeps the data" "id: $(id reel 2>&1); $(ls -ld /var/lib/reel 2>&1)"
fi
journalctl -u reel --no-pager >"$REEL_VM_OUT/reel-journal.log" 2>&1
tap_summary
