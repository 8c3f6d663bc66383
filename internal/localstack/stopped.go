package localstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// WaitStopped waits until every thread of process pid is stopped (state
// T), as SIGSTOP leaves it: kill(2) returns once the signal is sent, and a
// busy process may still answer a request or two before it stops, which a
// test or fault that pauses it means to rule out. It gives up after limit,
// or when the process is gone.
func WaitStopped(pid int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		stopped, err := allStopped(pid)
		if err != nil {
			return fmt.Errorf("wait for process %d to stop: %w", pid, err)
		}
		if stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d not stopped %v after SIGSTOP", pid, limit)
		}
		time.Sleep(delay)
	}
}

// allStopped reports whether every thread of pid is in state T (stopped)
// or t (traced).
func allStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false, fmt.Errorf("no threads under /proc/%d: %w", pid, os.ErrNotExist)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, nil // a thread ended meanwhile: look again
		}
		// The state follows the command name, which is in parentheses
		// and may itself hold spaces or parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 || i+2 >= len(s) {
			return false, nil
		}
		if st := s[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}

// Pause sends SIGSTOP to process pid and returns once every thread of it
// has stopped (WaitStopped, up to 5 s).
func Pause(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP %d: %w", pid, err)
	}
	return WaitStopped(pid, 5*time.Second)
}

// stopSignal sends sig to p; a SIGSTOP returns once it took hold (Pause).
func stopSignal(p *os.Process, sig os.Signal) error {
	if sig == syscall.SIGSTOP {
		return Pause(p.Pid)
	}
	return p.Signal(sig)
}
