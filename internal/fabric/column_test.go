package fabric

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"testing"
)

// The column forms are what the three engines' drivers hand over: text as a
// string (pgx, SQLite) or bytes (MariaDB), integers as int64 or int32.
func TestColumnScan(t *testing.T) {
	checkColumnScan(t, []columnCase[GUID]{
		{"0x0002c90300001039", 0x0002c90300001039, ""},
		{[]byte("0x248a070300b1c2d4"), 0x248a070300b1c2d4, ""},
		{"248a070300b1c2d4", 0, "want 0x"},
		{int64(5), 0, "want text"},
	}, func(g GUID) driver.Value { return g.String() }) // its canonical text
	checkColumnScan(t, []columnCase[PKey]{
		{int64(0x65), 0x65, ""},
		{int32(0x7ffe), 0x7ffe, ""},
		{[]byte("16"), 0x10, ""},
		{int64(-1), 0, "out of range"},
		{int64(0x10000), 0, "out of range"},
		{"101", 0, "want an integer"},
	}, func(p PKey) driver.Value { return int64(p) })
}

// columnCase is a column's form as a driver hands it over, and what Scan
// makes of it: want, or an error containing wantErr.
type columnCase[T any] struct {
	src     any
	want    T
	wantErr string
}

// checkColumnScan scans each case's source into a T, and checks that a T
// scanned gives wantValue back as the value the store writes.
func checkColumnScan[T interface {
	comparable
	fmt.Stringer
	driver.Valuer
}, P interface {
	*T
	sql.Scanner
}](t *testing.T, cases []columnCase[T], wantValue func(T) driver.Value) {
	t.Helper()
	for _, tt := range cases {
		var got T
		err := P(&got).Scan(tt.src)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%T.Scan(%#v) = %v, want an error with %q", got, tt.src, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%T.Scan(%#v) = %s, %v; want %s", got, tt.src, got, err, tt.want)
		}
		if v, _ := got.Value(); v != wantValue(tt.want) {
			t.Errorf("%T(%s).Value() = %#v, want %#v", got, got, v, wantValue(tt.want))
		}
	}
}
