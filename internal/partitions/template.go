package partitions

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
	gonjaparser "github.com/nikolalohinski/gonja/v2/parser"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// Template is a Jinja template of the partitions file ([opensm] partitions_template),
// run in a sandbox: it sees only the variables docs/partitions-template.md lists,
// cannot include, import or extend other templates (so it reads no file), and its
// output and running time are bounded. A Template may be used concurrently.
//
// What a template renders is not trusted: Check must pass before it is written.
type Template struct {
	name      string // for errors: the file it was read from, or "built-in"
	tpl       *exec.Template
	maxOutput int           // bytes
	timeout   time.Duration // per Render
	// builtin: the built-in template, which Render writes without the
	// template engine (writeBuiltin): the same bytes, a fraction of the
	// time, on the path of every change.
	builtin bool
}

const (
	// maxTemplateOutput bounds a rendered file. The largest fabric we plan for
	// (50,000 ports) renders to under 2 MiB, and OpenSM reads the whole file on
	// every heavy sweep.
	maxTemplateOutput = 64 << 20
	// templateTimeout bounds one rendering; the largest fabric takes tens of
	// milliseconds.
	templateTimeout = 10 * time.Second
	// maxRangeLength bounds range(): enough to loop over every pkey, not enough to
	// keep a core busy for long.
	maxRangeLength = 1 << 20
)

//go:embed templates/partitions.conf.j2
var builtinText []byte

var builtinTemplate = sync.OnceValue(func() *Template {
	t, err := ParseTemplate("built-in", builtinText)
	if err != nil {
		panic(fmt.Sprintf("partitions: the built-in template does not parse: %v", err))
	}
	t.builtin = true
	return t
})

// BuiltinTemplate is the template used when [opensm] partitions_template is not set:
//
//	# Written by alternative-fabric-manager from revision <R>. Do not edit: ...
//	<DefaultPartition, as is>
//	net-<pkey>-<network ID>=<pkey>, ipoib :
//	    <GUID>=full,
//	    <GUID>=full ;
//	flat=<flat pkey> : ;
//
// one statement per network, in pkey order, members in GUID order, then the flat
// partition's; a partition without ports is written "<name>=<pkey> : ;", without
// the ipoib flag (see ipoibFlag).
func BuiltinTemplate() *Template { return builtinTemplate() }

// templateID is the only name the sandbox's loader knows: the template itself.
const templateID = "partitions.conf.j2"

// ParseTemplate parses a Jinja template. name says where it comes from (a file
// name) in errors, which also give the line.
func ParseTemplate(name string, text []byte) (*Template, error) {
	loader := singleTemplateLoader{text: string(text)}
	tpl, err := exec.NewTemplate(templateID, templateConfig(), loader, sandbox())
	if err != nil {
		// gonja's message quotes the whole template before the parser's error.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		for _, tag := range []string{"include", "import", "from", "extends"} {
			if strings.Contains(err.Error(), "ControlStructure '"+tag+"' not found") {
				return nil, fmt.Errorf("partitions template %s: %w (a partitions template cannot load other templates)", name, err)
			}
		}
		for _, tag := range []string{"macro", "call"} {
			if strings.Contains(err.Error(), "ControlStructure '"+tag+"' not found") {
				return nil, fmt.Errorf("partitions template %s: %w (a partitions template has no macros: "+
					"a macro calling itself would crash the manager; use a for loop)", name, err)
			}
		}
		return nil, fmt.Errorf("partitions template %s: %w", name, err)
	}
	return &Template{name: name, tpl: tpl, maxOutput: maxTemplateOutput, timeout: templateTimeout}, nil
}

// templateConfig is Jinja's syntax, with the whitespace control that suits a line
// based file: a block tag's line leaves no blank line or indentation behind
// (trim_blocks, lstrip_blocks), and the final newline is kept. Undefined variables
// are errors, so that a misspelt name fails instead of rendering as nothing.
func templateConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	c.KeepTrailingNewline = true
	c.StrictUndefined = true
	return c
}

// sandbox is gonja's environment without the tags that load other templates
// (include, import, from, extends): a template is one file, read once, and can
// read no other. Nor has it macros (macro, call): a macro that calls itself
// overflows the goroutine's stack, which no Go program survives, so the
// manager would crash on a template mistake. Its globals are gonja's pure functions; range is replaced at
// each rendering by a bounded one.
func sandbox() *exec.Environment {
	allowed := map[string]gonjaparser.ControlStructureParser{}
	for _, name := range []string{"autoescape", "block", "filter", "for", "if", "raw", "set", "with", "do", "break", "continue", "trans"} {
		if p, ok := builtins.ControlStructures.Get(name); ok {
			allowed[name] = p
		}
	}
	globals := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	globals.Set("range", nil) // set per rendering; see boundedRange
	return &exec.Environment{
		Context:           globals,
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: exec.NewControlStructureSet(allowed),
		Methods:           builtins.Methods,
	}
}

// singleTemplateLoader knows one template, the one being parsed, and no file.
type singleTemplateLoader struct{ text string }

func (l singleTemplateLoader) Read(path string) (io.Reader, error) {
	if path != templateID {
		return nil, fmt.Errorf("template %q: a partitions template cannot load other templates", path)
	}
	return strings.NewReader(l.text), nil
}

func (l singleTemplateLoader) Resolve(path string) (string, error) {
	if path != templateID {
		return "", fmt.Errorf("template %q: a partitions template cannot load other templates", path)
	}
	return path, nil
}

func (l singleTemplateLoader) Inherit(string) (loaders.Loader, error) { return l, nil }

// Render renders the partitions file of s. It first refuses (with an *Error) a state
// whose file Check would refuse whatever the template (see validateState); a template
// that fails, writes more than 64 MiB or runs longer than 10 s (or than ctx
// allows) is an error naming the template. The result must still pass Check(·, s)
// before it is written: a template can write anything.
//
// gonja cannot be interrupted: on timeout the rendering is abandoned, and stops
// at its next write or range() step. A template can still make the manager
// allocate much memory (for example "x" * 10**10): it is configuration, trusted
// like the rest of afm.conf.
func (t *Template) Render(ctx context.Context, s State) ([]byte, error) {
	if err := validateState(s); err != nil {
		return nil, err
	}
	if t.builtin {
		return t.writeBuiltin(ctx, templateVariables(s))
	}
	return t.execute(ctx, templateVariables(s))
}

// writeBuiltin writes what the built-in template renders of vars, as the
// template engine would (TestBuiltinWrittenAsRendered compares the two):
// the engine's walk of the template took most of a render's time, on the
// path of every change, and the built-in template is all but fixed text.
// vars are templateVariables', so that the values are written as any
// template sees them.
func (t *Template) writeBuiltin(ctx context.Context, vars map[string]any) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("partitions template %s: %w", t.name, err)
	}
	networks, _ := vars["networks"].([]any)
	kubernetes, _ := vars["kubernetes"].([]any)
	adopted, _ := vars["adopted"].([]any)
	flat, _ := vars["flat"].(map[string]any)
	size := 256 + len(vars["default_partition"].(string)) + len(flat["members_text"].(string))
	for _, list := range [][]any{networks, kubernetes} {
		for _, p := range list {
			size += 64 + len(p.(map[string]any)["members_text"].(string))
		}
	}
	for _, a := range adopted {
		size += 1 + len(a.(map[string]any)["text"].(string))
	}
	b := make([]byte, 0, size)
	b = append(b, "# Written by alternative-fabric-manager from revision "...)
	b = strconv.AppendInt(b, vars["revision"].(int64), 10)
	b = append(b, ". Do not edit: it is rewritten from the database.\n"...)
	b = append(b, vars["default_partition"].(string)...)
	b = append(b, '\n')
	header := func(p map[string]any, flags string) {
		b = append(b, p["name"].(string)...)
		b = append(b, '=')
		b = append(b, p["pkey"].(string)...)
		b = append(b, flags...)
		b = append(b, " :"...)
		b = append(b, p["members_text"].(string)...)
		b = append(b, " ;\n"...)
	}
	for _, n := range networks {
		p := n.(map[string]any)
		header(p, p["flags"].(string))
	}
	header(flat, flat["flags"].(string))
	for _, k := range kubernetes {
		p := k.(map[string]any)
		header(p, p["flags"].(string))
	}
	for _, a := range adopted {
		b = append(b, a.(map[string]any)["text"].(string)...)
		b = append(b, '\n')
	}
	if len(b) > t.maxOutput {
		return nil, fmt.Errorf("partitions template %s: output exceeds %d MiB", t.name, t.maxOutput>>20)
	}
	return b, nil
}

func (t *Template) execute(ctx context.Context, vars map[string]any) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	vars["range"] = boundedRange(rctx)
	out := &boundedWriter{ctx: rctx, max: t.maxOutput}
	done := make(chan error, 1) // buffered: an abandoned rendering must not block
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("rendering failed: %v", r)
			}
		}()
		done <- t.tpl.Execute(out, exec.NewContext(vars))
	}()
	select {
	case err := <-done:
		if out.err != nil {
			err = out.err
		} else if err != nil {
			err = errors.New(strings.TrimPrefix(err.Error(), "unable to execute template: "))
		}
		if err != nil {
			return nil, fmt.Errorf("partitions template %s: %w", t.name, err)
		}
		return out.buf, nil
	case <-rctx.Done():
		if ctx.Err() != nil {
			return nil, fmt.Errorf("partitions template %s: %w", t.name, ctx.Err())
		}
		return nil, fmt.Errorf("partitions template %s: rendering took longer than %s", t.name, t.timeout)
	}
}

// boundedWriter collects the output, refusing it past max bytes or once the
// rendering is abandoned.
type boundedWriter struct {
	ctx context.Context
	max int
	buf []byte
	err error
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	switch {
	case w.err != nil:
	case w.ctx.Err() != nil:
		w.err = w.ctx.Err()
	case len(w.buf)+len(p) > w.max:
		w.err = fmt.Errorf("output exceeds %d MiB", w.max>>20)
	default:
		w.buf = append(w.buf, p...)
		return len(p), nil
	}
	return 0, w.err
}

// boundedRange is Jinja's range([start, ]stop[, step]), refusing more than
// maxRangeLength numbers and stopping when the rendering is abandoned.
func boundedRange(ctx context.Context) func(*exec.Evaluator, *exec.VarArgs) (<-chan int, error) {
	return func(_ *exec.Evaluator, params *exec.VarArgs) (<-chan int, error) {
		var args []int
		for _, a := range params.Args {
			if !a.IsInteger() {
				return nil, errors.New("range: want integers: range([start, ]stop[, step])")
			}
			args = append(args, a.Integer())
		}
		start, stop, step := 0, 0, 1
		switch len(args) {
		case 1:
			stop = args[0]
		case 2:
			start, stop = args[0], args[1]
		case 3:
			start, stop, step = args[0], args[1], args[2]
		default:
			return nil, errors.New("range: want range([start, ]stop[, step])")
		}
		if step == 0 {
			return nil, errors.New("range: step cannot be 0")
		}
		n := 0
		if step > 0 && stop > start {
			n = (stop - start + step - 1) / step
		} else if step < 0 && start > stop {
			n = (start - stop - step - 1) / -step
		}
		if n > maxRangeLength {
			return nil, fmt.Errorf("range: %d numbers, more than the %d allowed", n, maxRangeLength)
		}
		numbers := make(chan int)
		go func() {
			defer close(numbers)
			for i, v := 0, start; i < n; i, v = i+1, v+step {
				select {
				case numbers <- v:
				case <-ctx.Done():
					return
				}
			}
		}()
		return numbers, nil
	}
}

// templateVariables is what a template sees; docs/partitions-template.md
// documents it. Networks come in pkey order, members in GUID order; GUIDs and
// pkeys are strings as the file writes them.
func templateVariables(s State) map[string]any {
	order := make([]int, len(s.Networks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return int(s.Networks[a].PKey) - int(s.Networks[b].PKey) })

	lists := make([][]fabric.GUID, 0, len(order)+1)
	for _, i := range order {
		lists = append(lists, s.Networks[i].Members)
	}
	f := newMemberFormatter(append(lists, s.Flat.Members))
	adopted := adoptedByPKey(s)
	networks := make([]any, len(order))
	for k, i := range order {
		n := &s.Networks[i]
		members, text := f.format(n.Members)
		if a := adopted[n.PKey]; a != nil {
			text = joinMembersText(text, adoptedText(a, guidSet(n.Members)))
		}
		networks[k] = map[string]any{
			"id":           n.ID,
			"name":         PartitionName(n.ID, n.PKey),
			"pkey":         n.PKey.String(),
			"flags":        ipoibFlag(text),
			"members":      members,
			"members_text": text,
		}
	}
	members, text := f.format(s.Flat.Members)
	if a := adopted[s.Flat.PKey]; a != nil {
		text = joinMembersText(text, adoptedText(a, guidSet(s.Flat.Members)))
	}
	return map[string]any{
		"revision":          s.Revision,
		"default_partition": s.DefaultPartition,
		"networks":          networks,
		"kubernetes":        kubernetesVariables(s),
		"adopted":           adoptedVariables(s),
		"flat": map[string]any{
			"name":         FlatPartitionName,
			"pkey":         s.Flat.PKey.String(),
			"flags":        ipoibFlag(text),
			"members":      members,
			"members_text": text,
		},
	}
}

// ipoibFlag is the header flag of a partition whose members are membersText:
// ", ipoib", or "" while it has no member. OpenSM creates a partition's IPoIB
// broadcast group when it reads its statement, and drops a partition without
// members, group and all, in the same pass. An empty partition with the flag
// therefore creates and deletes a multicast group on every heavy sweep, which
// marks OpenSM's SA database changed: OpenSM then rewrites and fsyncs
// opensm-sa.dump after every sweep, while the manager reads its ports back
// and commits its jobs. Without the flag an empty partition's statement still
// changes no port, as it did with it; its first member brings the flag back.
func ipoibFlag(membersText string) string {
	if membersText == "" {
		return ""
	}
	return ", ipoib"
}

// kubernetesVariables are the Kubernetes partitions as a template sees them,
// in pkey order, members in GUID order: name, pkey, ipoib and index0 (booleans),
// mtu, rate and sl (the IBTA codes of its QoS; 0 when it has none), flags (the
// header's flags as the built-in template writes them after the pkey: "",
// ", ipoib", ", indx0, ipoib, mtu=4, rate=2, sl=0"...), members (each a guid and a
// membership) and members_text (as a network's, with each member's
// membership).
func kubernetesVariables(s State) []any {
	adopted := adoptedByPKey(s)
	parts := slices.Clone(s.Kubernetes)
	slices.SortFunc(parts, func(a, b KubernetesPartition) int { return int(a.PKey) - int(b.PKey) })
	out := make([]any, len(parts))
	for i, k := range parts {
		ms := slices.Clone(k.Members)
		slices.SortFunc(ms, func(a, b KubernetesMember) int { return cmp.Compare(a.GUID, b.GUID) })
		members := make([]any, len(ms))
		var text []byte
		for j, m := range ms {
			guid := string(appendGUID(nil, m.GUID))
			members[j] = map[string]any{"guid": guid, "membership": string(m.Membership)}
			text = append(text, "\n    "...)
			text = append(text, guid...)
			text = append(text, '=')
			text = append(text, m.Membership...)
			if j < len(ms)-1 {
				text = append(text, ',')
			}
		}
		if a := adopted[k.PKey]; a != nil {
			own := make(map[fabric.GUID]bool, len(ms))
			for _, m := range ms {
				own[m.GUID] = true
			}
			text = []byte(joinMembersText(string(text), adoptedText(a, own)))
		}
		index0 := k.Index0(s.Rules.Flavour)
		flags := ""
		if index0 {
			flags += ", indx0"
		}
		if k.IPoIB {
			flags += ipoibFlag(string(text))
		}
		mtu, rate, sl := 0, 0, 0
		if k.HasQoS() {
			mtu, rate, sl = k.QoS.MTUCode(), k.QoS.RateCode(), k.QoS.ServiceLevel
			flags += fmt.Sprintf(", mtu=%d, rate=%d, sl=%d", mtu, rate, sl)
		}
		out[i] = map[string]any{
			"name":         KubernetesPartitionName(k.PKey),
			"pkey":         k.PKey.String(),
			"ipoib":        k.IPoIB,
			"index0":       index0,
			"mtu":          mtu,
			"rate":         rate,
			"sl":           sl,
			"flags":        flags,
			"members":      members,
			"members_text": string(text),
		}
	}
	return out
}

// memberFormatter writes every partition's members_text into one string, and
// their GUIDs as substrings of it: two allocations for the whole fabric instead of
// one per port, which matters at 50,000 ports.
type memberFormatter struct {
	text   string // every partition's members_text, one after another
	offset int    // where the next partition's begins
}

// memberLine is the length of "\n    0x0123456789abcdef=full,".
const memberLine = 5 + 18 + 6

func newMemberFormatter(partitions [][]fabric.GUID) *memberFormatter {
	total := 0
	for _, members := range partitions {
		total += len(members)
	}
	b := make([]byte, 0, total*memberLine)
	guids := make([]fabric.GUID, 0, total)
	for _, members := range partitions {
		start := len(guids)
		guids = append(guids, members...)
		sorted := guids[start:]
		slices.Sort(sorted)
		for i, g := range sorted {
			b = append(b, "\n    "...)
			b = appendGUID(b, g)
			b = append(b, "=full"...)
			if i < len(sorted)-1 {
				b = append(b, ',')
			}
		}
	}
	return &memberFormatter{text: string(b)}
}

// format returns the next partition's members (asked for in the order given to
// newMemberFormatter) and their text.
func (f *memberFormatter) format(members []fabric.GUID) ([]string, string) {
	n := len(members)
	if n == 0 {
		return []string{}, ""
	}
	size := n*memberLine - 1 // no ',' after the last
	text := f.text[f.offset : f.offset+size]
	guids := make([]string, n)
	for i := range guids {
		at := i*memberLine + 5
		guids[i] = text[at : at+18]
	}
	f.offset += size
	return guids, text
}
