#!/usr/bin/env bash
# Installs the servers that the tests and the demo start as local processes
# (postgres, redis-server, nginx, etcd and ZooKeeper; prometheus for the
# dashboards test, chromium for the live page's browser test, libfaketime
# for the clock-jump fault, patroni for the pg-failover fault) when they
# are missing. Debian/Ubuntu only;
# elsewhere it prints what to install.
#
# --demo: only what make demo needs. --check: install nothing; print the
# missing packages and exit 1 if any are missing (scripts/demo.sh asks
# first, so that sudo can prompt before the install runs in the background).
set -euo pipefail

demo=false check=false
for arg in "$@"; do
  case $arg in
    --demo) demo=true ;;
    --check) check=true ;;
    *) echo "usage: $0 [--demo] [--check]" >&2; exit 2 ;;
  esac
done

have() {
  command -v "$1" >/dev/null 2>&1 && return 0
  for dir in /usr/sbin /usr/lib/postgresql/*/bin; do
    [ -x "$dir/$1" ] && return 0
  done
  return 1
}

missing=()
have postgres || missing+=(postgresql)
have redis-server || missing+=(redis-server)
have nginx || missing+=(nginx)
# The backends of the etcd and zookeeper strategies. ZooKeeper's server is
# its jar (with its libraries in its manifest) on a headless Java: Debian's
# zookeeper package adds only scripts and, by depending on default-jre, a
# desktop Java (mesa, llvm, gtk; 215 packages instead of 124).
have etcd || missing+=(etcd-server)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(libzookeeper-java default-jre-headless)
# The demo needs only the ones above; the tests also need these (skip them
# with --demo).
if ! $demo; then
  have prometheus || missing+=(prometheus)
  have chromium || missing+=(chromium)
  # The clock-jump fault runs Redis under libfaketime.
  compgen -G '/usr/lib/*/faketime/libfaketime.so.1' >/dev/null || missing+=(faketime libfaketime)
  # The pg-failover fault runs Postgres as a primary and a standby under
  # Patroni (make fleet's --postgres-ha installs it on first use).
  have patroni || missing+=(patroni)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if $check; then
  echo "${missing[*]}"
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${missing[*]} — install PostgreSQL >= 15, Redis >= 7, nginx, etcd, ZooKeeper, Prometheus, Chromium and libfaketime with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get" >&2
$sudo apt-get update -qq
# One install, without recommends (prometheus would pull in its node
# exporter, chromium its drivers and fonts, postgresql sysstat, none of
# which anything here needs), and without an fsync per unpacked file.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
  -o Dpkg::Options::=--force-unsafe-io "${missing[@]}" >/dev/null
