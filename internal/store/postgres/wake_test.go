package postgres

import "testing"

// A revision notification wakes the waiters of its fabric, and those of
// every fabric; one that names no fabric wakes every waiter.
func TestNotificationWakesItsFabric(t *testing.T) {
	for _, tc := range []struct {
		payload, fabric string
		want            bool
	}{
		{"default:12", "default", true},
		{"default:12", "storage", false},
		{"storage:3", "storage", true},
		{"storage:3", "", true},
		{"12", "storage", true},
	} {
		if got := forFabric(tc.payload, tc.fabric); got != tc.want {
			t.Errorf("forFabric(%q, %q) = %t, want %t", tc.payload, tc.fabric, got, tc.want)
		}
	}
}
