package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"inventory/internal/fleet"
	"inventory/internal/inventory"
	"inventory/internal/localstack"
	"inventory/internal/testenv"
)

// A shell command of the README and the answer it shows under it.
type readmeCommand struct {
	line    int    // README.md's line of its first line
	text    string // as a newcomer pastes it (lines joined with newlines)
	about   string // the comment above it, if any ("create a product … → 201")
	want    []string
	wantAt  int  // README.md's line of the first line of want
	fenced  bool // want is the plain block after the command's, not its comments
	lastCmd bool // the last command of its block
}

// firstTenMinutes returns the commands of the README's "The first ten
// minutes", in order, from its ```sh blocks: a command is a run of lines
// that are neither blank nor comments; the comment lines right under it
// (no blank line between) are its answer, "# " taken off; a plain ```
// block after a ```sh block (prose between them or not) is the answer of
// that block's last command. A JSON answer wrapped over several lines (a line starting "{"
// whose end is not "}") is one line again, joined with a space.
func firstTenMinutes(t *testing.T) []readmeCommand {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	from := slices.Index(lines, "## The first ten minutes")
	if from < 0 {
		t.Fatal(`README.md has no "## The first ten minutes" section`)
	}
	var cmds []readmeCommand
	var block []string // the fenced block being read
	blockAt, lang := 0, ""
	prevSh := false // the last block was a ```sh block
	for i := from + 1; i < len(lines); i++ {
		line := lines[i]
		if block == nil && strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "```") {
			if block != nil {
				block = append(block, line)
			}
			continue
		}
		if block == nil { // opening
			block, blockAt, lang = []string{}, i+2, strings.TrimPrefix(line, "```")
			continue
		}
		switch {
		case lang == "sh":
			cmds = append(cmds, shCommands(block, blockAt)...)
			prevSh = true
		case lang == "" && prevSh && len(cmds) > 0:
			last := &cmds[len(cmds)-1]
			last.want, last.wantAt, last.fenced = block, blockAt, true
			prevSh = false
		}
		block = nil
	}
	return cmds
}

// shCommands splits a ```sh block that starts at README.md's line at.
func shCommands(block []string, at int) []readmeCommand {
	var out []readmeCommand
	about := ""
	for i := 0; i < len(block); {
		line := block[i]
		switch {
		case strings.TrimSpace(line) == "":
			about = ""
			i++
		case strings.HasPrefix(line, "#"):
			about = strings.TrimSpace(strings.TrimPrefix(line, "#"))
			i++
		default:
			c := readmeCommand{line: at + i, about: about}
			var text []string
			for ; i < len(block) && strings.TrimSpace(block[i]) != "" && !strings.HasPrefix(block[i], "#"); i++ {
				text = append(text, block[i])
			}
			c.text = strings.Join(text, "\n")
			c.wantAt = at + i
			for ; i < len(block) && strings.HasPrefix(block[i], "#"); i++ {
				w := strings.TrimPrefix(strings.TrimPrefix(block[i], "#"), " ")
				if n := len(c.want); n > 0 && strings.HasPrefix(c.want[n-1], "{") && !strings.HasSuffix(c.want[n-1], "}") {
					c.want[n-1] += " " + strings.TrimSpace(w)
					continue
				}
				c.want = append(c.want, w)
			}
			about = ""
			out = append(out, c)
		}
	}
	if len(out) > 0 {
		out[len(out)-1].lastCmd = true
	}
	return out
}

// TestReadmeFirstTenMinutesOnARealFleet follows the README's "The first
// ten minutes" word for word on a real fleet: it runs `make fleet` as the
// README says (in its own process group, like a terminal's foreground job),
// then every command of the section's ```sh blocks in a shell, in order,
// from the repository's root, and checks that each exits 0 and prints the
// answer the README shows under it (curl's status codes too: the one in a
// problem's body, the "→ 201" of the comment above, else 200); the links
// to the live page and /docs answer; then Ctrl-C stops the fleet, make
// exits 0 and the state files are gone. A README edit that breaks a
// command or changes an answer fails here.
//
// What legitimately varies is normalised, on both sides: the fleet
// listens on a free port instead of 8080 (LISTEN in make's environment;
// "localhost:8080" in a command becomes that port); the replica that
// answered ("instance") and request ids; in what make fleet prints, every
// number (ports, pids, timings, the log directory) and the checkout's
// path (the README's is /home/you/inventory); in the load tester's table,
// req/s and p99 (timings), and the row of an unsafe strategy but for its
// name and a verdict of an unsafe one (how much it oversells, or whether
// it got lucky, varies from run to run); in psql's tables, the figures of
// an unsafe strategy's rows; runs of spaces (column widths follow the
// figures). "…" (or "...") in a shown answer stands for anything.
func TestReadmeFirstTenMinutesOnARealFleet(t *testing.T) {
	testenv.InTier(t, testenv.TierE2E)
	cmds := firstTenMinutes(t)
	if len(cmds) < 10 || !strings.HasPrefix(cmds[0].text, "make fleet") {
		t.Fatalf("found %d commands in the README's first ten minutes, the first %q: want make fleet, then ten or more: is the test reading it right?", len(cmds), cmds[0].text)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// The commands find the fleet in the checkout's bin/fleet.json and
	// bin/fleet.env, as a newcomer's do: one that runs from here already
	// would get the README's commands instead.
	statePath := filepath.Join(root, fleet.StateFile)
	if st, err := fleet.ReadState(statePath); err == nil {
		if _, why := fleet.FleetAt(statePath, st.URL); why == "" {
			t.Fatalf("a fleet runs from this checkout (%s, process %d): stop it (Ctrl-C) first, this test starts its own with make fleet", statePath, st.PID)
		}
	}
	// A newcomer's shell: no make of ours around it.
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k != "MAKEFLAGS" && k != "MFLAGS" && k != "MAKELEVEL" && k != "LISTEN" && k != "STRATEGY" && k != "Q" {
			env = append(env, kv)
		}
	}
	// curl as installed, also writing the status code to stderr, where
	// the test reads it (the command and what it prints are unchanged).
	realCurl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("the README's commands need curl: %v", err)
	}
	shim := t.TempDir()
	if err := os.WriteFile(filepath.Join(shim, "curl"), []byte("#!/bin/sh\nexec "+realCurl+" -w '%{stderr}%{http_code}' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+shim+string(os.PathListSeparator)+os.Getenv("PATH"))

	f := startReadmeFleet(t, cmds[0], env, root)
	port := f.port
	cmds = cmds[1:]
	t.Logf("make fleet is up at 127.0.0.1:%d; %d commands of the README to run", port, len(cmds))

	for _, c := range cmds {
		text := strings.ReplaceAll(strings.ReplaceAll(c.text, "localhost:8080", "localhost:"+strconv.Itoa(port)), "127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(port))
		cmd := exec.Command("bash", "-c", text)
		cmd.Dir, cmd.Env, cmd.Stdin = root, env, nil
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err != nil {
			t.Errorf("README.md:%d: %s\nexited with %v; stdout:\n%s\nstderr:\n%s", c.line, c.text, err, stdout.String(), tail(stderr.String(), 3000))
			continue
		}
		t.Logf("README.md:%d: ran %s", c.line, strings.ReplaceAll(c.text, "\n", " "))
		if strings.HasPrefix(strings.TrimSpace(c.text), "curl ") {
			wantStatus := 200
			if m := regexp.MustCompile(`"status":(\d{3})`).FindStringSubmatch(strings.Join(c.want, "")); m != nil {
				wantStatus, _ = strconv.Atoi(m[1])
			} else if m := regexp.MustCompile(`→ (\d{3})\b`).FindStringSubmatch(c.about); m != nil {
				wantStatus, _ = strconv.Atoi(m[1])
			}
			if got := strings.TrimSpace(stderr.String()); got != strconv.Itoa(wantStatus) {
				t.Errorf("README.md:%d: %s\nanswered HTTP %s, want %d", c.line, c.text, got, wantStatus)
			}
		}
		if c.want == nil {
			continue
		}
		got := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
		if why := matchAnswer(c.want, got, nil); why != "" {
			t.Errorf("README.md:%d: %s\nprinted\n%s\nwhich differs from the README's answer (README.md:%d):\n%s\n%s",
				c.line, c.text, stdout.String(), c.wantAt, strings.Join(c.want, "\n"), why)
		}
	}

	// Step 3's links: the live page and the docs.
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`<http://localhost:8080(/[^>]*)>`).FindAllStringSubmatch(string(b), -1) {
		resp, err := http.Get("http://localhost:" + strconv.Itoa(port) + m[1])
		if err != nil {
			t.Errorf("the README's link http://localhost:8080%s: %v", m[1], err)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the README's link http://localhost:8080%s answered %s, want 200", m[1], resp.Status)
		}
	}

	// Step 6: Ctrl-C stops everything. bin/fleet exits 0 and says so
	// last; make, which got the SIGINT too, then ends by it, as GNU make
	// does whatever its recipe's status: without "make: *** … Error", which
	// it prints when the recipe failed.
	err = f.interrupt()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGINT) {
		t.Errorf("make fleet after Ctrl-C: %v, want it to exit 0 or by the SIGINT\n%s", err, tail(f.out.String(), 3000))
	}
	out := strings.TrimRight(f.out.String(), "\n")
	if last := out[strings.LastIndex(out, "\n")+1:]; !strings.Contains(last, "stopped; logs in ") || strings.Contains(out, "make: ***") {
		t.Errorf("make fleet after Ctrl-C said\n%s\nwant its last line to say stopped; logs in …, and no make: *** error", tail(out, 2000))
	}
	for _, p := range []string{statePath, fleet.EnvPath(statePath)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after make fleet stopped: %v, want it removed", p, err)
		}
	}
}

// readmeFleet is the `make fleet` the README test started.
type readmeFleet struct {
	cmd     *exec.Cmd
	out     *localstack.LogBuffer // stdout and stderr, as a terminal shows them
	done    chan error
	port    int
	stopped bool
}

// interrupt sends SIGINT to make's process group, as Ctrl-C in a terminal
// does, and waits for make to exit.
func (f *readmeFleet) interrupt() error {
	if f.stopped {
		return nil
	}
	f.stopped = true
	if err := syscall.Kill(-f.cmd.Process.Pid, syscall.SIGINT); err != nil {
		return err
	}
	select {
	case err := <-f.done:
		return err
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Errorf("still running 2 minutes after SIGINT: killed")
	}
}

// startReadmeFleet runs the README's make fleet command c on a free port
// and waits until it says it is up; then its output must show the lines of
// the README's sample that follows c. A port taken by another process
// before nginx bound it is drawn again.
func startReadmeFleet(t *testing.T, c readmeCommand, env []string, root string) *readmeFleet {
	t.Helper()
	for attempt := 1; ; attempt++ {
		port, err := localstack.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		f := &readmeFleet{out: new(localstack.LogBuffer), done: make(chan error, 1), port: port}
		f.cmd = exec.Command("bash", "-c", c.text)
		f.cmd.Dir, f.cmd.Stdout, f.cmd.Stderr = root, f.out, f.out
		// make's LISTEN ?= gives way to the environment's.
		f.cmd.Env = append(slices.Clone(env), "LISTEN=127.0.0.1:"+strconv.Itoa(port))
		f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := f.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { f.done <- f.cmd.Wait() }()
		t.Cleanup(func() { _ = f.interrupt() })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err = waitFor(ctx, f, "Ctrl-C stops everything")
		cancel()
		if err == nil {
			got := strings.Split(strings.TrimRight(f.out.String(), "\n"), "\n")
			if why := matchAnswer(c.want, got, fleetNormalizer(root)); why != "" {
				t.Errorf("README.md:%d: %s\nprinted\n%s\nwhich differs from the README's sample (README.md:%d):\n%s\n%s",
					c.line, c.text, f.out.String(), c.wantAt, strings.Join(c.want, "\n"), why)
			}
			return f
		}
		_ = f.interrupt()
		if strings.Contains(f.out.String(), "address already in use") && attempt < 3 {
			t.Logf("port %d was taken before nginx bound it; drawing another", port)
			continue
		}
		t.Fatalf("README.md:%d: %s (LISTEN=127.0.0.1:%d): %v\n%s", c.line, c.text, port, err, tail(f.out.String(), 4000))
	}
}

// waitFor waits until f has printed s, or has exited, or ctx ends.
func waitFor(ctx context.Context, f *readmeFleet, s string) error {
	for !strings.Contains(f.out.String(), s) {
		select {
		case err := <-f.done:
			f.done <- err // for interrupt
			return fmt.Errorf("exited before saying %q: %v", s, err)
		case <-ctx.Done():
			return fmt.Errorf("did not say %q: %w", s, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// matchAnswer reports how got differs from want ("" when it does not):
// line by line after normalising both, a line "…" standing for any lines
// (none included) and "…" within a line for any text. extra, when not
// nil, normalises further.
func matchAnswer(want, got []string, extra func(string) string) string {
	norm := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			l = normalizeLine(l)
			if extra != nil {
				l = extra(l)
			}
			out = append(out, l)
		}
		return out
	}
	w, g := norm(want), norm(got)
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i == len(w) {
			return j == len(g)
		}
		if w[i] == "…" {
			for k := j; k <= len(g); k++ {
				if match(i+1, k) {
					return true
				}
			}
			return false
		}
		return j < len(g) && lineMatches(w[i], g[j]) && match(i+1, j+1)
	}
	if match(0, 0) {
		return ""
	}
	// The first line that differs, for the message: the longest matching
	// prefix of want, read without its "…" lines.
	j := 0
	for i := range w {
		if w[i] == "…" {
			continue
		}
		for j < len(g) && !lineMatches(w[i], g[j]) {
			j++
		}
		if j == len(g) {
			return fmt.Sprintf("no line of the output (normalised) matches the README's %q", w[i])
		}
		j++
	}
	return "the output (normalised) has lines the README does not show, and no \"…\" line says it leaves some out"
}

// lineMatches reports whether got is the line want, "…" in want standing
// for any text.
func lineMatches(want, got string) bool {
	if !strings.Contains(want, "…") {
		return want == got
	}
	parts := strings.Split(want, "…")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

var (
	instanceRe  = regexp.MustCompile(`"instance":"inventory-\d+"`)
	requestIDRe = regexp.MustCompile(`"request_id":"[0-9a-f]{32}"`)
	spacesRe    = regexp.MustCompile(`\s+`)
	digitsRe    = regexp.MustCompile(`\d+`)
	verdicts    = []string{"NOT LINEARIZABLE", "NO OVERSELL", "LOST UPDATES", "DID NOT STRIKE"} // the verdicts of two words
)

// normalizeLine takes out of one line of an answer what varies from run to
// run (see TestReadmeFirstTenMinutesOnARealFleet).
func normalizeLine(l string) string {
	l = strings.ReplaceAll(l, "...", "…")
	l = strings.TrimSpace(spacesRe.ReplaceAllString(l, " "))
	if l != "" && strings.Trim(l, "─") == "" { // a table's rule, as wide as its columns
		return "─"
	}
	l = instanceRe.ReplaceAllString(l, `"instance":"inventory-N"`)
	l = requestIDRe.ReplaceAllString(l, `"request_id":"ID"`)
	// The load tester's table: strategy, verdict, figures, req/s, p99.
	for _, v := range verdicts {
		l = strings.ReplaceAll(l, v, strings.ReplaceAll(v, " ", "_"))
	}
	fields := strings.Fields(l)
	if len(fields) >= 4 {
		if info, err := inventory.Lookup(fields[0]); err == nil && strings.Contains("SAFE OVERSOLD NO_OVERSELL LOST_UPDATES BROKEN UNDERSOLD NOT_LINEARIZABLE INCONCLUSIVE", fields[1]) {
			if !info.Safe {
				return fields[0] + " <an unsafe strategy's verdict and figures>"
			}
			return strings.Join(fields[:len(fields)-2], " ") + " <req/s> <p99>"
		}
	}
	for _, v := range verdicts {
		l = strings.ReplaceAll(l, strings.ReplaceAll(v, " ", "_"), v)
	}
	// psql's rows: an unsafe strategy's figures.
	if strings.Contains(l, "|") {
		for _, cell := range strings.Split(l, "|") {
			if info, err := inventory.Lookup(strings.TrimSpace(cell)); err == nil && !info.Safe {
				return digitsRe.ReplaceAllString(l, "N")
			}
		}
	}
	return l
}

// fleetNormalizer is what also varies in make fleet's output: every
// number, and the checkout's path.
func fleetNormalizer(root string) func(string) string {
	return func(l string) string {
		l = strings.ReplaceAll(l, root, "/home/you/inventory")
		return digitsRe.ReplaceAllString(l, "N")
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
