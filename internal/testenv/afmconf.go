package testenv

import (
	"fmt"
	"os"
	"strings"
)

// AFMConf is an afm.conf as the tests, the soak and the benchmarks write
// one: the keys they set, section by section, rendered by String as the INI
// text the manager reads. A key left empty is not written, nor a section
// without a line: the manager's default holds.
type AFMConf struct {
	// [api]
	Listen string
	Token  string
	API    []string // further [api] lines, "key = value"

	// [database]
	Connection string
	Database   []string

	// [opensm]
	ConfigDir string
	EnvFile   string
	OpenSM    []string

	// [opensm_conf]
	GUID       string
	OpenSMConf []string

	// Sections follow, in their order: [ha], [log], [ufm_pkeys],
	// [fabric:name], ...
	Sections []Section
}

// Section is one more section of an AFMConf.
type Section struct {
	Name  string // without brackets: "ha", "fabric:storage"
	Lines []string
}

// String is c as the text of afm.conf.
func (c AFMConf) String() string {
	var b strings.Builder
	section := func(name string, lines []string) {
		var kept []string
		for _, l := range lines {
			if l != "" {
				kept = append(kept, l)
			}
		}
		if len(kept) == 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s\n", name, strings.Join(kept, "\n"))
	}
	section("api", append([]string{key("listen", c.Listen), key("token", c.Token)}, c.API...))
	section("database", append([]string{key("connection", c.Connection)}, c.Database...))
	section("opensm", append([]string{key("config_dir", c.ConfigDir), key("env_file", c.EnvFile)}, c.OpenSM...))
	section("opensm_conf", append([]string{key("guid", c.GUID)}, c.OpenSMConf...))
	for _, s := range c.Sections {
		section(s.Name, s.Lines)
	}
	return b.String()
}

// Write writes c to path, readable by its owner alone: it holds the API
// token.
func (c AFMConf) Write(path string) error {
	if err := os.WriteFile(path, []byte(c.String()), 0o600); err != nil {
		return fmt.Errorf("write afm.conf: %w", err)
	}
	return nil
}

// key is the line "name = value", or none when value is empty.
func key(name, value string) string {
	if value == "" {
		return ""
	}
	return name + " = " + value
}
