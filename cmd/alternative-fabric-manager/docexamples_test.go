package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// binary is the command's name as the docs run it.
const binary = "alternative-fabric-manager"

// docCommand is one command line of a doc that runs the manager: where it
// is and the arguments the manager gets.
type docCommand struct {
	where string // "docs/x.md:12", the line it starts on
	args  []string
}

// docCommands returns the manager's command lines in the ```sh and untagged
// blocks of README.md and docs/*.md (the untagged ones hold commands too,
// and their output), and in their text's code spans.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []docCommand
	for _, path := range append(docs, filepath.Join("..", "..", "README.md")) {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(filepath.Join("..", ".."), path)
		out = append(out, commandsOf(filepath.ToSlash(name), string(text))...)
		out = append(out, spanCommands(filepath.ToSlash(name), string(text))...)
	}
	return out
}

// commandsOf returns the manager's command lines in doc's shell blocks,
// continuation lines joined. In a block whose commands have a "$ " prompt,
// the lines without one are their output.
func commandsOf(name, doc string) []docCommand {
	var out []docCommand
	for _, b := range shellBlocks(doc) {
		prompted := slices.ContainsFunc(b.lines, func(l string) bool { return strings.HasPrefix(l, "$ ") })
		line, start := "", 0
		for i, text := range b.lines {
			if line == "" {
				start = b.first + i
			}
			text, more := strings.CutSuffix(text, "\\")
			line += " " + text
			if more {
				continue
			}
			if args, ok := managerArgs(line); ok && (!prompted || strings.HasPrefix(line, " $ ")) {
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, start), args: args})
			}
			line = ""
		}
	}
	return out
}

// codeSpan is a `code span` of a line.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// spanCommands returns the manager's command lines that doc gives in its
// text's code spans ("run `alternative-fabric-manager --config-file ...
// --render`"), an operator's to copy as much as a block's.
func spanCommands(name, doc string) []docCommand {
	var out []docCommand
	for i, line := range strings.Split(doc, "\n") {
		for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
			args, ok := managerArgs(m[1])
			// The name alone is the container's or the command's name; "..."
			// alone, the arguments left out.
			if ok && len(args) > 0 && !slices.Equal(args, []string{"..."}) {
				out = append(out, docCommand{where: fmt.Sprintf("%s:%d", name, i+1), args: args})
			}
		}
	}
	return out
}

// shellBlock is a ```sh or untagged block: its lines, trimmed, and the line
// number of the first.
type shellBlock struct {
	first int
	lines []string
}

func shellBlocks(doc string) []shellBlock {
	var (
		out     []shellBlock
		current *shellBlock
	)
	for i, raw := range strings.Split(doc, "\n") {
		fence := strings.TrimSpace(raw)
		switch {
		case current == nil && (fence == "```sh" || fence == "```"):
			current = &shellBlock{first: i + 2}
		case current != nil && fence == "```":
			out = append(out, *current)
			current = nil
		case current != nil:
			current.lines = append(current.lines, fence)
		}
	}
	return out
}

// dockerValueOptions are the options of docker run and docker create the
// docs use that take a value.
var dockerValueOptions = []string{"--name", "--restart", "--network", "--device", "--cap-drop", "--security-opt",
	"-v", "-e", "-p", "--env-file", "--entrypoint"}

// managerArgs returns the arguments line gives the manager: run as a
// command ("$ " prompt allowed), in its container (docker exec), or as its
// image's entrypoint (docker run); ok is false for any other line.
func managerArgs(line string) (args []string, ok bool) {
	if before, _, found := strings.Cut(line, " #"); found {
		line = before // a comment
	}
	words := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	switch {
	case len(words) > 0 && words[0] == binary:
		return words[1:], true
	case len(words) > 3 && words[0] == "docker" && words[1] == "exec" && words[3] == binary:
		return words[4:], true
	case len(words) > 2 && words[0] == "docker" && (words[1] == "run" || words[1] == "create"):
		return imageArgs(words[2:])
	}
	return nil, false
}

// imageArgs returns what follows the manager's image in docker run's
// words, unless another entrypoint runs.
func imageArgs(words []string) ([]string, bool) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "--entrypoint" && i+1 < len(words) && words[i+1] != binary:
			return nil, false
		case slices.Contains(dockerValueOptions, w):
			i++
		case strings.HasPrefix(w, "-"):
		default:
			image, _, _ := strings.Cut(w[strings.LastIndex(w, "/")+1:], ":")
			return words[i+1:], image == binary
		}
	}
	return nil, false
}

// variants are args with its optional parts ("[--json]") left out, and
// with all of them given.
func variants(args []string) [][]string {
	var without, with []string
	optional := false
	for _, a := range args {
		opens, closes := strings.HasPrefix(a, "["), strings.HasSuffix(a, "]")
		a = strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if opens {
			optional = true
		}
		if !optional {
			without = append(without, a)
		}
		with = append(with, a)
		if closes {
			optional = false
		}
	}
	if slices.Equal(without, with) {
		return [][]string{with}
	}
	return [][]string{without, with}
}

// checkCommandLine parses args with the manager's own flag set, without
// running anything, and applies the manager's usage rules: every flag
// exists, a flag that takes a value is given one (not the next flag), and
// the flags go together.
func checkCommandLine(args []string) error {
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	var shape error
	fs.Visit(func(fl *flag.Flag) {
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			return
		}
		if v := fl.Value.String(); strings.HasPrefix(v, "-") {
			shape = errors.Join(shape, fmt.Errorf("--%s takes %q, a flag, as its value", fl.Name, v))
		}
	})
	if shape != nil {
		return shape
	}
	return usage(f)
}

// Every command line of the docs that runs the manager parses with its flag
// set and passes its usage rules, with and without its optional parts; and
// the check refuses what the manager refuses.
func TestDocCommands(t *testing.T) {
	commands := docCommands(t)
	if len(commands) < 20 {
		t.Fatalf("%d command lines found in the docs: the extraction lost some", len(commands))
	}
	for _, c := range commands {
		t.Run(c.where, func(t *testing.T) {
			for _, args := range variants(c.args) {
				if err := checkCommandLine(args); err != nil {
					t.Errorf("%s: %s %s: %v", c.where, binary, strings.Join(args, " "), err)
				}
			}
		})
	}
	for _, bad := range []string{
		binary + " --config-file afm.conf --stat",
		binary + " --config-file afm.conf --move-physnet --dry-run",
		binary + " --config-file afm.conf --status storage",
		binary + " --config-file afm.conf --migrate --fabric storage",
		binary + " --config-file afm.conf --status --prune",
		"docker exec afm " + binary + " --status --confirm-switches",
		"docker run --rm -v /etc:/etc:ro registry.example.com/afm/" + binary + ":1.2.3 --migrat",
	} {
		args, ok := managerArgs(bad)
		if !ok {
			t.Errorf("%q is not read as the manager's command line", bad)
			continue
		}
		if err := checkCommandLine(args); err == nil {
			t.Errorf("%q passes the check; the manager refuses it", bad)
		}
	}
}
