// Command fleet runs the local inventory stack in the foreground: Postgres,
// Redis, two inventory replicas and nginx on 127.0.0.1:8080, until Ctrl-C.
// It is the way to try the API with curl on a machine without Docker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"inventory/internal/fleet"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "nginx's address: where buyers and curl call")
	replicas := fs.Int("replicas", 2, "inventory replicas behind nginx")
	token := fs.String("admin-token", "demo-admin-token", "INVENTORY_ADMIN_TOKEN of the replicas")
	workDelay := fs.Duration("work-delay", 2*time.Millisecond, "INVENTORY_WORK_DELAY of the replicas (widens races; 0 in production)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *replicas < 1 || *workDelay < 0 {
		return fmt.Errorf("want --replicas >= 1 and --work-delay >= 0, got %d and %s", *replicas, *workDelay)
	}

	fmt.Fprintln(stderr, "starting Postgres, Redis, the replicas and nginx …")
	f, err := fleet.Start(ctx, fleet.Options{
		Replicas:   *replicas,
		Env:        map[string]string{"INVENTORY_WORK_DELAY": workDelay.String()},
		AdminToken: *token,
		Listen:     *listen,
	})
	if err != nil {
		return err
	}
	defer f.Stop()

	fmt.Fprintf(stdout, "inventory is up at %s (admin token %q)\n", f.URL, f.AdminToken)
	for _, r := range f.Replicas {
		fmt.Fprintf(stdout, "  replica %s at %s (pid %d)\n", r.Instance, r.URL, r.Pid())
	}
	fmt.Fprintf(stdout, "  postgres %s\n  redis    %s\nCtrl-C stops everything.\n", f.PostgresURL, f.RedisURL)
	<-ctx.Done()
	fmt.Fprintln(stderr, "stopping …")
	return f.Stop()
}
