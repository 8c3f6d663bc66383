package redlockbreak

import (
	"testing"

	"inventory/internal/lock/redlock"
)

// TestSettingIsRedlocks: the breaker finds the servers by the setting the
// service reads them from.
func TestSettingIsRedlocks(t *testing.T) {
	if Setting != redlock.Setting {
		t.Errorf("Setting = %q, want redlock.Setting %q", Setting, redlock.Setting)
	}
}
