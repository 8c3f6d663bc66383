// Command testservers starts the servers that test binaries can share
// (Postgres and the shared servers of every lock backend of backends.All,
// etcd's and ZooKeeper's; see testenv.StartShared), runs a command (go
// test …) with the INVENTORY_TEST_* variables naming them, and stops them
// when the command ends, whether it passed, failed or was interrupted.
// `make test` runs every test binary under one of it:
//
//	go run ./internal/testenv/cmd/testservers -- go test -race ./...
//
// It exits with the command's exit code.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"inventory/internal/lock/backends"
	"inventory/internal/testenv"
)

func main() {
	err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	var exit commandFailed
	switch {
	case errors.As(err, &exit):
		os.Exit(max(exit.ExitCode(), 1)) // -1 (killed by a signal) → 1
	case err != nil:
		fmt.Fprintln(os.Stderr, "testservers:", err)
		os.Exit(2)
	}
}

// commandFailed is the command's own failure, whose exit code testservers
// exits with; any other error is testservers' own.
type commandFailed struct{ *exec.ExitError }

// run starts the shared servers, runs args (after an optional "--") with
// their variables added to the environment, and stops them. A SIGINT or
// SIGTERM while the servers start cancels the start; once the command runs
// it is passed on to the command, and the servers are stopped after it has
// exited. (A Ctrl-C in a terminal reaches go test and its test binaries
// directly; the servers sit in process groups of their own.)
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return errors.New("usage: testservers [--] command [args…]")
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var child *os.Process // nil until the command has started
	go func() {
		for sig := range sigs {
			mu.Lock()
			if child == nil {
				cancel()
			} else {
				_ = child.Signal(sig)
			}
			mu.Unlock()
		}
	}()

	env, stop, err := testenv.StartShared(ctx, backends.All())
	if ctx.Err() != nil {
		if err == nil {
			stop()
		}
		return errors.New("interrupted while the shared test servers started")
	}
	if err != nil {
		return fmt.Errorf("start the shared test servers: %w", err)
	}
	defer stop()
	for _, kv := range env {
		fmt.Fprintln(stderr, "testservers:", kv)
	}

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	mu.Lock()
	err = ctx.Err() // interrupted while the servers started
	if err == nil {
		err = cmd.Start()
		child = cmd.Process
	}
	mu.Unlock()
	if err != nil {
		return err
	}
	if err := cmd.Wait(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return commandFailed{exit}
		}
		return err
	}
	return nil
}
