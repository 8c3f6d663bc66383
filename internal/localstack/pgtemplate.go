package localstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// initData fills data with a fresh cluster, as `initdb` would: every
// throw-away Postgres here is initialised by the same initdb with the same
// flags, so the machine keeps one cluster made by it (dataTemplate) and
// each start copies it, at a fraction of initdb's CPU (measured here:
// initdb 1.4 s of CPU, a copy 0.25 s).
func initData(ctx context.Context, initdb string, cred *syscall.Credential, data string) error {
	tmpl, err := dataTemplate(ctx, initdb, cred)
	if err != nil {
		return err
	}
	// -a keeps the owner (the postgres account) and initdb's modes (0700).
	if out, err := exec.CommandContext(ctx, "cp", "-a", tmpl, data).CombinedOutput(); err != nil {
		return fmt.Errorf("copy the initdb template %s: %w\n%s", tmpl, err, lastLines(string(out), 20))
	}
	return nil
}

// dataTemplate returns the data directory of a cluster initdb made, made
// once per machine (per initdb binary and account) under the temporary
// directory. Test binaries that start at once race to make it: each makes
// its own beside it and renames it into place; a loser's is removed.
func dataTemplate(ctx context.Context, initdb string, cred *syscall.Credential) (string, error) {
	st, err := os.Stat(initdb)
	if err != nil {
		return "", fmt.Errorf("initdb template: %w", err)
	}
	uid := os.Getuid()
	if cred != nil {
		uid = int(cred.Uid)
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("inventory-initdb-%d-%d-%d", uid, st.Size(), st.ModTime().Unix()))
	data := filepath.Join(dir, "data")
	if complete(data) {
		return data, nil
	}
	tmp, err := os.MkdirTemp("", "inventory-initdb-new-")
	if err != nil {
		return "", fmt.Errorf("initdb template: %w", err)
	}
	if cred != nil {
		if err := os.Chown(tmp, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("initdb template: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, initdb, "-D", filepath.Join(tmp, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("initdb: %w\n%s", err, lastLines(string(out), 20))
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if complete(data) { // another binary made it first
			return data, nil
		}
		// A partial template (a cleaner removed some of it): start over.
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			return "", fmt.Errorf("initdb template: %w", err)
		}
		return dataTemplate(ctx, initdb, cred)
	}
	return data, nil
}

// complete reports whether data holds a whole cluster: what a start reads
// first, and what initdb writes last.
func complete(data string) bool {
	for _, f := range []string{"PG_VERSION", "global/pg_control", "postgresql.conf", "pg_hba.conf"} {
		if _, err := os.Stat(filepath.Join(data, f)); err != nil {
			return false
		}
	}
	return true
}
