package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithoutOneMember(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"the first of two", "in.txt", "out.txt"},
		{"a lone member is kept, the next partition's first goes", "lone.txt", "lone-out.txt"},
		{"only lone members: the first partition's goes", "only-lone.txt", "only-lone-out.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readAlone(t, tc.in)
			got, err := withoutOneMember(in)
			if err != nil {
				t.Fatal(err)
			}
			if want := readAlone(t, tc.want); got != want {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
	if _, err := withoutOneMember(readAlone(t, "none.txt")); err == nil || !strings.Contains(err.Error(), "no partition has a member") {
		t.Errorf("a file with no member to take out: %v", err)
	}
}

func readAlone(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "alone", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
