#!/bin/bash
# A mirror's lease against a stepped wall clock (issue 19 item 9; the
# syncing gate's side is test_clock_step.sh).  A frontend feeds a mirror
# for MIRROR_LEASE_MS (3 s) after each of its subscriptions (repl.c).  On
# the wall clock, a frontend whose clock was stepped an hour back held the
# lease of a mirror gone meanwhile for that hour: it went on calling the
# mirror connected and feeding it.  On the monotonic clock it lapses 3 s
# after the last subscription, whatever the wall clock does.
. "$(dirname "$0")/lib.sh"

t_section "paloalto, portland (frontends) and montreal (mirror)"
t_cluster_config
sed -i '/^\[node\]$/a role = mirror' "$(t_dir montreal)/grantd.conf"
for s in paloalto portland; do
	sed -i '/^\[peer montreal\]$/a role = mirror' "$(t_dir "$s")/grantd.conf"
done
GRANTD_TEST_CLOCK_STEP_MS=-3600000 t_start paloalto
t_start portland
t_start montreal
for s in "${T_SITES[@]}"; do
	t_expect_soon 0 20 "$s hears (or feeds) every peer" gd_peers_connected "$(t_dir "$s")"
done

# fed SITE: exit 0 when SITE calls montreal connected (its lease lives), 1
# when it answers otherwise, 2 when it does not answer.
fed() {
	local v
	v=$(t_sj "$1" '[p["connected"] for p in j["peers"] if p["site"] == "montreal"][0]' 2>/dev/null) || return 2
	[[ $v == true ]]
}
t_check "paloalto feeds montreal" fed paloalto

t_section "montreal stops, then paloalto's wall clock goes an hour back"
t_stop montreal
off=$(stat -c %s "$(t_dir paloalto)/grantd.log")
t_check "SIGUSR2 to paloalto" kill -USR2 "$(t_pid paloalto)"
t_check "paloalto took the step" gd_wait_for 5 eval \
	"tail -c +$((off + 1)) '$(t_dir paloalto)/grantd.log' | grep -F 'test hook: wall clock stepped step_ms=-3600000' >/dev/null"
t_expect_soon 1 10 "paloalto's lease for montreal lapses (3 s after its last subscription)" fed paloalto
t_expect_soon 1 10 "portland's too (its clock not stepped)" fed portland
t_done
