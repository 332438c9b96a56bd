package topology

import (
	"slices"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// pkeysFrom returns n distinct network pkeys starting at first.
func pkeysFrom(first fabric.PKey, n int) []fabric.PKey {
	out := make([]fabric.PKey, n)
	for i := range out {
		out[i] = first + fabric.PKey(i)
	}
	return out
}

// The host ports whose pkeys would reach their switch ports' capacity, as
// the applier asks after each sweep (PortLimit.ReachedIn, without static
// partitions: the default partition alone).
func TestCapacityReached(t *testing.T) {
	top := load(t, "good/ibsim-5-hosts-2-switches.lst")
	const (
		h1, h2, h3, h4 fabric.GUID = 0x0002c90300000101, 0x0002c90300000201, 0x0002c90300000301, 0x0002c90300000401
		absent         fabric.GUID = 0x0002c90300000901 // not on the fabric
	)
	tests := []struct {
		name     string
		pkeys    map[fabric.GUID][]fabric.PKey
		capacity int
		want     []Reached
	}{
		{"one network each", map[fabric.GUID][]fabric.PKey{h1: {101}, h2: {102}}, 64, nil},
		{
			// 63 networks + the default = 64 pkeys: the table of 64 is full,
			// which is already the silent case; 62 + default = 63 is fine.
			"reaching the capacity counts",
			map[fabric.GUID][]fabric.PKey{h1: pkeysFrom(1, 63), h2: pkeysFrom(1, 62)},
			64,
			[]Reached{{Host: h1, Behind: SwitchPort{0x0002c90300f00001, 2}, PKeys: 64}},
		},
		{
			// The default partition listed, and a pkey given with its full
			// member bit, count once each: 30 + default = 31 < 32.
			"duplicates count once",
			map[fabric.GUID][]fabric.PKey{h3: append(pkeysFrom(1, 30), fabric.DefaultPKey, 0x8001, 5)},
			32,
			nil,
		},
		{
			"beyond the capacity, on both switches",
			map[fabric.GUID][]fabric.PKey{h4: pkeysFrom(0x100, 40), h3: append(pkeysFrom(1, 31), 0x7ffe)},
			32,
			[]Reached{
				{Host: h3, Behind: SwitchPort{0x0002c90300f00001, 3}, PKeys: 33},
				{Host: h4, Behind: SwitchPort{0x0002c90300f00002, 2}, PKeys: 41},
			},
		},
		{"a port not on the fabric is not checked", map[fabric.GUID][]fabric.PKey{absent: pkeysFrom(1, 100)}, 32, nil},
		{"no pkeys listed: the default alone", map[fabric.GUID][]fabric.PKey{h1: nil}, 2, nil},
		{"the default alone reaches a capacity of 1", map[fabric.GUID][]fabric.PKey{h1: nil}, 1,
			[]Reached{{Host: h1, Behind: SwitchPort{0x0002c90300f00001, 2}, PKeys: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &PortLimit{Capacity: tt.capacity}
			if got, err := l.ReachedIn(top, nil, tt.pkeys); err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ReachedIn = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
