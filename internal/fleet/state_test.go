package fleet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStateNamesTheFleetAtItsURL: the state file cmd/fleet writes is read
// back for the fleet at its URL, whatever loopback name the load tester
// uses for it, and for no other: another port, another host, a fleet whose
// process is gone, or no file at all; RemoveState leaves a file another
// fleet wrote since.
func TestStateNamesTheFleetAtItsURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin", "fleet.json")
	s := State{URL: "http://127.0.0.1:8080", AdminToken: "t", PostgresURL: "postgres://postgres@127.0.0.1:5/inventory", PID: os.Getpid()}
	if _, why := FleetAt(path, s.URL); !strings.Contains(why, "make fleet writes it") {
		t.Errorf("FleetAt(no file) why = %q, want it to say make fleet writes it", why)
	}
	if err := WriteState(path, s); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, %v; want 0600 (it holds the admin token)", fi.Mode(), err)
	}
	for _, tc := range []struct {
		target string
		want   bool
	}{
		{"http://127.0.0.1:8080", true}, {"http://localhost:8080", true}, {"http://localhost:8080/", true}, {"http://[::1]:8080", true},
		{"http://localhost:18080", false}, {"http://shop.example:8080", false}, {"https://localhost:8080", false},
	} {
		got, why := FleetAt(path, tc.target)
		if (why == "") != tc.want || (tc.want && got.PostgresURL != s.PostgresURL) {
			t.Errorf("FleetAt(%s) = %+v, %q; want the fleet %v", tc.target, got, why, tc.want)
		}
	}
	gone := s
	gone.PID = 1 << 30
	if err := WriteState(path, gone); err != nil {
		t.Fatal(err)
	}
	if _, why := FleetAt(path, s.URL); !strings.Contains(why, "is gone") {
		t.Errorf("FleetAt(a fleet whose process is gone) why = %q, want it to say so", why)
	}
	if err := RemoveState(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("RemoveState removed a file another process wrote: %v", err)
	}
	if err := RemoveState(path, gone.PID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("RemoveState left its own file: %v", err)
	}
}

// TestStatePathIsUnderTheModuleRoot: from a directory deep in the
// module, the state file is the module root's bin/fleet.json.
func TestStatePathIsUnderTheModuleRoot(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(filepath.Dir(wd)) // internal/fleet → the module root
	if got, want := StatePath(), filepath.Join(root, StateFile); got != want {
		t.Errorf("StatePath() = %s, want %s", got, want)
	}
}

// TestStateEnvFileReadsBackInAShell: WriteState writes bin/fleet.env
// beside bin/fleet.json, which a shell sources to the same values (one
// with a quote and a space included), for its owner alone; RemoveState
// removes both.
func TestStateEnvFileReadsBackInAShell(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin", "fleet.json")
	s := State{URL: "http://127.0.0.1:8080", AdminToken: `it's a "token" $HOME`, PostgresURL: "postgres://postgres@127.0.0.1:5/inventory?sslmode=disable&x=1",
		RedisURL: "redis://127.0.0.1:6/0", Strategy: "atomic", Logs: "/tmp/a b", PID: os.Getpid()}
	if err := WriteState(path, s); err != nil {
		t.Fatal(err)
	}
	env := EnvPath(path)
	if want := filepath.Join(filepath.Dir(path), "fleet.env"); env != want {
		t.Fatalf("EnvPath(%s) = %s, want %s", path, env, want)
	}
	if fi, err := os.Stat(env); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v, %v; want 0600 (it holds the admin token)", env, fi, err)
	}
	out, err := exec.Command("sh", "-c", `. "$1" && printf '%s\n' "$FLEET_URL" "$FLEET_ADMIN_TOKEN" "$FLEET_POSTGRES_URL" "$FLEET_REDIS_URL" "$FLEET_STRATEGY" "$FLEET_LOGS" "$FLEET_PID"`, "sh", env).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing %s: %v: %s", env, err, out)
	}
	want := strings.Join([]string{s.URL, s.AdminToken, s.PostgresURL, s.RedisURL, s.Strategy, s.Logs, strconv.Itoa(s.PID)}, "\n") + "\n"
	if string(out) != want {
		t.Errorf("sourced %s:\n%s\nwant\n%s", env, out, want)
	}
	if err := RemoveState(path, s.PID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, env} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s after RemoveState: %v, want it removed", p, err)
		}
	}
}
