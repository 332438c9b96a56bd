package mysql

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/driver"
)

// dsnCase is a DSN and what a default decided from it should be.
type dsnCase struct {
	dsn  string
	want bool
}

// checkDSNs asserts that decide, the default called name, gives each case's want.
func checkDSNs(t *testing.T, name string, decide func(dsn string) bool, tests []dsnCase) {
	t.Helper()
	for _, tc := range tests {
		if got := decide(tc.dsn); got != tc.want {
			t.Errorf("%s(%q) = %v, want %v", name, tc.dsn, got, tc.want)
		}
	}
}

func TestInterpolateByDefault(t *testing.T) {
	checkDSNs(t, "interpolateByDefault", interpolateByDefault, []dsnCase{
		{"afm:pw@tcp(db:3306)/afm?parseTime=true", true},
		{"afm:pw@tcp(db:3306)/afm", true},
		{"afm:pw@tcp(db:3306)/afm?charset=utf8mb4", true},
		{"afm:pw@tcp(db:3306)/afm?charset=latin1,utf8", true},
		{"afm:pw@tcp(db:3306)/afm?collation=utf8mb4_unicode_ci", true},
		{"afm:pw@tcp(db:3306)/afm?charset=gbk", false},
		{"afm:pw@tcp(db:3306)/afm?charset=utf8mb4,sjis", false},
		{"afm:pw@tcp(db:3306)/afm?collation=big5_chinese_ci", false},
		// The DSN's own choice stands (false is kept; true needs no help).
		{"afm:pw@tcp(db:3306)/afm?interpolateParams=false", false},
		{"afm:pw@tcp(db:3306)/afm?interpolateParams=true", false},
		// The parameters are the ones after the last '/': a '?' in the password is not a query.
		{"afm:p?charset=gbk/x@tcp(db:3306)/afm", true},
		{"afm:p?x@tcp(db:3306)/afm?charset=cp932", false},
	})
}

func TestPipelineByDefault(t *testing.T) {
	// The configuration Open gives pipelineByDefault: the DSN's, with
	// interpolation on by default.
	pipeline := func(dsn string) bool {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		if interpolateByDefault(dsn) {
			cfg.InterpolateParams = true
		}
		return pipelineByDefault(dsn, cfg)
	}
	checkDSNs(t, "pipelineByDefault", pipeline, []dsnCase{
		{"afm:pw@tcp(db:3306)/afm?parseTime=true", true},
		{"afm:pw@tcp(db:3306)/afm?multiStatements=true", true},
		{"afm:pw@tcp(db:3306)/afm?interpolateParams=true", true},
		// The DSN's own choice stands.
		{"afm:pw@tcp(db:3306)/afm?multiStatements=false", false},
		// Without interpolation a statement with arguments is prepared, and
		// a prepared statement is one statement.
		{"afm:pw@tcp(db:3306)/afm?interpolateParams=false", false},
		{"afm:pw@tcp(db:3306)/afm?charset=gbk", false},
	})
}

func TestApplierLockName(t *testing.T) {
	if got := applierLock("afm"); got != "afm-applier/afm" {
		t.Errorf("applierLock(afm) = %q", got)
	}
	long := strings.Repeat("d", 64)
	got := applierLock(long)
	if len(got) != 64 || got == applierLock(long[:63]+"e") || !strings.HasPrefix(got, "afm-applier/") {
		t.Errorf("applierLock of a 64-character name = %q (%d characters): want 64, distinct per database", got, len(got))
	}
}

// A change's held statements go in one query, built while the change holds
// its locks: the query and its arguments are allocated once each, not
// grown statement by statement.
func TestJoinedAllocatesOnce(t *testing.T) {
	held := []driver.HeldStatement{
		{SQL: driver.SavepointName},
		{SQL: "UPDATE job_ids SET n = n + 1 WHERE id = 1"},
		{SQL: strings.Repeat("INSERT INTO jobs VALUES (?) ", 20), Args: []any{1}},
		{SQL: strings.Repeat("INSERT INTO job_places VALUES (?, ?) ", 10), Args: []any{"default", "[]"}},
	}
	then := driver.HeldStatement{SQL: "SELECT ?", Args: []any{2}}
	allocs := testing.AllocsPerRun(100, func() {
		query, args := joined(slices.Clone(held), then)
		if len(args) != 4 || !strings.HasSuffix(query, ";\nSELECT ?") {
			t.Fatalf("joined: %q %v", query, args)
		}
	})
	// The clone of held (the test's), the query and the arguments.
	if allocs > 3 {
		t.Errorf("joining %d statements: %v allocations, want 3", len(held)+1, allocs)
	}
}
