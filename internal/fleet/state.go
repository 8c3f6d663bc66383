package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// State is where a running fleet is, as `make fleet` (cmd/fleet) writes it
// for the load tester: given only the fleet's URL, the load tester finds
// the fleet's Postgres here and reads each run's state from the database
// instead of taking the service's word for it. WriteState also writes it
// for a shell (EnvPath), so that `make psql` and a pasted command find
// the fleet's Postgres without its port, which changes from run to run.
type State struct {
	URL         string `json:"url"`
	AdminToken  string `json:"admin_token"`
	PostgresURL string `json:"postgres_url"`
	RedisURL    string `json:"redis_url"`
	// Strategy is the fleet default the replicas started with (a PUT
	// /strategy since may have changed it: GET /strategy says).
	Strategy string `json:"strategy,omitempty"`
	// Logs is the directory of every process's log.
	Logs      string    `json:"logs,omitempty"`
	PID       int       `json:"pid"` // the process that runs the fleet, and removes the file when it stops
	StartedAt time.Time `json:"started_at"`
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

// EnvPath is the shell's copy of the state file at path: bin/fleet.env
// beside bin/fleet.json.
func EnvPath(path string) string {
	return strings.TrimSuffix(path, filepath.Ext(path)) + ".env"
}

// WriteState writes s to path, and for a shell to EnvPath(path) (read
// with `. bin/fleet.env`), each whole or not at all; the shell's copy
// first, so that a state file always has one beside it.
func WriteState(path string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := writeFile(EnvPath(path), shellVars(s)); err != nil {
		return err
	}
	return writeFile(path, append(b, '\n'))
}

// writeFile writes b to path through a temporary file and a rename.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	// The files hold the admin token: for their owner alone.
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("fleet state: %w", err)
	}
	return nil
}

// shellVars is s as shell assignments, each value single-quoted: the
// FLEET_ prefix keeps them apart from the service's INVENTORY_ settings,
// which a shell that sourced them would otherwise pass to whatever it runs.
func shellVars(s State) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# The fleet of `make fleet` (process %d), while it runs; removed when it stops.\n", s.PID)
	b.WriteString("# In a shell: . bin/fleet.env; psql \"$FLEET_POSTGRES_URL\"\n")
	for _, kv := range [][2]string{
		{"FLEET_URL", s.URL}, {"FLEET_ADMIN_TOKEN", s.AdminToken}, {"FLEET_POSTGRES_URL", s.PostgresURL},
		{"FLEET_REDIS_URL", s.RedisURL}, {"FLEET_STRATEGY", s.Strategy}, {"FLEET_LOGS", s.Logs}, {"FLEET_PID", strconv.Itoa(s.PID)},
	} {
		fmt.Fprintf(&b, "%s=%s\n", kv[0], ShellQuote(kv[1]))
	}
	return []byte(b.String())
}

// ShellQuote quotes s for a POSIX shell: in single quotes, a single quote
// in s ending the quotes, escaped and the quotes reopened.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// RemoveState removes the state file at path and its shell's copy if they
// are still the ones the process pid wrote (a fleet started since has its
// own).
func RemoveState(path string, pid int) error {
	s, err := ReadState(path)
	if errors.Is(err, os.ErrNotExist) || (err == nil && s.PID != pid) {
		return nil
	}
	// The state file last: while it is there, a later RemoveState still
	// knows whose the shell's copy is.
	for _, p := range []string{EnvPath(path), path} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("fleet state: %w", err)
		}
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
