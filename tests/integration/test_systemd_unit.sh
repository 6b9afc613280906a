#!/bin/bash
# deploy/systemd/grantd.service, checked without a running systemd (CI's
# PID 1 is not systemd): `systemd-analyze verify` of a copy whose ExecStart
# points at this build's grantd (verify wants the binary, and finds the
# Documentation= man pages through MANPATH in the source tree), then
# `systemd-analyze security --offline=yes`, whose overall exposure this
# test prints and which must stay at or under GD_UNIT_MAX_EXPOSURE.
#
# The threshold, 2.0, is the issue's aim.  The unit scores about 1.1;
# what remains is what a node needs: the network (peers over TCP; no
# PrivateNetwork=, no IP allow list that would fit every site), unix
# sockets (its clients), the host's root directory, and UMask=0027 (the
# repositories are group-readable for the git group's web frontends).
# Each hardening directive is also checked on its own (a ✓ line), since
# dropping one raises the score by only 0.1-0.4.
# test_systemd.sh drives the notify protocol itself.
. "$(dirname "$0")/lib.sh"

GD_UNIT_MAX_EXPOSURE=2.0
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not installed"; exit 77; }

UNIT=$GD_ROOT/deploy/systemd/grantd.service
U=$T_DIR/unit/grantd.service
mkdir -p "$T_DIR/unit"
sed "s|/usr/bin/grantd|$GD_BIN/grantd|g" "$UNIT" >"$U" || t_fatal "copy the unit"
# Documentation=man:... is looked up with man(1); without it installed
# verify cannot check those lines (and says so): fail in CI, where it is.
export MANPATH=$GD_ROOT/man

t_section "systemd-analyze verify"
t_expect 0 "the unit verifies" systemd-analyze verify "$U"
t_eq "without a word" "$OUT$ERR" ""
t_check "it is Type=notify" grep -qx "Type=notify" "$U"
t_check "with a watchdog" grep -qE "^WatchdogSec=[1-9]" "$U"
t_check "NotifyAccess=main (children cannot speak for the node)" grep -qx "NotifyAccess=main" "$U"
t_check "ExecStartPre checks the config (grantd -t)" grep -qE "^ExecStartPre=$GD_BIN/grantd -t " "$U"
sed 's/^ProtectSystem=strict/ProtectSystem=stritc/' "$U" >"$T_DIR/unit/bad.service"
# verify only warns (exit 0) about a value it ignores: the check above
# that it says nothing is what catches one
t_run systemd-analyze verify "$T_DIR/unit/bad.service"
t_has "a bad value makes verify speak (the check above can fail)" "$OUT$ERR" "stritc"
t_expect 0 "the ExecStartPre line runs: grantd -t --help exits 0" "$GD_BIN/grantd" --help

t_section "systemd-analyze security --offline=yes"
t_expect 0 "systemd-analyze security --offline=yes" systemd-analyze security --offline=yes "$U"
SEC=$OUT
SCORE=$(grep -oE 'Overall exposure level for grantd\.service: [0-9]+\.[0-9]+' <<<"$SEC" | awk '{ print $NF }')
echo "# systemd-analyze security: overall exposure $SCORE (at most $GD_UNIT_MAX_EXPOSURE)"
grep -E '^✗' <<<"$SEC" | sed 's/^/#   /'
t_check "an exposure level is printed ($SCORE)" test -n "$SCORE"
t_check "exposure $SCORE <= $GD_UNIT_MAX_EXPOSURE" \
	awk -v s="$SCORE" -v m="$GD_UNIT_MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s + 0 <= m + 0) }'
for d in NoNewPrivileges= "CapabilityBoundingSet=~CAP_SYS_ADMIN" \
	"CapabilityBoundingSet=~CAP_SET(UID|GID|PCAP)" PrivateTmp= PrivateDevices= \
	PrivateUsers= ProtectSystem= ProtectHome= ProtectKernelTunables= \
	ProtectKernelModules= ProtectKernelLogs= ProtectControlGroups= ProtectClock= \
	ProtectHostname= ProtectProc= ProcSubset= MemoryDenyWriteExecute= \
	LockPersonality= RestrictRealtime= RestrictSUIDSGID= RestrictNamespaces=~user \
	"RestrictAddressFamilies=~AF_PACKET" "RestrictAddressFamilies=~AF_NETLINK" \
	SystemCallArchitectures= "SystemCallFilter=~@privileged" \
	"SystemCallFilter=~@mount" "SystemCallFilter=~@module" NotifyAccess= \
	PrivateMounts= RemoveIPC= KeyringMode= User=/DynamicUser=; do
	t_check "✓ $d" eval 'grep -qF -- "✓ $d " <<<"$SEC"'
done
# the same audit of the unit with its hardening cut scores far worse
sed -E '/^(NoNewPrivileges|CapabilityBoundingSet|ProtectSystem|PrivateUsers|SystemCallFilter|MemoryDenyWriteExecute|ProtectProc|ProcSubset|ProtectHome|PrivateDevices)=/d' \
	"$U" >"$T_DIR/unit/weak.service"
t_run systemd-analyze security --offline=yes "$T_DIR/unit/weak.service"
WEAK=$(grep -oE 'Overall exposure level for weak\.service: [0-9]+\.[0-9]+' <<<"$OUT" | awk '{ print $NF }')
t_check "a unit without ten of its directives scores over the threshold ($WEAK)" \
	awk -v s="$WEAK" -v m="$GD_UNIT_MAX_EXPOSURE" 'BEGIN { exit !(s != "" && s + 0 > m + 0) }'

t_done
