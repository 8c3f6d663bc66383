package localstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// debianPackage names the Debian package that provides each server binary.
var debianPackage = map[string]string{
	"postgres":     "postgresql",
	"initdb":       "postgresql",
	"redis-server": "redis-server",
	"nginx":        "nginx",
	"etcd":         "etcd-server",
	"patroni":      "patroni", // StartPatroni: Postgres HA
	// The fake clock of RedisOptions.FakeClock is the library; the
	// faketime command stands for the pair.
	"faketime": "faketime libfaketime",
	// StartZooKeeper runs ZooKeeper's jar on a headless Java; Debian's
	// zookeeper package would add only scripts and a desktop Java.
	"java": "libzookeeper-java default-jre-headless",
}

var aptMu sync.Mutex // apt-get holds a global lock; one install at a time per process

// Ensure returns the path of each named binary ("postgres", "initdb",
// "redis-server", "nginx"), installing the missing ones with apt-get when
// running as root on a Debian-like system. Otherwise it fails with the exact
// command to run.
func Ensure(ctx context.Context, names ...string) ([]string, error) {
	paths, missing := lookAll(names)
	if len(missing) == 0 {
		return paths, nil
	}
	pkgs := packagesFor(missing)
	install := "apt-get update && apt-get install -y --no-install-recommends " + strings.Join(pkgs, " ")
	if os.Geteuid() != 0 || !fileExists("/usr/bin/apt-get") {
		return nil, fmt.Errorf("%s: %w; install with: sudo sh -c '%s'", strings.Join(missing, ", "), errNotFound, install)
	}
	aptMu.Lock()
	defer aptMu.Unlock()
	if _, missing = lookAll(names); len(missing) > 0 {
		cmd := exec.CommandContext(ctx, "sh", "-c", install)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %w; %q failed: %v\n%s", strings.Join(missing, ", "), errNotFound, install, err, lastLines(string(out), 20))
		}
	}
	paths, missing = lookAll(names)
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %w even after %q", strings.Join(missing, ", "), errNotFound, install)
	}
	return paths, nil
}

func lookAll(names []string) (paths, missing []string) {
	for _, n := range names {
		p, err := lookBinary(n)
		if err != nil {
			missing = append(missing, n)
			continue
		}
		paths = append(paths, p)
	}
	return paths, missing
}

// lookBinary searches PATH, then Debian's versioned Postgres directories
// (initdb and postgres are not on PATH there), newest version first.
func lookBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, dir := range dirs {
		if p := filepath.Join(dir, name); fileExists(p) {
			return p, nil
		}
	}
	return "", errNotFound
}

func packagesFor(missing []string) []string {
	seen := map[string]bool{}
	var pkgs []string
	for _, m := range missing {
		if p := debianPackage[m]; p != "" && !seen[p] {
			seen[p] = true
			pkgs = append(pkgs, p)
		}
	}
	return pkgs
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
