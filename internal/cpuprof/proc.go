package cpuprof

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// TicksPerSecond is Linux's USER_HZ, the unit of the CPU times in
// /proc/PID/stat: 100 on every architecture Go runs Linux on (the kernel
// converts to it for user space whatever its own HZ; procfs libraries
// hard-code it too).
const TicksPerSecond = 100

// Stat is what a measurement reads of one process from /proc/PID/stat
// (proc(5)): who it is, its parent, and its CPU in clock ticks.
type Stat struct {
	Pid  int
	Comm string // the executable's name, at most 15 bytes; may hold spaces and parentheses
	// State is R, S, D, Z (a zombie: exited, not yet waited for; its
	// times are still its own), …
	State byte
	PPid  int
	// Utime and Stime are the ticks the process (all its threads) ran in
	// user and kernel mode (fields 14 and 15).
	Utime, Stime uint64
	// CUtime and CStime are those of its children that exited and that it
	// waited for, theirs included (fields 16 and 17).
	CUtime, CStime uint64
}

// Own is the process's own CPU, in ticks.
func (s Stat) Own() uint64 { return s.Utime + s.Stime }

// Reaped is the CPU of the children it has waited for, in ticks.
func (s Stat) Reaped() uint64 { return s.CUtime + s.CStime }

// errStat is wrapped by every ParseStat error.
var errStat = errors.New("malformed /proc/PID/stat")

// ParseStat parses the one line of /proc/PID/stat. The name (field 2)
// sits in parentheses and may itself hold spaces and parentheses (a
// process may name itself "a) b (c"), so it runs from the first "(" to
// the last ")".
func ParseStat(b []byte) (Stat, error) {
	var s Stat
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return s, fmt.Errorf("%w: no (name) in %.80q", errStat, b)
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid < 1 {
		return s, fmt.Errorf("%w: pid %.20q", errStat, b[:open])
	}
	s.Pid, s.Comm = pid, string(b[open+1:end])
	// Fields 3 on: state, ppid, pgrp, session, tty_nr, tpgid, flags,
	// minflt, cminflt, majflt, cmajflt, utime, stime, cutime, cstime, …
	rest := bytes.Fields(b[end+1:])
	if len(rest) < 15 || len(rest[0]) != 1 {
		return s, fmt.Errorf("%w: %d fields after the name of %d, want at least 15", errStat, len(rest), pid)
	}
	s.State = rest[0][0]
	if s.PPid, err = strconv.Atoi(string(rest[1])); err != nil || s.PPid < 0 {
		return s, fmt.Errorf("%w: ppid %q of %d", errStat, rest[1], pid)
	}
	times := []*uint64{&s.Utime, &s.Stime, &s.CUtime, &s.CStime}
	for i, p := range times {
		// cutime and cstime are signed in the kernel (long); never
		// negative, but a negative one must not wrap into a huge count.
		v, err := strconv.ParseUint(string(rest[11+i]), 10, 64)
		if err != nil {
			return s, fmt.Errorf("%w: field %d (%q) of %d is not a tick count", errStat, 14+i, rest[11+i], pid)
		}
		*p = v
	}
	return s, nil
}

// Table is every process of a /proc at one moment, by pid.
type Table map[int]Stat

// ReadTable reads /proc/PID/stat of every process under root ("/proc").
// A process that exits between the listing and the read is left out: its
// CPU shows in its parent's cutime once it has been waited for.
func ReadTable(root string) (Table, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	t := make(Table, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		s, err := ParseStat(b)
		if err != nil {
			return nil, fmt.Errorf("read process %d: %w", pid, err)
		}
		t[pid] = s
	}
	return t, nil
}

// ReadSelf is this process's own Stat (/proc/self/stat under root).
func ReadSelf(root string) (Stat, error) {
	b, err := os.ReadFile(filepath.Join(root, "self", "stat"))
	if err != nil {
		return Stat{}, fmt.Errorf("read this process's CPU: %w", err)
	}
	return ParseStat(b)
}

// children is each pid's children in t.
func (t Table) children() map[int][]int {
	out := map[int][]int{}
	for pid, s := range t {
		out[s.PPid] = append(out[s.PPid], pid)
	}
	return out
}

// TreeTicks is the CPU of pid and every process descending from it, in
// ticks: each one's own, plus that of the children each has waited for
// (so a backend that exited still counts, in its parent's). ok is false
// when pid is not in t.
func (t Table) TreeTicks(pid int) (ticks uint64, ok bool) {
	return t.treeTicks(pid, t.children())
}

func (t Table) treeTicks(pid int, kids map[int][]int) (uint64, bool) {
	if _, ok := t[pid]; !ok {
		return 0, false
	}
	var sum uint64
	seen := map[int]bool{}
	stack := []int{pid}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] { // a table read over time cannot loop, but a fake one could
			continue
		}
		seen[p] = true
		s := t[p]
		sum += s.Own() + s.Reaped()
		stack = append(stack, kids[p]...)
	}
	return sum, true
}
