package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// TestReservedGUIDs: [api] reserved_guids holds each GUID of the list, in
// either case, and none when the key is absent or empty.
func TestReservedGUIDs(t *testing.T) {
	for _, tt := range []struct {
		name, lines string
		want        []fabric.GUID
	}{
		{"absent", "", nil},
		{"empty", "reserved_guids =\n", nil},
		{"two, either case", "reserved_guids = 0x0002c903000fff01 , 0x0002C903000FFF02\n",
			[]fabric.GUID{0x0002c903000fff01, 0x0002c903000fff02}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader("[api]\ntoken = s3cret-token-0123456789\n"+tt.lines), "afm.conf")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.API.ReservedGUIDs, tt.want) {
				t.Errorf("ReservedGUIDs = %v, want %v", c.API.ReservedGUIDs, tt.want)
			}
		})
	}
}
