package driver

import (
	"testing"
	"time"
)

// The bound is a fifth of the lease, rounded up to whole seconds (MariaDB's
// idle_transaction_timeout counts seconds: rounded down, a lease of 7 s would
// get 1 s, and a bound of 0 would turn the timeout off), at least a second.
func TestIdleTransactionFor(t *testing.T) {
	tests := []struct {
		lease, want time.Duration
	}{
		{time.Second, time.Second}, // [ha] lease_timeout's least
		{3 * time.Second, time.Second},
		{5 * time.Second, time.Second},
		{5500 * time.Millisecond, 2 * time.Second},
		{7 * time.Second, 2 * time.Second},
		{30 * time.Second, 6 * time.Second}, // the default
		{47 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := IdleTransactionFor(tt.lease); got != tt.want {
			t.Errorf("IdleTransactionFor(%v) = %v; want %v", tt.lease, got, tt.want)
		}
	}
	if got := OptionsOf().IdleTransaction; got != IdleTransactionFor(DefaultLeaseTimeout) {
		t.Errorf("OptionsOf().IdleTransaction = %v; want the default lease's %v", got, IdleTransactionFor(DefaultLeaseTimeout))
	}
}
