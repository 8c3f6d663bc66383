package inventory_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestMakeHelpListsEveryDocumentedTarget: `make help` prints one line per
// target that has a `## name: what it does` comment, in the Makefile's
// order, each "make name" followed by its description, the descriptions
// aligned in one column and every line within 100 columns; and `make`
// alone still builds (its default goal is not help).
func TestMakeHelpListsEveryDocumentedTarget(t *testing.T) {
	mk, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	type doc struct{ target, what string }
	var docs []doc
	for _, m := range regexp.MustCompile(`(?m)^## ([a-z][a-z0-9-]*): (.+)$`).FindAllStringSubmatch(string(mk), -1) {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m[1]) + `:`).Match(mk) {
			t.Errorf("the Makefile documents %q with ##, but has no such target", m[1])
		}
		docs = append(docs, doc{m[1], m[2]})
	}
	for _, want := range []string{"help", "build", "demo", "fleet", "psql", "test"} {
		if !strings.Contains(string(mk), "## "+want+": ") {
			t.Errorf("the Makefile has no `## %s:` line: make help would not list it", want)
		}
	}

	out, err := makeCommand("--no-print-directory", "help").CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(docs) {
		t.Fatalf("make help printed %d lines, want %d (one per ## target):\n%s", len(lines), len(docs), out)
	}
	column := -1
	for i, d := range docs {
		line := lines[i]
		if !strings.HasPrefix(line, "make "+d.target+" ") || !strings.HasSuffix(line, "  "+d.what) {
			t.Errorf("make help line %d = %q, want make %s, then its description %q", i+1, line, d.target, d.what)
			continue
		}
		at := utf8.RuneCountInString(line) - utf8.RuneCountInString(d.what)
		if column < 0 {
			column = at
		} else if at != column {
			t.Errorf("make help line %d's description starts at column %d, want %d (aligned):\n%s", i+1, at, column, out)
		}
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("make help line %d is %d columns wide, want at most 100: %s", i+1, n, line)
		}
	}

	dry, err := makeCommand("-n").CombinedOutput()
	if err != nil || !strings.Contains(string(dry), "build -o bin/inventory ./cmd/inventory") {
		t.Errorf("make -n (the default goal) = %q, %v; want it to build bin/inventory", dry, err)
	}
}

// TestMakePassesTheStrategies: make fleet STRATEGY=… and make demo
// DEMO_ARGS='--strategies …', as the README shows them, reach bin/fleet
// and the load tester (make -n: what make would run).
func TestMakePassesTheStrategies(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fleet", "STRATEGY=atomic", "LISTEN=127.0.0.1:18080"}, "\nbin/fleet --listen 127.0.0.1:18080 --strategy atomic\n"},
		{[]string{"fleet"}, "\nbin/fleet --listen 127.0.0.1:8080 --strategy redis\n"},
		{[]string{"demo", "DEMO_ARGS=--strategies none,setnx,redis,atomic"}, "./scripts/demo.sh --strategies none,setnx,redis,atomic\n"},
	} {
		cmd := makeCommand(append([]string{"-n", "--no-print-directory"}, tc.args...)...)
		for _, kv := range os.Environ() { // make's defaults, not the caller's
			if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "LISTEN" && k != "STRATEGY" && k != "DEMO_ARGS" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("make -n %q = %q, %v; want it to run %q", tc.args, out, err, strings.TrimSpace(tc.want))
		}
	}
}

// makeCommand is make with args, run as a user runs it from a shell: not
// as a sub-make of the make test running this test, whose MAKEFLAGS (-j5,
// its jobserver) would make it warn "jobserver unavailable" among the
// output the tests read.
func makeCommand(args ...string) *exec.Cmd {
	cmd := exec.Command("make", args...)
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES":
		default:
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}
