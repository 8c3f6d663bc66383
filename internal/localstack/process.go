package localstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a running server process started by StartProcess: its
// combined output is kept for error reports, it dies with its parent, and it
// sits in its own process group, so a Ctrl-C in a terminal reaches only the
// caller, which then stops its servers in order.
type Process struct {
	name string
	cmd  *exec.Cmd
	out  *LogBuffer
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid once done is closed

	stopOnce sync.Once
	stopSig  syscall.Signal
	stopErr  error
}

// StartProcess starts cmd (its output goes to the Process's log) with a
// parent-death signal. stopSig is what Stop sends to ask it to exit.
func StartProcess(name string, cmd *exec.Cmd, stopSig syscall.Signal) (*Process, error) {
	out := &LogBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// A child the process leaves behind (Patroni's postmaster, detached)
	// keeps the output pipe open: once the process itself has exited, its
	// Wait gives up on the pipe after this, instead of waiting for the
	// child (which Stop's caller kills next).
	cmd.WaitDelay = 5 * time.Second
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, out: out, done: make(chan struct{}), stopSig: stopSig}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the server's process id, e.g. for SIGSTOP in fault tests.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the server process itself (not a wrapper).
//
// A SIGSTOP returns once every thread of the process has stopped
// (WaitStopped), not merely once the signal is sent.
func (p *Process) Signal(sig os.Signal) error { return stopSignal(p.cmd.Process, sig) }

// Logs returns the tail of what the process wrote to stdout and stderr.
func (p *Process) Logs() string { return p.out.String() }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is the process's exit status once it has exited (nil for exit 0).
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Stop continues the process if it was stopped (a SIGSTOPped process cannot
// act on a signal), sends stopSig, and kills it if it has not exited after
// grace; it waits for the exit. Its error says only whether it had to kill.
// Stop is safe to call more than once.
func (p *Process) Stop(grace time.Duration) error {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Signal(p.stopSig)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("%s did not exit within %v of %v; killed", p.name, grace, p.stopSig)
		}
	})
	return p.stopErr
}

// failure describes why a server did not become ready, with its last output.
func (p *Process) failure(err error) error {
	tail := p.out.String()
	if len(tail) > 2000 {
		tail = "…" + tail[len(tail)-2000:]
	}
	if p.Exited() {
		return fmt.Errorf("%s exited (%v): %w\n%s", p.name, p.err, err, tail)
	}
	return fmt.Errorf("%s not ready: %w\n%s", p.name, err, tail)
}

// waitReady polls ready until it succeeds on a listener of addr that is
// this process's own (see listensOn), the process exits, or timeout or ctx
// ends.
func (p *Process) waitReady(ctx context.Context, timeout time.Duration, addr string, ready func(context.Context) error) error {
	check := func(ctx context.Context) error {
		if err := ready(ctx); err != nil {
			return err
		}
		ours, err := listensOn(p.Pid(), addr)
		if err != nil {
			return err
		}
		if !ours {
			return fmt.Errorf("%s answered, but another process listens there: address already in use", addr)
		}
		return nil
	}
	if err := poll(ctx, timeout, p.done, check); err != nil {
		return p.failure(err)
	}
	return nil
}

// relaunch calls launch until it succeeds, up to 50 times 100ms apart, or
// until ctx ends: a restarted server's port may linger for a moment after
// the old process exits.
func relaunch(ctx context.Context, launch func(context.Context) error) error {
	var err error
	for range 50 {
		if err = launch(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return err
}

// poll calls check until it returns nil, for at most timeout, or until
// stop is closed (a nil stop never is); the error then says what check saw
// last.
func poll(ctx context.Context, timeout time.Duration, stop <-chan struct{}, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w within %v: %v", ctx.Err(), timeout, err)
		case <-stop:
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// for a server started next to listen on. It is drawn at random below the
// kernel's ephemeral range (ip_local_port_range), where a port asked for
// with :0 or taken by an outgoing connection comes from: a port from that
// range could be handed to another process before the server bound it (a
// redis-server then failed, "Address already in use", with four test
// binaries at once).
func FreePort() (int, error) {
	low := ephemeralLow()
	for range 100 {
		port := freePortFloor + rand.IntN(low-freePortFloor)
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePort is FreePort, replaced in tests to hand out a taken port.
var freePort = FreePort

// freePorts draws n different ports with freePort, for a server (or
// cluster) that listens on several: FreePort releases each port it probes,
// so two draws in a row can give the same one (both members of a Patroni
// cluster were once given one Postgres port, and one never started).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		if tries == 100*n {
			return nil, fmt.Errorf("find %d different free ports: drew %v", n, ports)
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// portTries is how many times a server is started on fresh ports when the
// port FreePort found was taken before the server could bind it.
const portTries = 5

// OnFreePorts calls start, which draws its ports with FreePort and starts
// a server on them, again while it fails because a port was taken first:
// FreePort only probes, so another process (a concurrent test binary's
// server, or a probe of its own) can bind the port between the probe and
// the server's bind (a redis-server exited "Address already in use" with
// four test binaries and the fault matrix at once). start's error must
// carry the server's own words for that (its log), which PortTaken reads.
func OnFreePorts(start func() error) error {
	var err error
	for range portTries {
		if err = start(); !PortTaken(err) {
			return err
		}
	}
	return err
}

// PortTaken reports whether err is a server's failure to bind its port
// (each server's log, in the error, says so in these words).
func PortTaken(err error) bool {
	return err != nil && saysPortTaken(err.Error())
}

// saysPortTaken reports whether a server's output out says it could not
// bind its port.
func saysPortTaken(out string) bool {
	return strings.Contains(strings.ToLower(out), "address already in use")
}

// portInUse reports whether another socket holds port on 127.0.0.1 now.
func portInUse(port int) bool {
	l, err := net.Listen("tcp", hostPort(port))
	if err != nil {
		return errors.Is(err, syscall.EADDRINUSE)
	}
	_ = l.Close()
	return false
}

// freePortFloor is the lowest port FreePort draws: above the well-known
// and most registered services' ports.
const freePortFloor = 20000

// ephemeralLow is the first port of the kernel's ephemeral range (32768
// when it cannot be read, Linux's default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > freePortFloor+1000 {
				return n
			}
		}
	}
	return 32768
}

// dialable reports whether something accepts TCP connections at addr.
func dialable(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// LogBuffer keeps the last 256 KiB written to it, safe for the concurrent
// writes exec makes from its own goroutines: a long-running server's output,
// kept for error reports.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// logTail is how much of a process's output a LogBuffer keeps.
const logTail = 256 << 10

// Write appends p, dropping the oldest output beyond the kept tail.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len()+len(p) > 2*logTail {
		rest := b.buf.Bytes()[max(0, b.buf.Len()-logTail):]
		b.buf = *bytes.NewBuffer(append([]byte(nil), rest...))
	}
	return b.buf.Write(p)
}

// String returns the kept output.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ChildPIDs lists the process ids of this process's children, sorted, so
// tests can check that everything they started is gone.
func ChildPIDs() ([]int, error) {
	tasks, err := filepath.Glob("/proc/self/task/*/children")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended meanwhile
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// errNotFound is returned (wrapped) when a server binary cannot be found or installed.
var errNotFound = errors.New("not installed")
