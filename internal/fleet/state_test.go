package fleet

import (
	"os"
	"path/filepath"
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
