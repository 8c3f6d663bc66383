package jobs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// childTimeout), printing "run <fence backend> <fence token> <start, Unix
// ns>" at the start of each run, and its log, on its stdout.
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
		_, err := fmt.Printf("run %s %d %d\n", f.Backend, f.Token, time.Now().UnixNano())
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, nil))
	if err := New(l, os.Getenv(childKeyEnv), job, Options{Interval: d[2], Logger: log}).Run(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// child is a running child process.
type child struct {
	cmd  *exec.Cmd
	runs chan childRun // each run it started, as it printed them
	gone chan struct{} // closed once it has ended and been waited for

	mu   sync.Mutex
	logs []childLine // its log lines, as they came
}

// childRun is a run of a child's job.
type childRun struct {
	fence lock.Fence
	start time.Time // on the child's clock (the machine's)
}

// childLine is a line of a child's log and when it came.
type childLine struct {
	at   time.Time
	text string
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
	ch := &child{cmd: cmd, runs: make(chan childRun, 1000), gone: make(chan struct{})}
	go func() {
		defer close(ch.gone)
		ch.read(out) // until the process is gone and its stdout closed
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

// read sends each "run" line of r to c.runs and keeps the others as
// c's log.
func (c *child) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "run" {
			token, err1 := strconv.ParseInt(f[2], 10, 64)
			ns, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 == nil && err2 == nil {
				select {
				case c.runs <- childRun{fence: lock.Fence{Backend: f[1], Token: token}, start: time.Unix(0, ns)}:
				default:
				}
				continue
			}
		}
		c.mu.Lock()
		c.logs = append(c.logs, childLine{at: time.Now(), text: sc.Text()})
		c.mu.Unlock()
	}
}

// saidSince reports whether a line of c's log that came after t contains
// text.
func (c *child) saidSince(t time.Time, text string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.ContainsFunc(c.logs, func(l childLine) bool { return l.at.After(t) && strings.Contains(l.text, text) })
}

// signal sends sig to c and returns when it was sent.
func (c *child) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to child: %v", sig, err)
	}
	return at
}

// next waits up to limit for the child's next run and returns it.
func (c *child) next(t *testing.T, what string, limit time.Duration) childRun {
	t.Helper()
	select {
	case r := <-c.runs:
		return r
	case <-time.After(limit):
		t.Fatalf("waited %v for %s", limit, what)
		return childRun{}
	}
}

// kill kills the child with SIGKILL, waits until it is gone, and returns
// when the signal was sent.
func (c *child) kill(t *testing.T) time.Time {
	t.Helper()
	at := c.signal(t, syscall.SIGKILL)
	<-c.gone
	return at
}
