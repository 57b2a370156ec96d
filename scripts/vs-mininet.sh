#!/usr/bin/env bash
# Times building and tearing down a star of N hosts on one switch, Mininet
# (a Linux bridge) against bullylab's testbed (a routed switch), side by
# side on this machine in one run, and prints the medians. Needs root.
#
#   scripts/vs-mininet.sh              # N = 100 250 500 1000, 3 rounds
#   ROUNDS=5 scripts/vs-mininet.sh 100 250
#
# What runs, per N and round, the two tools alternating (A/B interleaved,
# Mininet first in odd rounds, bullylab first in even ones), with a pause
# of SETTLE seconds (default 1 + N/250) before each run: the kernel frees
# a torn-down testbed's namespaces after the tool has exited, holding
# locks a build needs, and one tool's freeing must not slow the other's
# build.
#
#   Mininet   `mn --switch lxbr --controller none --topo single,N --test
#             none` (Debian's mininet 2.3 package; a Linux bridge, no
#             OpenFlow controller, no Open vSwitch): N hosts, each a shell
#             in its own network namespace with a veth to the bridge s1,
#             started, no test run, stopped.
#   bullylab  BenchmarkBuild/N (netem/testbed_bench_test.go), one
#             iteration, from a test binary compiled once: N node
#             namespaces and a switch namespace that routes between them
#             (a veth per node; a route and a permanent neighbour entry per
#             node on the switch, one of each on every node), built and
#             torn down; no node processes.
#
# The numbers, in seconds:
#
#   process   whole-process wall time, from exec to exit, as a user waits
#             for it. Mininet's includes the Python interpreter's start and
#             Mininet's imports. bullylab's includes the test binary's
#             start and its probe (one namespace created and removed), but
#             not the benchmark's own settle pause (a 1 s sleep before its
#             build, subtracted here).
#   inside    the tool's own clock around build and teardown: Mininet's
#             "completed in" line (topology, start, stop), bullylab's
#             ms/build + ms/teardown.
#
# Neither includes the kernel's asynchronous freeing of the namespaces
# after teardown. Medians are over ROUNDS; the runs column lists every
# process time (Mininet / bullylab).
#
# Mininet is run so that it never cleans up on its own: on an error or ^C
# `mn` calls its cleanup (what `mn -c` does), which kills processes by
# name, deletes every link named like foo-eth0 and files in /tmp it did not
# create. A wrapper replaces that cleanup with a failure, and after each
# run this script checks `ip link`, `ip netns` and the processes for what
# the run left, removing only objects the run created, by name or PID, and
# saying so. It refuses to start when links Mininet would use (s1,
# h1-eth0, s1-eth1, ...) already exist, since Mininet deletes those before
# creating its own.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
# BenchmarkBuild's `const settle = time.Second`, slept before its build.
BENCH_SETTLE=1
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 250 500 1000)

for n in "${sizes[@]}"; do
	if ! [[ $n =~ ^[1-9][0-9]*$ ]] || [ "$n" -gt 1000 ]; then
		echo "scripts/vs-mininet.sh: size $n: want a whole number of hosts from 1 to 1000 (a Linux bridge takes at most 1023 ports)" >&2
		exit 1
	fi
done
if ! [[ $ROUNDS =~ ^[1-9][0-9]*$ ]]; then
	echo "scripts/vs-mininet.sh: ROUNDS=$ROUNDS: want a whole number of rounds, 1 or more" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "scripts/vs-mininet.sh: both tools create network namespaces and a bridge; run it as root (sudo scripts/vs-mininet.sh)" >&2
	exit 1
fi
if ! grep -q 'const settle = time.Second' netem/testbed_bench_test.go; then
	echo "scripts/vs-mininet.sh: netem/testbed_bench_test.go: BenchmarkBuild's settle pause is no longer 1 s; update BENCH_SETTLE" >&2
	exit 1
fi

step() { printf '\n==> %s\n' "$*"; }

if ! command -v go >/dev/null 2>&1; then
	if [ -x /usr/local/go/bin/go ]; then
		export PATH="/usr/local/go/bin:$PATH"
	else
		echo "scripts/vs-mininet.sh: Go $(sed -n 's/^go //p' go.mod) or newer is required (https://go.dev/dl/); 'go' is not on PATH" >&2
		exit 1
	fi
fi

# Debian's mininet depends on neither Open vSwitch (only recommended; lxbr
# with no controller never calls it) nor bridge-utils, whose brctl its
# LinuxBridge runs to build the switch.
packages=()
command -v mn >/dev/null 2>&1 || packages+=(mininet)
command -v brctl >/dev/null 2>&1 || packages+=(bridge-utils)
if [ ${#packages[@]} -gt 0 ]; then
	step "apt-get install ${packages[*]}"
	apt-get update -qq || echo "scripts/vs-mininet.sh: apt-get update failed; installing from the package lists at hand" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

work=$(mktemp -d)
# A run of mn that failed or was interrupted has its leftovers removed on
# the way out (mn_leftovers, below).
mn_running=
mn_netns_before=
trap 'if [ -n "$mn_running" ]; then echo "removing what the interrupted or failed mn run left" >&2; mn_leftovers; fi; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# mn with its cleanup replaced: /usr/bin/mn imports cleanup from
# mininet.clean when it starts, so patching the module first is enough.
cat >"$work/mn.py" <<'EOF'
import runpy, sys
import mininet.clean

def refuse(*args, **kwargs):
    sys.stderr.write("vs-mininet: mn failed and wanted to clean up; not cleaning (it would remove objects Mininet did not create)\n")
    sys.exit(3)

mininet.clean.cleanup = refuse
mininet.clean.Cleanup.cleanup = classmethod(refuse)
sys.argv[0] = sys.argv.pop(1)
runpy.run_path(sys.argv[0], run_name="__main__")
EOF
# mn's own interpreter: the python3 first on PATH may lack the mininet
# module (Debian installs it for /usr/bin/python3).
mn_path=$(command -v mn)
mn_python=$(sed -n '1s/^#! *//p' "$mn_path")

# Interface names in the root namespace that Mininet's single,N creates
# (s1, s1-eth1.., and h1-eth0.. before they move into the hosts) and so
# deletes first if they exist.
mn_links() { ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -E '^(s1|s1-eth[0-9]+|h[0-9]+-eth[0-9]+)$' || true; }
# Mininet's host and switch shells: bash ... mininet:h1, mininet:s1.
mn_pids() { pgrep -f 'mininet:[hs][0-9]+' || true; }

if [ -n "$(mn_links)" ] || [ -n "$(mn_pids)" ]; then
	echo "scripts/vs-mininet.sh: links or shells named as Mininet's already exist (another Mininet, or one left over); Mininet would delete them, so not starting:" >&2
	mn_links | head -5 >&2
	mn_pids | head -5 >&2
	exit 1
fi

step "go test -c ./netem"
go test -c -o "$work/netem.test" ./netem

now() { date +%s.%N; }
# calc EXPR: awk arithmetic, to 3 decimals.
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }

# run_mn N: appends "process inside" to $work/mn.N.
run_mn() {
	local n=$1 log="$work/mn.log" start end
	mn_netns_before=$(ip netns list | awk '{print $1}' | sort)
	mn_running=1
	start=$(now)
	if ! "$mn_python" "$work/mn.py" "$mn_path" --switch lxbr --controller none --topo "single,$n" --test none >"$log" 2>&1; then
		tail -20 "$log" >&2
		echo "scripts/vs-mininet.sh: mn --topo single,$n failed (log above)" >&2
		exit 1
	fi
	end=$(now)
	local inside
	inside=$(sed -n 's/^completed in \([0-9.]*\) seconds$/\1/p' "$log")
	if [ -z "$inside" ]; then
		echo "scripts/vs-mininet.sh: mn --topo single,$n printed no 'completed in' line" >&2
		exit 1
	fi
	mn_running=
	mn_leftovers
	echo "$(calc "$end - $start") $inside" >>"$work/mn.$n"
}

# mn_leftovers: removes the links and shells a run left, by
# name and PID (nothing of Mininet's existed before it: checked at the
# start), and reports named namespaces that appeared during the run and
# belong to no bullylab run (Mininet's hosts use unnamed ones, which go
# with their shells).
mn_leftovers() {
	local links pids ns run
	pids=$(mn_pids)
	if [ -n "$pids" ]; then
		echo "mininet left shells running: PIDs $(echo $pids); killing them" >&2
		kill -9 $pids 2>/dev/null || true
	fi
	links=$(mn_links)
	if [ -n "$links" ]; then
		echo "mininet left links: $(echo $links | head -c 200); deleting them" >&2
		for l in $links; do ip link del "$l" 2>/dev/null || true; done
	fi
	for ns in $(comm -13 <(echo "$mn_netns_before") <(ip netns list | awk '{print $1}' | sort)); do
		run=${ns%%-*}
		[ -d "/run/bullylab/$run" ] && continue
		echo "a namespace $ns appeared during the Mininet run and is no bullylab run's; left alone" >&2
	done
}

# run_bl N: appends "process inside" to $work/bl.N.
run_bl() {
	local n=$1 log="$work/bl.log" start end
	start=$(now)
	if ! (cd netem && "$work/netem.test" -test.run '^$' -test.bench "^BenchmarkBuild\$/^$n\$" -test.benchtime 1x) >"$log" 2>&1; then
		cat "$log" >&2
		echo "scripts/vs-mininet.sh: BenchmarkBuild/$n failed (log above)" >&2
		exit 1
	fi
	end=$(now)
	local inside
	inside=$(awk -v n="$n" '$1 ~ "^BenchmarkBuild/" n "(-[0-9]+)?$" {
		for (i = 2; i < NF; i++) { if ($(i+1) == "ms/build") b = $i; if ($(i+1) == "ms/teardown") t = $i }
		if (b != "" && t != "") printf "%.3f", (b + t) / 1000 }' "$log")
	if [ -z "$inside" ]; then
		cat "$log" >&2
		echo "scripts/vs-mininet.sh: netem/testbed_bench_test.go: BenchmarkBuild has no size $n, or it reported no ms/build and ms/teardown" >&2
		exit 1
	fi
	echo "$(calc "$end - $start - $BENCH_SETTLE") $inside" >>"$work/bl.$n"
}

median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for n in "${sizes[@]}"; do
	settle=${SETTLE:-$((1 + n / 250))}
	for r in $(seq "$ROUNDS"); do
		# Other work on the machine slows both tools (every link change
		# takes the kernel's RTNL lock): the load says how much.
		step "N=$n round $r/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		if [ $((r % 2)) -eq 1 ]; then order="mn bl"; else order="bl mn"; fi
		for tool in $order; do
			sleep "$settle"
			"run_$tool" "$n"
			echo "$tool: process $(tail -1 "$work/$tool.$n" | awk '{print $1 " s, inside " $2 " s"}')"
		done
	done
done

step "medians (seconds) over $ROUNDS rounds; $(nproc) cores, kernel $(uname -r), mininet $(dpkg-query -W -f '${Version}' mininet), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s  %12s %12s %7s  %12s %12s %7s  %s\n' N "mn process" "bl process" ratio "mn inside" "bl inside" ratio "runs (process: mininet / bullylab)"
for n in "${sizes[@]}"; do
	mp=$(awk '{print $1}' "$work/mn.$n" | median)
	bp=$(awk '{print $1}' "$work/bl.$n" | median)
	mi=$(awk '{print $2}' "$work/mn.$n" | median)
	bi=$(awk '{print $2}' "$work/bl.$n" | median)
	runs="$(awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1}' "$work/mn.$n") / $(awk '{printf "%s%.2f", (NR > 1 ? " " : ""), $1}' "$work/bl.$n")"
	printf '%6s  %12s %12s %7s  %12s %12s %7s  %s\n' "$n" "$mp" "$bp" "$(awk -v a="$mp" -v b="$bp" 'BEGIN { printf "%.1f", a / b }')" "$mi" "$bi" "$(awk -v a="$mi" -v b="$bi" 'BEGIN { printf "%.1f", a / b }')" "$runs"
done
