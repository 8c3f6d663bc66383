package localstack

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestWaitStoppedSeesTheStop: a SIGSTOPped process is seen stopped, a
// running one is not (WaitStopped gives up), and a process continued
// runs again.
func TestWaitStoppedSeesTheStop(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if err := WaitStopped(pid, 20*time.Millisecond); err == nil {
		t.Errorf("WaitStopped(a running process) = nil, want an error")
	}
	if err := stopSignal(cmd.Process, syscall.SIGSTOP); err != nil {
		t.Fatalf("stopSignal(SIGSTOP) = %v, want the process stopped", err)
	}
	if stopped, err := allStopped(pid); !stopped || err != nil {
		t.Errorf("allStopped after SIGSTOP = %v, %v; want true", stopped, err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := WaitStopped(pid, 20*time.Millisecond); err == nil {
		t.Errorf("WaitStopped(a continued process) = nil, want an error")
	}
	if err := WaitStopped(1<<22+12345, time.Second); err == nil {
		t.Errorf("WaitStopped(no such process) = nil, want an error")
	}
}
