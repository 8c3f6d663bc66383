package localstack

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, deadline time.Duration) (time.Duration, error) {
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	line, err := r.ReadString('\n')
	if err == nil && line != "ping\n" {
		err = errors.New("echo garbled: " + line)
	}
	return time.Since(start), err
}

func TestNetProxyLatencyCutAndHeal(t *testing.T) {
	p, err := StartNetProxy("echo", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	c, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if _, err := roundTrip(c, r, 5*time.Second); err != nil {
		t.Fatalf("through a whole link: %v", err)
	}

	if err := p.AddLatency(100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	// Both ways delayed: at least twice the latency per round trip.
	if d, err := roundTrip(c, r, 5*time.Second); err != nil || d < 200*time.Millisecond {
		t.Fatalf("with 100ms latency each way: round trip %s, %v; want at least 200ms", d, err)
	}
	p.Heal(context.Background())

	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(c, r, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("through a cut link: %v; want silence until the deadline", err)
	}
	p.Heal(context.Background())
	// The cut connection is closed by the heal; a new one goes through.
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("the connection cut across a heal still answers; want it closed")
	}
	c2, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(c2, bufio.NewReader(c2), 5*time.Second); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}
