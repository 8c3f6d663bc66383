#!/usr/bin/env bash
# Installs the servers that the tests and the demo start as local processes
# (postgres, redis-server, nginx, etcd and ZooKeeper; prometheus for the
# dashboards test and chromium for the live page's browser test) when they
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
# The backends of the etcd and zookeeper strategies, installed without
# recommends like the lean ones below.
lean=()
have etcd || lean+=(etcd-server)
[ -f /usr/share/java/zookeeper.jar ] || lean+=(zookeeper)
# The demo needs only the ones above; the tests also need these (skip them
# with --demo).
if ! $demo; then
  have prometheus || lean+=(prometheus)
  have chromium || lean+=(chromium)
fi
[ ${#missing[@]} -eq 0 ] && [ ${#lean[@]} -eq 0 ] && exit 0
if $check; then
  echo "${missing[*]} ${lean[*]}"
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${missing[*]} ${lean[*]} — install PostgreSQL >= 15, Redis >= 7, nginx, etcd, ZooKeeper, Prometheus and Chromium with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} ${lean[*]} with apt-get" >&2
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Without recommends: prometheus would pull in its node exporter, chromium
# its drivers and fonts, zookeeper a full desktop Java, which nothing here needs.
if [ ${#lean[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${lean[@]}" >/dev/null
fi
