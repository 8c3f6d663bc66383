package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// State is where a running fleet is, as `make fleet` (cmd/fleet) writes it
// for the load tester: given only the fleet's URL, the load tester finds
// the fleet's Postgres here and reads each run's state from the database
// instead of taking the service's word for it.
type State struct {
	URL         string    `json:"url"`
	AdminToken  string    `json:"admin_token"`
	PostgresURL string    `json:"postgres_url"`
	RedisURL    string    `json:"redis_url"`
	PID         int       `json:"pid"` // the process that runs the fleet, and removes the file when it stops
	StartedAt   time.Time `json:"started_at"`
}

// StateFile is the state file's path under the module's root.
const StateFile = "bin/fleet.json"

// StatePath is StateFile under the module's root: the first directory
// from the working directory up that holds a go.mod (the working
// directory itself when none does), so that `make fleet` and `go run
// ./loadtest` find the same file from anywhere in the repository.
func StatePath() string {
	dir, err := os.Getwd()
	if err != nil {
		return StateFile
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, StateFile)
		}
		if filepath.Dir(d) == d {
			return filepath.Join(dir, StateFile)
		}
	}
}

// WriteState writes s to path, whole or not at all.
func WriteState(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	tmp := path + ".tmp"
	// The file holds the admin token: for its owner alone.
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

// RemoveState removes the state file at path if it is still the one the
// process pid wrote (a fleet started since has its own).
func RemoveState(path string, pid int) error {
	s, err := ReadState(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && s.PID != pid) {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

// ReadState reads the state file at path.
func ReadState(path string) (State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("fleet state %s: %w", path, err)
	}
	return s, nil
}

// FleetAt reads the state file at path and returns its fleet when it is
// the fleet at target: the same scheme and port, and the same host, the
// loopback names (localhost, 127.0.0.1, ::1) being one; and its process
// still running (a fleet killed without a chance to remove its file left
// it behind). Otherwise it says why not, for a line of the load tester's.
func FleetAt(path, target string) (State, string) {
	s, err := ReadState(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return State{}, "no " + path + " (make fleet writes it)"
	case err != nil:
		return State{}, err.Error()
	case !sameURL(s.URL, target):
		return State{}, fmt.Sprintf("%s names the fleet at %s, not %s", path, s.URL, target)
	case !running(s.PID):
		return State{}, fmt.Sprintf("%s names the fleet at %s, but its process %d is gone", path, s.URL, s.PID)
	case s.PostgresURL == "":
		return State{}, fmt.Sprintf("%s names no Postgres", path)
	}
	return s, ""
}

// sameURL reports whether a and b name the same HTTP endpoint.
func sameURL(a, b string) bool {
	ua, errA := url.Parse(strings.TrimRight(a, "/"))
	ub, errB := url.Parse(strings.TrimRight(b, "/"))
	if errA != nil || errB != nil || ua.Scheme != ub.Scheme || ua.Path != ub.Path {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		if u.Scheme == "https" {
			return "443"
		}
		return "80"
	}
	return port(ua) == port(ub) && sameHost(ua.Hostname(), ub.Hostname())
}

func sameHost(a, b string) bool {
	loopback := func(h string) bool {
		if h == "localhost" {
			return true
		}
		ip := net.ParseIP(h)
		return ip != nil && ip.IsLoopback()
	}
	return strings.EqualFold(a, b) || (loopback(a) && loopback(b))
}

// running reports whether process pid is alive: it exists and is not a
// zombie waiting to be reaped (kill -0 succeeds on those too).
func running(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no /proc: kill -0 is all there is
	}
	// The state follows the command's closing parenthesis.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}
