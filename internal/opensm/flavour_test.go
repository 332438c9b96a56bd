package opensm

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/e2e/fabricsim"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		file        string
		wantFlavour fabric.Flavour
		wantVersion string
		wantOK      bool
	}{
		{"version-upstream-3.3.23.txt", fabric.Upstream, "OpenSM 3.3.23", true},
		{"version-nvidia-5.21.12.txt", fabric.NVIDIA, "OpenSM 5.21.12.MLNX20250617.f74e01b8", true},
		{"version-unknown.txt", fabric.Upstream, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			f, version, ok := ParseVersion(out)
			if f != tt.wantFlavour || version != tt.wantVersion || ok != tt.wantOK {
				t.Errorf("ParseVersion = %v, %q, %v; want %v, %q, %v", f, version, ok, tt.wantFlavour, tt.wantVersion, tt.wantOK)
			}
		})
	}
	// Versions that are neither 3.x nor 5.x and above are not known.
	for _, text := range []string{"OpenSM 4.9.0.MLNX20170523\n", "OpenSM 2.0\n", "OpenSM\n", "NotOpenSM 3.3.23\n"} {
		if f, _, ok := ParseVersion([]byte(text)); ok || f != fabric.Upstream {
			t.Errorf("ParseVersion(%q) = %v, ok %v; want upstream, not ok", text, f, ok)
		}
	}
}

// printing returns a command that prints the testdata file and ignores the
// --version that DetectFlavour appends.
func printing(t *testing.T, file string) []string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"sh", "-c", `cat "$0"`, path}
}

func TestDetectFlavour(t *testing.T) {
	ctx := t.Context()
	opensm := fabricsim.RequireProgram(t, "opensm", "opensm")
	if f, err := DetectFlavour(ctx, []string{opensm}); err != nil || f != fabric.Upstream {
		t.Errorf("the installed OpenSM (Debian's upstream build): %v, %v; want upstream", f, err)
	}
	if f, err := DetectFlavour(ctx, printing(t, "version-nvidia-5.21.12.txt")); err != nil || f != fabric.NVIDIA {
		t.Errorf("fabric.NVIDIA's version text: %v, %v; want nvidia", f, err)
	}

	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	if f, err := DetectFlavour(ctx, printing(t, "version-unknown.txt")); err != nil || f != fabric.Upstream {
		t.Errorf("unknown version text: %v, %v; want upstream and no error", f, err)
	}
	if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "opensm (wrapper) build") {
		t.Errorf("no warning quoting the unknown output: %q", logged.String())
	}

	for _, command := range [][]string{nil, {filepath.Join(t.TempDir(), "no-such-opensm")}, {"sh", "-c", "exit 0"}} {
		if f, err := DetectFlavour(ctx, command); err == nil {
			t.Errorf("DetectFlavour(%q) = %v and no error", command, f)
		}
	}
}
