#!/usr/bin/env bash
# make demo: installs the missing servers (apt) while it downloads the Go
# modules and builds bin/inventory and bin/loadtest, the two at once since
# neither needs the other; then runs the load tester on a local fleet.
# Arguments go to the load tester after the demo's defaults, so they win:
#   scripts/demo.sh --stock 1000 --buyers 1500
# A progress line per phase gives the time since the start; a failed phase
# prints its log and the script exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
# The demo's size: ~30 s of rows on a 2-core machine, none and local still
# oversell; then a flash sale with orders on redis, the fleet default: half
# the buyers hold a unit for 2 s, some abandon their cart or cancel, and
# the crowd, still coming, buys the units that come back (docs/demo.md).
DEMO_DEFAULTS=(--stock 250 --buyers 400 --concurrency 64 --orders-after redis --hold 0.5)
# The standard library packages the build needs most of; compiled while the
# modules download (the network is the limit then, not the CPU).
STD_ROOTS=(net/http html/template log/slog encoding/json database/sql os/exec)

start=$(date +%s)
exec 3>&2 # progress lines reach the terminal even from a phase whose output goes to its log
say() {
  local t=$(($(date +%s) - start))
  printf '[demo %d:%02d] %s\n' $((t / 60)) $((t % 60)) "$*" >&3
}

logs=$(mktemp -d "${TMPDIR:-/tmp}/inventory-demo.XXXXXX")
pkg="" bld=""
stop() { # stop PID: the phase's whole process group
  [ -n "$1" ] && kill -- "-$1" 2>/dev/null || true
}
trap 'stop "$pkg"; stop "$bld"; say "interrupted"; exit 130' INT TERM

# fail NAME LOG: the failed phase's log, then a clear line.
fail() {
  echo "----- $1 log ($2) -----" >&2
  cat "$2" >&2
  echo "----- end of $1 log -----" >&2
  say "FAILED: $1 (log above, kept in $2)"
}

build() {
  local std n
  "$GO" build "${STD_ROOTS[@]}" &
  std=$!
  # Downloads the modules, and counts the packages not in Go's build cache
  # (0.4 s more): a first build is minutes of silence otherwise. The two
  # commands are stale whenever they are not installed, built or not.
  n=$("$GO" list -deps -f '{{if and .Stale (ne .Name "main")}}x{{end}}' ./cmd/inventory ./loadtest |
    awk 'NF { n++ } END { print n + 0 }')
  if [ "$n" -gt 300 ]; then
    say "Go modules downloaded; compiling $n packages (a first build: 1.5-2 minutes on 2 cores, less on more)"
  elif [ "$n" -gt 0 ]; then
    say "Go modules downloaded; compiling $n packages"
  else
    say "Go modules downloaded; every package already compiled"
  fi
  wait "$std"
  "$GO" build -o bin/ ./cmd/inventory ./loadtest
}

missing=$(./scripts/install-deps.sh --demo --check) || true
if [ -n "$missing" ] && [ "$(id -u)" -ne 0 ]; then
  say "installing $missing needs sudo"
  sudo -v # ask now: the install runs in the background
fi
# Job control on while the phases start: each gets its own process group,
# so an interrupt can stop all of it (go's compilers, apt's children).
set -m
if [ -n "$missing" ]; then
  say "installing $missing (log: $logs/packages.log) while building (log: $logs/build.log)"
  ./scripts/install-deps.sh --demo >"$logs/packages.log" 2>&1 &
  pkg=$!
else
  say "packages: all installed; building (log: $logs/build.log)"
fi
build >"$logs/build.log" 2>&1 &
bld=$!
set +m

failed=0 build_stopped=0
pending=("$bld")
[ -n "$pkg" ] && pending+=("$pkg")
while [ ${#pending[@]} -gt 0 ]; do
  done_pid="" rc=0
  wait -n -p done_pid "${pending[@]}" || rc=$?
  still=()
  for p in "${pending[@]}"; do [ "$p" != "$done_pid" ] && still+=("$p"); done
  pending=("${still[@]+"${still[@]}"}")
  if [ "$done_pid" = "$bld" ]; then
    if [ "$rc" -eq 0 ]; then
      say "built bin/inventory and bin/loadtest"
    elif [ "$build_stopped" -eq 1 ]; then
      say "build stopped"
    else
      fail build "$logs/build.log"
      failed=1
      # An interrupted dpkg leaves the system half-configured: let apt end.
      if [ ${#pending[@]} -gt 0 ]; then say "waiting for the package install to end"; fi
    fi
  elif [ "$done_pid" = "$pkg" ]; then
    if [ "$rc" -eq 0 ]; then
      say "packages ready"
    else
      fail "package install" "$logs/packages.log"
      failed=1
      if [ ${#pending[@]} -gt 0 ]; then
        build_stopped=1
        stop "$bld" # no point finishing the build
      fi
    fi
  else
    break # nothing left to wait for
  fi
done
trap - INT TERM
if [ "$failed" -ne 0 ]; then
  exit 1
fi
rm -rf "$logs"

# What the demo writes goes under out/ (ignored by git): the report, and
# beside it any history the checker found not linearizable.
mkdir -p out
say "running the demo: bin/loadtest --binary bin/inventory --html out/demo-report.html ${DEMO_DEFAULTS[*]} $*"
rc=0
bin/loadtest --binary bin/inventory --html out/demo-report.html "${DEMO_DEFAULTS[@]}" "$@" || rc=$?
if [ "$rc" -ne 0 ]; then
  say "FAILED: the load tester exited with $rc (its output is above)"
  exit "$rc"
fi
say "done"
