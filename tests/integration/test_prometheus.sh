#!/usr/bin/env bash
# A real Prometheus server (Debian's /usr/bin/prometheus) scrapes a
# three-site cluster every second, as an operator's would, and its HTTP API
# (/api/v1/query) shows what docs/operations.md "Monitoring" tells
# operators to alert on: every target up, grantd_peer_connected falling to 0
# at both other sites for a site that is killed, and back to 1 with the lag
# at 0 (and what the site missed applied) once it is started again.  The
# server listens on loopback, keeps its storage in the test's directory and
# is stopped at the end; every wait is a query polled to a deadline.
. "$(dirname "$0")/lib.sh"

command -v prometheus >/dev/null || { echo "SKIP: prometheus not installed"; exit 77; }

T_METRICS_PORT=$((T_SSH_PORT + 10000))
P_ADDR=$T_NET.4:$T_METRICS_PORT
P_DIR=$T_DIR/prometheus
for a in "${T_SADDR[@]}" "$T_NET.4"; do
	gd_port_free "$a" "$T_METRICS_PORT" || t_fatal "port $a:$T_METRICS_PORT is free"
done

prom_stop() {
	local pid
	[[ -s $P_DIR/pid ]] || return 0
	pid=$(<"$P_DIR/pid")
	kill -TERM "$pid" 2>/dev/null
	gd_wait_for 20 t_gone "$pid" || kill -KILL "$pid" 2>/dev/null
	rm -f "$P_DIR/pid"
}
trap 'prom_stop; t_cleanup' EXIT

# prom_up: write the config (one job, the three sites, each target labelled
# with its site; the alerting rules of docs/operations.md "What to alert
# on", taken from the page itself) and start the server, detached like the
# nodes.
prom_up() {
	local s
	mkdir -p "$P_DIR/data" || return 1
	python3 - "$GD_ROOT/docs/operations.md" >"$P_DIR/rules.yml" <<'PY' || return 1
import sys
s = open(sys.argv[1]).read()
i = s.index("groups:\n  - name: grantd")
sys.stdout.write(s[i:s.index("```", i)])
PY
	t_expect 0 "the alerting rules of docs/operations.md pass promtool check rules" \
		promtool check rules "$P_DIR/rules.yml"
	{
		echo "rule_files: ['$P_DIR/rules.yml']"
		echo "global:"
		echo "  scrape_interval: 1s"
		echo "  scrape_timeout: 1s"
		echo "  evaluation_interval: 1s"
		echo "scrape_configs:"
		echo "  - job_name: grantd"
		echo "    static_configs:"
		for s in "${T_SITES[@]}"; do
			echo "      - targets: ['$(t_metrics_addr "$s")']"
			echo "        labels: { site: '$s' }"
		done
	} >"$P_DIR/prometheus.yml"
	promtool check config "$P_DIR/prometheus.yml" >/dev/null 2>&1 || return 1
	(setsid bash -c 'prometheus --config.file="$1/prometheus.yml" \
		--storage.tsdb.path="$1/data" --web.listen-address="$2" \
		--log.level=warn </dev/null >>"$1/prometheus.log" 2>&1 &
		echo $! >"$1/pid"' prom-wrapper "$P_DIR" "$P_ADDR" \
		</dev/null >/dev/null 2>&1 &)
	gd_wait_for 10 test -s "$P_DIR/pid" || return 1
	gd_wait_for 30 prom_ready
}
prom_ready() { [[ $(t_http code "http://$P_ADDR/-/ready") == 200 ]]; }

# pq QUERY: the value of the first element of QUERY's instant vector (empty
# when there is none).
pq() {
	t_http body "http://$P_ADDR/api/v1/query?query=$(python3 -c \
		'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1")" |
		python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1] if r else "")
except Exception:
    print("")'
}
# pq_is QUERY VALUE: the query gives VALUE.
pq_is() { [[ $(pq "$1") == "$2" ]]; }
# soon SECS DESC QUERY VALUE: polled until the query gives VALUE.
soon() { t_expect_soon 0 "$1" "$2" pq_is "$3" "$4"; }

t_cluster_up
t_section "prometheus on $P_ADDR scrapes the three sites every second"
prom_up || { cat "$P_DIR/prometheus.log" 2>/dev/null; t_fatal "prometheus starts and is ready"; }
soon 30 "every target is up" 'count(up{job="grantd"} == 1)' 3
soon 10 "every site knows its build" 'count(grantd_build_info)' 3
soon 10 "every site sees both peers connected" 'sum(grantd_peer_connected)' 6
soon 10 "no lag anywhere" 'max(grantd_peer_lag_ops)' 0

t_section "montreal killed"
t_kill9 montreal || t_fatal "kill -9 montreal"
soon 15 "paloalto: grantd_peer_connected{peer=montreal} drops to 0" \
	'grantd_peer_connected{site="paloalto",peer="montreal"}' 0
soon 15 "portland: grantd_peer_connected{peer=montreal} drops to 0" \
	'grantd_peer_connected{site="portland",peer="montreal"}' 0
soon 15 "its target is down" 'up{site="montreal"}' 0
soon 15 "the documented rule GrantdPeerSilent is pending or firing at both other sites" \
	'count(ALERTS{alertname="GrantdPeerSilent",peer="montreal"})' 2
t_check "paloalto still hears portland" \
	pq_is 'grantd_peer_connected{site="paloalto",peer="portland"}' 1
# what montreal misses
t_suser paloalto kim
t_c paloalto repo add missed >/dev/null || t_fatal "repo add missed at paloalto"
soon 10 "portland applied paloalto's new operations" \
	'grantd_ops_applied_total{site="portland",origin="paloalto"} - ignoring(site, instance) grantd_ops_applied_total{site="paloalto",origin="paloalto"}' 0

t_section "montreal started again"
t_start montreal
soon 20 "its target is up" 'up{site="montreal"}' 1
soon 20 "paloalto: grantd_peer_connected{peer=montreal} back to 1" \
	'grantd_peer_connected{site="paloalto",peer="montreal"}' 1
soon 20 "montreal applied what it missed" \
	'grantd_ops_applied_total{site="montreal",origin="paloalto"} - ignoring(site, instance) grantd_ops_applied_total{site="paloalto",origin="paloalto"}' 0
soon 20 "montreal's lag behind its peers is back to 0" \
	'max(grantd_peer_lag_ops{site="montreal"})' 0
soon 20 "no lag anywhere, in operations" 'max(grantd_peer_lag_ops)' 0
soon 20 "no lag anywhere, in seconds" 'max(grantd_peer_lag_seconds)' 0
soon 20 "montreal is not syncing" 'grantd_syncing{site="montreal"}' 0
soon 15 "no GrantdPeerSilent or GrantdReplicationLag alert any more" \
	'count(ALERTS{alertname=~"GrantdPeerSilent|GrantdReplicationLag"}) or vector(0)' 0
t_check "no peer message dropped anywhere" \
	pq_is 'sum(grantd_peer_messages_dropped_total)' 0
# ... and a counter that cannot move would say the same: bad messages
# from portland's key to paloalto's sync endpoint must show in the query
# (test audit 8964f70, check 10).
if PY=$(t_py); then
	t_expect 0 "bad messages (one random, the crafted set) to paloalto's sync endpoint with portland's key" \
		"$PY" "$T_HERE/repl_rogue.py" garbage "tcp://${T_SADDR[paloalto]}:$T_SYNC_PORT" \
		"$(<"$(t_dir paloalto)/node.pub")" "$(t_dir portland)/node.key" 1 1
	t_expect_soon 0 15 "prometheus sees it dropped at paloalto" \
		eval '[[ $(pq '"'"'sum(grantd_peer_messages_dropped_total{site="paloalto"}) > 0'"'"') != "" ]]'
	t_check "and nothing dropped at the two others" \
		pq_is 'sum(grantd_peer_messages_dropped_total{site!="paloalto"})' 0
else
	t_fail "python3-zmq is needed to drop a peer message"
fi
prom_stop
t_check "prometheus stopped" eval '[[ ! -s $P_DIR/pid ]]'
t_done
