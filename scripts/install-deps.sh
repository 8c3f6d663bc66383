#!/usr/bin/env bash
# Installs the servers that the tests and the demo start as local processes
# (postgres, redis-server, nginx) when they are missing. Debian/Ubuntu only;
# elsewhere it prints what to install.
set -euo pipefail

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
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing: ${missing[*]} — install PostgreSQL >= 15, Redis >= 7 and nginx with your package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
