package jobs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/internal/lock"
)

// A killed replica is a child process: this test binary started again
// with childEnv set, which runs one Runner (childMain) on the backend the
// variables below name and prints a line for each run, until it is killed
// with SIGKILL: nothing released, no deferred function run, its lock left
// to expire on the server as a crashed replica's is.
const (
	childEnv      = "JOBS_TEST_CHILD"         // the backend, as backendCase.name
	childKeyEnv   = "JOBS_TEST_CHILD_KEY"     // the lock key
	childServers  = "JOBS_TEST_CHILD_SERVERS" // servers as servers.encode
	childTTLEnv   = "JOBS_TEST_CHILD_TTL"
	childWaitEnv  = "JOBS_TEST_CHILD_WAIT"
	childInterval = "JOBS_TEST_CHILD_INTERVAL"
	childTimeout  = time.Minute // a child whose parent died ends itself
)

// childMain is the child process: it runs a Runner until killed (or
// childTimeout), printing "run <fence backend> <fence token>" at the start
// of each run.
func childMain() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	c, ok := caseNamed(os.Getenv(childEnv))
	if !ok {
		return fail(fmt.Errorf("no backend case %q", os.Getenv(childEnv)))
	}
	var d [3]time.Duration
	for i, name := range []string{childTTLEnv, childWaitEnv, childInterval} {
		v, err := time.ParseDuration(os.Getenv(name))
		if err != nil {
			return fail(fmt.Errorf("%s: %w", name, err))
		}
		d[i] = v
	}
	srv, err := decodeServers(os.Getenv(childServers))
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	l, closeAll, err := c.open(ctx, srv, lock.Options{TTL: d[0], Wait: d[1]})
	if err != nil {
		return fail(err)
	}
	defer closeAll()
	job := func(_ context.Context, f lock.Fence) error {
		_, err := fmt.Printf("run %s %d\n", f.Backend, f.Token)
		return err
	}
	if err := New(l, os.Getenv(childKeyEnv), job, Options{Interval: d[2]}).Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// child is a running child process.
type child struct {
	cmd  *exec.Cmd
	runs chan lock.Fence // the fence of each run it started, as it printed them
	gone chan struct{}   // closed once it has ended and been waited for
}

// startChild starts a child process running a Runner of c on key.
func startChild(t *testing.T, c backendCase, srv servers, key string, o lock.Options, interval time.Duration) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"="+c.name, childKeyEnv+"="+key, childServers+"="+srv.encode(),
		childTTLEnv+"="+o.TTL.String(), childWaitEnv+"="+o.Wait.String(), childInterval+"="+interval.String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("child's stdout: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	ch := &child{cmd: cmd, runs: make(chan lock.Fence, 1000), gone: make(chan struct{})}
	go func() {
		defer close(ch.gone)
		readRuns(out, ch.runs) // until the process is gone and its stdout closed
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-ch.gone
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("child's stderr:\n%s", stderr.String())
		}
	})
	return ch
}

// readRuns sends the fence of each "run" line of r to runs.
func readRuns(r io.Reader, runs chan<- lock.Fence) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "run" {
			continue
		}
		token, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		select {
		case runs <- lock.Fence{Backend: f[1], Token: token}:
		default:
		}
	}
}

// next waits up to limit for the child's next run and returns its fence.
func (c *child) next(t *testing.T, what string, limit time.Duration) lock.Fence {
	t.Helper()
	select {
	case f := <-c.runs:
		return f
	case <-time.After(limit):
		t.Fatalf("waited %v for %s", limit, what)
		return lock.Fence{}
	}
}

// kill kills the child with SIGKILL, waits until it is gone, and returns
// when the signal was sent.
func (c *child) kill(t *testing.T) time.Time {
	t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	<-c.gone
	return at
}
