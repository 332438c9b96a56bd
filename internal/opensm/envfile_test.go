package opensm

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadEnvFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
		wantErr string
	}{
		{
			name:    "lines, blanks and comments",
			content: "# fabric\nLD_PRELOAD=/usr/lib/umad2sim/libumad2sim.so\n\n  SIM_HOST=SM  \nEMPTY=\nX=a=b\n",
			want:    []string{"LD_PRELOAD=/usr/lib/umad2sim/libumad2sim.so", "SIM_HOST=SM", "EMPTY=", "X=a=b"},
		},
		{name: "empty file", content: ""},
		{name: "no equals sign", content: "SIM_HOST\n", wantErr: "line 1"},
		{name: "bad name", content: "A=1\nexport B=2\n", wantErr: "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "env")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadEnvFile(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := ReadEnvFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("no error for a missing file")
	}
}
