#!/usr/bin/env bash
# install-peers.sh — install the comparison peers that rdmakit's benchmarks
# run side by side (bench/peers), from Debian bookworm's own packages.
#
# Usage: scripts/install-peers.sh [all|sockperf|ucx|memcached|redis|etcd|postgres]...
#   default: all. Idempotent: packages already installed are skipped and
#   `apt-get update` runs at most once, only when something is missing.
#   Must run as root. Services (memcached, redis-server, etcd, postgresql)
#   are installed but not started: the benchmarks start their own instances
#   on 127.0.0.1 (PostgreSQL: initdb into a temporary directory, a unix
#   socket only, run as the user "postgres" the package makes).
#
# Peers and their Debian packages:
#   sockperf   sockperf    (/usr/bin/sockperf)
#   ucx        ucx-utils   (/usr/bin/ucx_perftest, ucx_info; pulls libucx0)
#   memcached  memcached   (/usr/bin/memcached)
#   redis      redis-server, redis-tools (/usr/bin/redis-server, redis-benchmark)
#   etcd       etcd-server, etcd-client (/usr/bin/etcd, etcdctl)
#   postgres   postgresql-15 (/usr/lib/postgresql/15/bin/initdb, postgres)
set -euo pipefail

die() { echo "install-peers: $*" >&2; exit 1; }

# usage prints the header above: to stdout and exit 0 for --help, to
# stderr and exit 2 for a bad argument.
usage() {
	if [[ ${1:-2} -eq 0 ]]; then
		sed -n 's/^# \{0,1\}//; 2,11p' "$0"
	else
		sed -n 's/^# \{0,1\}//; 2,11p' "$0" >&2
	fi
	exit "${1:-2}"
}

# Map each peer to its packages and the binary that proves it is there.
declare -A pkgs=(
	[sockperf]="sockperf"
	[ucx]="ucx-utils"
	[memcached]="memcached"
	[redis]="redis-server redis-tools"
	[etcd]="etcd-server etcd-client"
	[postgres]="postgresql-15"
)
order=(sockperf ucx memcached redis etcd postgres)

want=()
if [[ $# -eq 0 ]]; then
	want=("${order[@]}")
fi
for arg in "$@"; do
	case "$arg" in
	all) want+=("${order[@]}") ;;
	sockperf | ucx | memcached | redis | etcd | postgres) want+=("$arg") ;;
	-h | --help) usage 0 ;;
	*) echo "install-peers: unknown peer '$arg'" >&2; usage ;;
	esac
done

[[ ${EUID:-$(id -u)} -eq 0 ]] || die "must run as root (try: sudo $0 $*)"
command -v apt-get >/dev/null || die "apt-get not found: this script targets Debian bookworm"

# Packages not yet installed, in order, without duplicates.
missing=()
all=()
declare -A seen=()
for peer in "${want[@]}"; do
	for p in ${pkgs[$peer]}; do
		[[ -n ${seen[$p]:-} ]] && continue
		seen[$p]=1
		all+=("$p")
		if [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]]; then
			missing+=("$p")
		fi
	done
done

if [[ ${#missing[@]} -eq 0 ]]; then
	echo "install-peers: already installed: ${all[*]}"
	exit 0
fi

export DEBIAN_FRONTEND=noninteractive
log=$(mktemp /tmp/install-peers.XXXXXX.log)

# Keep Debian's maintainer scripts from starting memcached, redis-server, etcd or postgresql
# as system services: a policy-rc.d that denies every start, removed on
# exit. An existing policy-rc.d is left alone.
policy=/usr/sbin/policy-rc.d
own_policy=""
cleanup() {
	[[ -n $own_policy ]] && rm -f "$policy"
	return 0
}
trap cleanup EXIT
if [[ ! -e $policy ]]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	own_policy=1
fi

# apt-get update once: up front when the package lists do not know a
# package (a fresh machine has none), else only if installing fails with
# stale lists.
updated=""
update() {
	[[ -n $updated ]] && return 0
	updated=1
	echo "install-peers: apt-get update"
	apt-get update -qq >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "apt-get update failed (log: $log)"; }
}
install() {
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1
}
for p in "${missing[@]}"; do
	if ! apt-cache show "$p" >/dev/null 2>&1; then
		update
		break
	fi
done

echo "install-peers: installing ${missing[*]}"
installed=""
if install; then
	installed=1
elif [[ -z $updated ]]; then
	update
	install && installed=1
fi
if [[ -z $installed ]]; then
	tail -n 30 "$log" >&2
	die "apt-get install ${missing[*]} failed (log: $log)"
fi

# Check that the binaries the benchmarks run are there (PostgreSQL's are
# not on PATH: Debian keeps one directory per major version).
for peer in "${want[@]}"; do
	case "$peer" in
	sockperf) bins=(sockperf) ;;
	ucx) bins=(ucx_perftest ucx_info) ;;
	memcached) bins=(memcached) ;;
	redis) bins=(redis-server redis-benchmark) ;;
	etcd) bins=(etcd etcdctl) ;;
	postgres) bins=(/usr/lib/postgresql/15/bin/initdb /usr/lib/postgresql/15/bin/postgres) ;;
	esac
	for b in "${bins[@]}"; do
		command -v "$b" >/dev/null || die "$peer: $b not found after install (log: $log)"
	done
done
rm -f "$log"
echo "install-peers: ok: ${all[*]}"
