#!/usr/bin/env bash
# Times building and tearing down a star of N hosts on one switch, Mininet
# (a Linux bridge) against bullylab's testbed (a routed switch), side by
# side on this machine in one run, and prints the medians. Needs root.
#
#   scripts/vs-mininet.sh              # N = 100 250 500 1000, 3 rounds
#   ROUNDS=5 scripts/vs-mininet.sh 100 250
#
# What runs, per N and round, the three runs interleaved (their order
# rotates each round: mn bl sh, bl sh mn, sh mn bl), with a pause of
# SETTLE seconds (default 1 + N/250) before each run: the kernel frees
# a torn-down testbed's namespaces after the tool has exited, holding
# locks a build needs, and one tool's freeing must not slow the other's
# build.
#
#   mn        `mn --switch lxbr --controller none --topo single,N --test
#             none` (Debian's mininet 2.3 package; a Linux bridge, no
#             OpenFlow controller, no Open vSwitch): N hosts, each a shell
#             in its own network namespace with a veth to the bridge s1,
#             started, no test run, stopped.
#   bl        BenchmarkBuild/N (netem/testbed_bench_test.go), one
#             iteration, from a test binary compiled once: N node
#             namespaces and a switch namespace that routes between them
#             (a veth per node; a route and a permanent neighbour entry per
#             node on the switch, one of each on every node), built and
#             torn down; no processes.
#   sh        BenchmarkBuildShells/N: bl, and in each namespace a bash
#             started as Mininet starts its hosts' shells (`bash --norc
#             --noediting -is`, read up to its first prompt, one host
#             after another); teardown ends each shell and waits for it.
#             This is the like-for-like row.
#
# The numbers, in seconds:
#
#   process   whole-process wall time, from exec to exit, as a user waits
#             for it. Mininet's includes the Python interpreter's start and
#             Mininet's imports. bl's and sh's include the test binary's
#             start and its probe (one namespace created and removed), but
#             not the benchmark's own settle pause (a 1 s sleep before its
#             build, subtracted here).
#   inside    the tool's own clock around build and teardown: Mininet's
#             "completed in" line (topology, start, stop), the
#             benchmarks' ms/build + ms/teardown.
#
# None includes the kernel's asynchronous freeing of the namespaces
# after teardown. Each cell is the median over ROUNDS and, in brackets,
# the lowest and highest run; the ratios are of medians.
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

# run_bench N BENCHMARK FILE: appends "process inside" to $work/FILE.N,
# from one iteration of BENCHMARK/N.
run_bench() {
	local n=$1 bench=$2 file=$3 log="$work/bench.log" start end
	start=$(now)
	if ! (cd netem && "$work/netem.test" -test.run '^$' -test.bench "^$bench\$/^$n\$" -test.benchtime 1x) >"$log" 2>&1; then
		cat "$log" >&2
		echo "scripts/vs-mininet.sh: $bench/$n failed (log above)" >&2
		exit 1
	fi
	end=$(now)
	local inside
	inside=$(awk -v name="$bench/$n" '$1 ~ "^" name "(-[0-9]+)?$" {
		for (i = 2; i < NF; i++) { if ($(i+1) == "ms/build") b = $i; if ($(i+1) == "ms/teardown") t = $i }
		if (b != "" && t != "") printf "%.3f", (b + t) / 1000 }' "$log")
	if [ -z "$inside" ]; then
		cat "$log" >&2
		echo "scripts/vs-mininet.sh: netem/testbed_bench_test.go: $bench has no size $n, or it reported no ms/build and ms/teardown" >&2
		exit 1
	fi
	echo "$(calc "$end - $start - $BENCH_SETTLE") $inside" >>"$work/$file.$n"
}

# run_bl N: namespaces and links alone.
run_bl() { run_bench "$1" BenchmarkBuild bl; }
# run_sh N: the same and a bash per namespace, like for like with Mininet.
run_sh() { run_bench "$1" BenchmarkBuildShells sh; }

median() { sort -n | awk '{v[NR] = $1} END {if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for n in "${sizes[@]}"; do
	settle=${SETTLE:-$((1 + n / 250))}
	for r in $(seq "$ROUNDS"); do
		# Other work on the machine slows both tools (every link change
		# takes the kernel's RTNL lock): the load says how much.
		step "N=$n round $r/$ROUNDS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
		case $((r % 3)) in
		1) order="mn bl sh" ;;
		2) order="bl sh mn" ;;
		0) order="sh mn bl" ;;
		esac
		for tool in $order; do
			sleep "$settle"
			"run_$tool" "$n"
			echo "$tool: process $(tail -1 "$work/$tool.$n" | awk '{print $1 " s, inside " $2 " s"}')"
		done
	done
done

# spread FILE COLUMN: "min-max" of a column.
spread() { sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "%.2f-%.2f", lo, hi}'; }
col() { awk -v c="$2" '{print $c}' "$work/$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }

step "seconds over $ROUNDS rounds, median (min-max); $(nproc) cores, kernel $(uname -r), mininet $(dpkg-query -W -f '${Version}' mininet), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "process: whole-process wall time; inside: each tool's own clock around build and teardown."
echo "bl: namespaces and links only; bl+sh: and a bash per namespace read to its prompt, as Mininet's hosts (like for like)."
printf '%5s  %-8s %-20s %-20s %-20s %7s %7s\n' N "" "mininet" "bl" "bl+sh" "mn/bl" "mn/bl+sh"
for n in "${sizes[@]}"; do
	for c in 1 2; do
		what=process
		[ "$c" -eq 2 ] && what=inside
		m=$(col "mn.$n" "$c" | median)
		b=$(col "bl.$n" "$c" | median)
		h=$(col "sh.$n" "$c" | median)
		printf '%5s  %-8s %-20s %-20s %-20s %7s %7s\n' "$n" "$what" \
			"$m ($(col "mn.$n" "$c" | spread))" "$b ($(col "bl.$n" "$c" | spread))" "$h ($(col "sh.$n" "$c" | spread))" \
			"$(ratio "$m" "$b")" "$(ratio "$m" "$h")"
	done
done
