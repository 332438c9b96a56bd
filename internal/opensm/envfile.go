package opensm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ReadEnvFile reads KEY=VALUE lines, the format of an exec environment. Blank
// lines and lines starting with # are skipped; values are taken as written (no
// quotes are removed), so the file also works with a shell's "set -a; . FILE".
func ReadEnvFile(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("environment file: %w", err)
	}
	var env []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok || !envName.MatchString(name) {
			return nil, fmt.Errorf("environment file %s line %d: want NAME=VALUE", path, n)
		}
		env = append(env, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("environment file %s: %w", path, err)
	}
	return env, nil
}
