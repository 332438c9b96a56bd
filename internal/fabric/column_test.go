package fabric

import (
	"strings"
	"testing"
)

// The column forms are what the three engines' drivers hand over: text as a
// string (pgx, SQLite) or bytes (MariaDB), integers as int64 or int32.
func TestColumnScan(t *testing.T) {
	guids := []struct {
		src     any
		want    GUID
		wantErr string
	}{
		{"0x0002c90300001039", 0x0002c90300001039, ""},
		{[]byte("0x248a070300b1c2d4"), 0x248a070300b1c2d4, ""},
		{"248a070300b1c2d4", 0, "want 0x"},
		{int64(5), 0, "want text"},
	}
	for _, tt := range guids {
		var g GUID
		err := g.Scan(tt.src)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("GUID.Scan(%#v) = %v, want an error with %q", tt.src, err, tt.wantErr)
			}
			continue
		}
		if err != nil || g != tt.want {
			t.Errorf("GUID.Scan(%#v) = %s, %v; want %s", tt.src, g, err, tt.want)
		}
		if v, _ := g.Value(); v != tt.want.String() {
			t.Errorf("GUID(%s).Value() = %#v, want its canonical text", g, v)
		}
	}
	pkeys := []struct {
		src     any
		want    PKey
		wantErr string
	}{
		{int64(0x65), 0x65, ""},
		{int32(0x7ffe), 0x7ffe, ""},
		{[]byte("16"), 0x10, ""},
		{int64(-1), 0, "out of range"},
		{int64(0x10000), 0, "out of range"},
		{"101", 0, "want an integer"},
	}
	for _, tt := range pkeys {
		var p PKey
		err := p.Scan(tt.src)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("PKey.Scan(%#v) = %v, want an error with %q", tt.src, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p != tt.want {
			t.Errorf("PKey.Scan(%#v) = %s, %v; want %s", tt.src, p, err, tt.want)
		}
		if v, _ := p.Value(); v != int64(tt.want) {
			t.Errorf("PKey(%s).Value() = %#v, want int64 %d", p, v, tt.want)
		}
	}
}
