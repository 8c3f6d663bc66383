package localstack

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// listensOn says whether the process pid itself holds the listening socket
// of addr's port (on any address). A server that answers on its port may
// be another process's: FreePort only probes, so a concurrent test
// binary's server can bind the port first, and then our server exits
// "Address already in use" only after a readiness probe was answered by
// the other one — a test then talked to a stranger's Redis, whose keys a
// "restart" of ours never lost.
func listensOn(pid int, addr string) (bool, error) {
	_, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("listener of %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return false, fmt.Errorf("listener of %q: port: %w", addr, err)
	}
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(table, port, inodes); err != nil {
			return false, err
		}
	}
	if len(inodes) == 0 {
		return false, nil
	}
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false, fmt.Errorf("open files of pid %d: %w", pid, err)
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err != nil {
			continue // closed since the listing
		}
		if inode, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true, nil
		}
	}
	return false, nil
}

// listeningInodes adds to inodes the socket inode of every listening
// socket on port in a /proc/net/tcp{,6} table.
func listeningInodes(table string, port int, inodes map[string]bool) error {
	f, err := os.Open(table)
	if err != nil {
		if os.IsNotExist(err) { // no IPv6
			return nil
		}
		return fmt.Errorf("read %s: %w", table, err)
	}
	defer f.Close()
	const listen = "0A"
	s := bufio.NewScanner(f)
	s.Scan() // the header
	for s.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(s.Text())
		if len(f) < 10 || f[3] != listen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && int(p) == port {
			inodes[f[9]] = true
		}
	}
	return s.Err()
}
