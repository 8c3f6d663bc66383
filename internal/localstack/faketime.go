package localstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// libfaketime and the allocator it needs beside it, in Debian's
// multiarch directories. A plain LD_PRELOAD of libfaketime hangs Debian's
// redis-server (jemalloc calls clock_gettime while libfaketime
// initialises: wolfcw/libfaketime#130); glibc's malloc_debug library,
// preloaded first, takes malloc from jemalloc and breaks the recursion.
const (
	libFaketimeGlob    = "/usr/lib/*/faketime/libfaketime.so.1"
	libMallocDebugGlob = "/lib/*/libc_malloc_debug.so.0"
)

// fakeClockLibs returns the libraries to preload for a fake clock,
// installing Debian's faketime and libfaketime when they are missing (as
// Ensure does for binaries).
func fakeClockLibs(ctx context.Context) (string, error) {
	if _, err := findLib(libFaketimeGlob); err != nil {
		if _, err := Ensure(ctx, "faketime"); err != nil {
			return "", err
		}
	}
	var libs []string
	for _, glob := range []string{libMallocDebugGlob, libFaketimeGlob} {
		lib, err := findLib(glob)
		if err != nil {
			return "", err
		}
		libs = append(libs, lib)
	}
	return strings.Join(libs, " "), nil
}

func findLib(glob string) (string, error) {
	m, _ := filepath.Glob(glob)
	if len(m) == 0 {
		return "", fmt.Errorf("fake clock: no %s: %w (Debian packages faketime, libfaketime and libc6)", glob, errNotFound)
	}
	return m[0], nil
}

// fakeClockEnv is the environment that runs a server under libfaketime
// (preload: fakeClockLibs), its offset read from file at every call:
// FAKETIME_NO_CACHE, so a change takes effect at once. Only the wall
// clock moves: Redis expires keys by it, while its timers run on the
// monotonic clock, which stays true.
func fakeClockEnv(preload, file string) []string {
	return []string{
		"LD_PRELOAD=" + preload,
		"FAKETIME_TIMESTAMP_FILE=" + file,
		"FAKETIME_NO_CACHE=1",
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// writeClock sets file's offset to d (libfaketime's "+60.5" form, in
// seconds), replacing the file in one rename so the server never reads a
// half-written offset.
func writeClock(file string, d time.Duration) error {
	tmp := file + ".tmp"
	s := "+" + strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	if d < 0 {
		s = strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	}
	if err := os.WriteFile(tmp, []byte(s+"\n"), 0o644); err != nil {
		return fmt.Errorf("fake clock: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("fake clock: %w", err)
	}
	return nil
}

// errNoFakeClock: SetClock on a server not started with FakeClock.
var errNoFakeClock = errors.New("redis-server was not started with RedisOptions.FakeClock")

// SetClock moves the server's wall clock to the real time plus offset (0:
// the true time again), effective at its next clock read. It fails on a
// server not started with RedisOptions.FakeClock.
func (r *Redis) SetClock(offset time.Duration) error {
	if r.clockFile == "" {
		return fmt.Errorf("redis %s: set clock: %w", r.Addr, errNoFakeClock)
	}
	return writeClock(r.clockFile, offset)
}

// FakeClock reports whether the server runs under libfaketime (SetClock works).
func (r *Redis) FakeClock() bool { return r.clockFile != "" }
