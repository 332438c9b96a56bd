package fabric

import (
	"strings"
	"testing"
)

// UFM's rate_limit values and the IBTA rate codes OpenSM takes (its
// partitions file's rate=, the QoS policy's rate-limit), and the MTU codes.
func TestQoSCodes(t *testing.T) {
	rates := []struct {
		gbps float64
		code int
	}{
		{2.5, 2}, {10, 3}, {30, 4}, {5, 5}, {20, 6}, {40, 7}, {60, 8}, {80, 9}, {120, 10}, {14, 11}, {56, 12},
		{112, 13}, {168, 14}, {25, 15}, {100, 16}, {200, 17}, {300, 18},
	}
	for _, r := range rates {
		mbps, ok := RateMbpsOf(r.gbps)
		q := QoS{MTULimit: 2, RateMbps: mbps}
		if !ok || q.RateCode() != r.code || q.RateGbps() != r.gbps || q.Check() != nil {
			t.Errorf("rate %v Gb/s: %d Mb/s (%t), code %d, back %v, check %v; want code %d", r.gbps, mbps, ok,
				q.RateCode(), q.RateGbps(), q.Check(), r.code)
		}
	}
	for _, gbps := range []float64{0, 2, 7, 2500, 28, 400, -10} {
		if mbps, ok := RateMbpsOf(gbps); ok {
			t.Errorf("rate %v Gb/s is not UFM's, but reads as %d Mb/s", gbps, mbps)
		}
	}
	if a, b := (QoS{MTULimit: 2}).MTUCode(), (QoS{MTULimit: 4}).MTUCode(); a != 4 || b != 5 {
		t.Errorf("MTU codes of 2 and 4 KB = %d, %d; want 4 (2048) and 5 (4096)", a, b)
	}
	if FormatRate(2500) != "2.5" || FormatRate(200000) != "200" {
		t.Errorf("FormatRate: %q, %q", FormatRate(2500), FormatRate(200000))
	}
	if err := DefaultQoS.Check(); err != nil {
		t.Errorf("UFM's defaults: %v", err)
	}
}

func TestQoSCheck(t *testing.T) {
	tests := []struct {
		q    QoS
		want string
	}{
		{QoS{MTULimit: 3, RateMbps: 2500}, "mtu_limit 3: want 2 or 4"},
		{QoS{MTULimit: 4, ServiceLevel: 16, RateMbps: 2500}, "service_level 16: want 0 to 15"},
		{QoS{MTULimit: 4, ServiceLevel: -1, RateMbps: 2500}, "service_level -1"},
		{QoS{MTULimit: 4, RateMbps: 7000}, "rate_limit 7: want one of 2.5, 10, 30"},
	}
	for _, tt := range tests {
		if err := tt.q.Check(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%+v) = %v, want %q", tt.q, err, tt.want)
		}
	}
}
