package localstack

import (
	"net"
	"testing"
)

// TestFreePortIsBelowTheEphemeralRange: a port FreePort gives is one no
// :0 listener or outgoing connection is handed meanwhile, and can be bound.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	for range 20 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < freePortFloor || port >= low {
			t.Fatalf("FreePort() = %d, want a port in [%d, %d), below the ephemeral range", port, freePortFloor, low)
		}
		l, err := net.Listen("tcp", hostPort(port))
		if err != nil {
			t.Fatalf("FreePort() = %d, which cannot be bound: %v", port, err)
		}
		_ = l.Close()
	}
}
