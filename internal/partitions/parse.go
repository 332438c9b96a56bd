package partitions

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// maxLineBytes is the shortest physical line (newline not counted) that Parse
// refuses. OpenSM reads lines with fgets into 4095 usable bytes: a longer line is
// cut into pieces parsed separately, and a GUID cut in two becomes another GUID.
const maxLineBytes = 4094

// Parse reads a partitions file, accepting only the part of OpenSM's grammar in
// which OpenSM does exactly what the text says. Compared with OpenSM it refuses:
//
//   - an empty file, or one with only comments or blank lines;
//   - tabs, control characters (carriage returns included) and non-ASCII bytes, even
//     in comments, and lines of maxLineBytes bytes or more;
//   - a header without its ":" on the same line, a ";" that begins a line, a
//     statement without its final ";";
//   - names not matching [A-Za-z][A-Za-z0-9_.-]{0,30}; pkeys not written 0x and 1 to
//     4 hex digits, outside 0x0001-0x7fff, or missing; 0x7fff under another name than
//     Default, and Default with another pkey; a pkey or a name used twice;
//   - header flags other than ipoib, defmember=full|limited, mtu=1..5, rate=2..24,
//     sl=0..15, scope=1..15 (and indx0 for NVIDIA's OpenSM, see ParseFor), written
//     in full and in lower case, or given twice;
//   - members other than 0x and 16 hex digits (not zero) or a keyword in full;
//     ALL_VCAS, which only NVIDIA's OpenSM knows (see ParseFor); a membership other than "=full" or "=limited" written out; a member
//     listed twice; ALL, ALL_CAS, ALL_VCAS, ALL_SWITCHES or ALL_ROUTERS after a GUID or SELF
//     (OpenSM applies members in order, so the keyword would override them);
//   - empty items (",," or a "," before ";") and items not separated by ",";
//   - mgid= items that are not the first item of their line, end with ",", are not
//     IPv6 multicast GIDs, carry no flag (OpenSM would read flags from beyond the
//     item), unknown or repeated flags, repeat a group, or that OpenSM would skip
//     (an IPoIB group whose pkey, rate or mtu contradicts its partition's).
//
// On refusal the error is an *Error listing every problem found.
func Parse(text []byte) (*File, error) {
	return ParseFor(text, fabric.Upstream)
}

// ParseFor is Parse for a file read by the given flavour of OpenSM: NVIDIA's also
// accepts the ALL_VCAS keyword and the indx0 header flag (which Check allows only
// on the Kubernetes partitions that asked for index 0).
func ParseFor(text []byte, flavour fabric.Flavour) (*File, error) {
	src := string(text) // one copy: every name and token below is a substring of it
	if err := checkCharacters(src); err != nil {
		return nil, err
	}
	p := &parser{
		flavour:   flavour,
		pkeyLine:  make(map[fabric.PKey]int),
		nameLine:  make(map[string]int),
		groupLine: make(map[netip.Addr]int),
	}
	lineNo := 0
	for rest := src; rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		lineNo++
		p.parseLine(lineNo, line)
	}
	p.finish()
	if err := p.err(); err != nil {
		return nil, err
	}
	return &File{Statements: p.statements}, nil
}

// checkCharacters refuses, once per line, any byte OpenSM would not read as we do,
// and lines OpenSM would cut.
func checkCharacters(src string) error {
	var found problems
	line, start := 1, 0
	reported := false
	for i := 0; i <= len(src); i++ {
		if i == len(src) || src[i] == '\n' {
			if n := i - start; n >= maxLineBytes {
				found.problem(line, "line is %d bytes long: OpenSM cuts lines of %d bytes or more into pieces", n, maxLineBytes)
			}
			line, start, reported = line+1, i+1, false
			continue
		}
		c := src[i]
		if reported || (c >= ' ' && c < 0x7f) {
			continue
		}
		column := i - start + 1
		switch {
		case c == '\t':
			found.problem(line, "tab at column %d: use spaces", column)
		case c == '\r':
			found.problem(line, "carriage return at column %d: OpenSM would read it as part of a token", column)
		case c < ' ' || c == 0x7f:
			found.problem(line, "control character 0x%02x at column %d", c, column)
		default:
			found.problem(line, "non-ASCII byte 0x%02x at column %d: the file must be plain ASCII", c, column)
		}
		reported = true
	}
	return found.err()
}

type parser struct {
	problems
	flavour    fabric.Flavour
	statements []Statement
	open       *openStatement // the statement being read; nil between statements
	sawContent bool           // anything but comments and blank space

	lineHasItem bool // an item of the open statement already began on this physical line

	// File-wide indexes for the duplicate checks.
	pkeyLine  map[fabric.PKey]int
	nameLine  map[string]int
	groupLine map[netip.Addr]int
}

// bodyState is what may come next in a statement's body.
type bodyState uint8

const (
	afterColon bodyState = iota // an item, or ";" for an empty partition
	afterItem                   // "," or ";"
	afterComma                  // an item
	afterGroup                  // an mgid= item, which its line's end ends: an item, "," or ";"
)

type openStatement struct {
	Statement
	skip  bool // the header is unreadable: ignore everything up to ";"
	state bodyState
	// ascending stays true while the GUID members come in increasing order, as
	// Render writes them: then none is repeated, and no index is needed to tell.
	ascending bool
	lastGUID  fabric.GUID
	// firstSpecific is the first member naming one port (a GUID or SELF), which a
	// later ALL-type keyword would override; Line is 0 while there is none.
	firstSpecific Member
}

// parseLine reads one physical line. Like OpenSM, it drops everything from "#",
// then cuts the line at each ";": every piece before a ";" ends a statement.
func (p *parser) parseLine(n int, line string) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	p.lineHasItem = false
	rest := line
	for {
		rest = strings.TrimLeft(rest, " ")
		if rest == "" {
			return
		}
		p.sawContent = true
		piece, after, terminated := strings.Cut(rest, ";")
		switch {
		case piece == "" && p.open == nil:
			p.problem(n, "';' without a statement before it")
		case piece == "":
			// OpenSM then reads stale bytes of its line buffer and, at best, rejects the file.
			p.problem(n, "';' begins a line: OpenSM misreads such a line; put ';' after the last item, on its line")
		case p.open == nil:
			p.beginStatement(n, piece)
		default:
			p.parseBody(n, piece)
		}
		if !terminated {
			return
		}
		p.endStatement(n)
		rest = after
	}
}

func (p *parser) beginStatement(n int, piece string) {
	p.open = &openStatement{Statement: Statement{Line: n}, ascending: true}
	p.lineHasItem = false
	header, body, ok := strings.Cut(piece, ":")
	if !ok {
		p.problem(n, "no ':' after %q: a partition header and its ':' must be on one line", strings.TrimSpace(piece))
		p.open.skip = true
		return
	}
	p.parseHeader(n, header)
	p.parseBody(n, body)
}

func (p *parser) endStatement(n int) {
	o := p.open
	if o == nil {
		return
	}
	p.open = nil
	if o.skip {
		return
	}
	if o.state == afterComma {
		p.problem(n, "',' before ';' (an empty item)")
	}
	p.checkRepeatedGUIDs(o)
	p.statements = append(p.statements, o.Statement)
}

func (p *parser) finish() {
	if o := p.open; o != nil {
		p.problem(o.Line, "statement %q has no terminating ';'", o.Name)
		p.checkRepeatedGUIDs(o)
	}
	if !p.sawContent {
		p.problem(0, "no partition statement: the file is empty or holds only comments "+
			"(OpenSM would make every port a full member of the default partition)")
	}
}

// parseHeader reads "name=pkey, flag, flag=value".
func (p *parser) parseHeader(n int, header string) {
	o := p.open
	parts := strings.Split(header, ",")
	first := strings.TrimSpace(parts[0])
	name, pkeyText, hasPKey := strings.Cut(first, "=")
	name, pkeyText = strings.TrimSpace(name), strings.TrimSpace(pkeyText)
	valid := false
	switch {
	case first == "":
		p.problem(n, "partition header without a name and a pkey")
	case !hasPKey && isDigit(first[0]):
		p.problem(n, "pkey %q without a name: write name=pkey", first)
	case !hasPKey:
		p.problem(n, "partition %q has no pkey: write %s=0x...; without one OpenSM picks a pkey itself", first, first)
	default:
		valid = true
		if reason := checkName(name); reason != "" {
			p.problem(n, "%s", reason)
			valid = false
		}
		pkey, reason := parsePKey(pkeyText)
		if reason != "" {
			p.problem(n, "%s", reason)
			valid = false
		}
		switch {
		case pkey == fabric.DefaultPKey && name != "Default":
			p.problem(n, "pkey 0x7fff is the default partition's: name it Default, not %q", name)
			valid = false
		case name == "Default" && pkey != fabric.DefaultPKey && reason == "":
			p.problem(n, "Default must have pkey 0x7fff, not %s", pkey)
			valid = false
		}
		o.Name, o.PKey = name, pkey
	}
	if valid {
		// OpenSM would merge statements sharing a pkey; we never write that, so a
		// repeated pkey or name is a mistake.
		if line, dup := p.pkeyLine[o.PKey]; dup {
			p.problem(n, "pkey %s is already defined at line %d", o.PKey, line)
		} else {
			p.pkeyLine[o.PKey] = n
		}
		if line, dup := p.nameLine[o.Name]; dup {
			p.problem(n, "partition name %q is already used at line %d", o.Name, line)
		} else {
			p.nameLine[o.Name] = n
		}
	}
	for _, part := range parts[1:] {
		f, reason := parseHeaderFlag(strings.TrimSpace(part), p.flavour)
		if reason != "" {
			p.problem(n, "%s", reason)
			continue
		}
		if reason := repeatedFlag(o.Flags, f); reason != "" {
			p.problem(n, "%s", reason)
			continue
		}
		o.Flags = append(o.Flags, f)
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '.' || c == '-'
}

// checkName returns why name is not a partition name, or "".
// OpenSM truncates names to 31 characters; anything but these characters risks
// being read as syntax.
func checkName(name string) string {
	ok := len(name) >= 1 && len(name) <= 31
	if ok {
		c := name[0]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 1; ok && i < len(name); i++ {
		ok = isNameByte(name[i])
	}
	if !ok {
		return fmt.Sprintf("partition name %q: want a letter then up to 30 letters, digits, '_', '.' or '-'", name)
	}
	return ""
}

// parsePKey reads 0x and 1 to 4 hex digits. OpenSM reads any C number, then drops
// bits above 16 and the membership bit: "0x10030" would silently mean 0x0030.
func parsePKey(s string) (fabric.PKey, string) {
	h, ok := cutHexPrefix(s)
	if !ok || len(h) > 4 {
		return 0, fmt.Sprintf("pkey %q: want 0x and 1 to 4 hex digits", s)
	}
	v, ok := parseHex(h)
	switch {
	case !ok:
		return 0, fmt.Sprintf("pkey %q: want 0x and 1 to 4 hex digits", s)
	case v == 0:
		return 0, fmt.Sprintf("pkey %q: 0 means no pkey to OpenSM, which would pick one itself", s)
	case v > 0x7fff:
		return 0, fmt.Sprintf("pkey %q: above 0x7fff (the top bit is the membership bit, which OpenSM clears)", s)
	}
	return fabric.PKey(v), ""
}

// numericFlags are the flags with a number value, and their ranges. Headers take
// mtu, rate, sl and scope; mgid= items take all of them.
var numericFlags = map[string]struct{ min, max uint64 }{
	"mtu":       {1, 5},  // IBA MTU code, 1=256 .. 5=4096
	"rate":      {2, 24}, // IBA rate code
	"sl":        {0, 15}, // service level
	"scope":     {1, 15}, // multicast scope
	"Q_Key":     {0, 0xffffffff},
	"TClass":    {0, 0xff},
	"FlowLabel": {0, 0xfffff},
}

// headerFlagNames are the flags a header may carry; the others are ignored or
// misread by OpenSM in a header (Q_Key is set but reported unrecognised).
var headerFlagNames = []string{"ipoib", "defmember", "mtu", "rate", "sl", "scope"}

func parseHeaderFlag(text string, flavour fabric.Flavour) (Flag, string) {
	if text == "" {
		return Flag{}, "empty header flag (a stray ',')"
	}
	f, hasValue := splitFlag(text)
	switch f.Name {
	case "ipoib":
		if hasValue {
			return Flag{}, fmt.Sprintf("flag %q: ipoib takes no value", text)
		}
		return f, ""
	case "defmember":
		if f.Value != string(Full) && f.Value != string(Limited) {
			return Flag{}, fmt.Sprintf("flag %q: want defmember=full or defmember=limited", text)
		}
		return f, ""
	case "mtu", "rate", "sl", "scope":
		return f, checkNumericFlag(f, hasValue)
	case "indx0":
		// On NVIDIA's OpenSM a Kubernetes pod's virtual port has a pkey table of
		// its own, whose index 0 is the pod's interface: Check allows indx0 on
		// the Kubernetes partitions that asked for it, and nowhere else.
		if flavour == fabric.NVIDIA && !hasValue {
			return f, ""
		}
		return Flag{}, "flag indx0 is refused: it takes index 0 of every member's pkey table, which IPoIB's parent interface uses for the default partition"
	}
	return Flag{}, unknownFlag(f.Name, headerFlagNames, "header")
}

// parseGroupFlag reads a group flag of an mgid= item.
func parseGroupFlag(text string) (Flag, string) {
	if text == "" {
		return Flag{}, "empty mgid flag (a stray ',')"
	}
	f, hasValue := splitFlag(text)
	if _, ok := numericFlags[f.Name]; ok {
		return f, checkNumericFlag(f, hasValue)
	}
	reason := unknownFlag(f.Name, []string{"mtu", "rate", "sl", "scope", "Q_Key", "TClass", "FlowLabel"}, "mgid")
	return Flag{}, reason + "; mgid= takes the rest of its line, so put members on lines of their own"
}

func splitFlag(text string) (f Flag, hasValue bool) {
	name, value, hasValue := strings.Cut(text, "=")
	return Flag{Name: strings.TrimSpace(name), Value: strings.TrimSpace(value)}, hasValue
}

func checkNumericFlag(f Flag, hasValue bool) string {
	r := numericFlags[f.Name]
	if _, ok := parseNumber(f.Value, r.max); !hasValue || !ok || mustNumber(f.Value) < r.min {
		return fmt.Sprintf("flag %s=%s: want a number from %d to %d", f.Name, f.Value, r.min, r.max)
	}
	return ""
}

// mustNumber is the value of a flag parseNumber accepted.
func mustNumber(s string) uint64 {
	v, _ := parseNumber(s, ^uint64(0))
	return v
}

// unknownFlag explains a refused flag name: OpenSM matches flags by prefix and
// ignores unknown ones, so "IPoIB" silently means no broadcast group.
func unknownFlag(name string, known []string, where string) string {
	for _, k := range known {
		switch {
		case strings.EqualFold(name, k) && name != k:
			return fmt.Sprintf("flag %q: write %s (OpenSM ignores flags it does not recognise)", name, k)
		case name != "" && strings.HasPrefix(k, name):
			return fmt.Sprintf("flag %q: write %s in full", name, k)
		}
	}
	return fmt.Sprintf("unknown %s flag %q: want one of %s", where, name, strings.Join(known, ", "))
}

// repeatedFlag refuses a flag given twice; only scope may repeat (one group per scope).
func repeatedFlag(flags []Flag, f Flag) string {
	for _, g := range flags {
		if g.Name == f.Name && (f.Name != "scope" || g.Value == f.Value) {
			return fmt.Sprintf("flag %s given twice", f.Name)
		}
	}
	return ""
}

// parseBody reads the items of the open statement found in one piece of a line:
// items separated by ",", possibly continuing over several lines.
func (p *parser) parseBody(n int, piece string) {
	o := p.open
	if o.skip {
		return
	}
	s := piece
	for {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			return
		}
		if s[0] == ',' {
			switch o.state {
			case afterColon:
				p.problem(n, "',' right after ':' (an empty item)")
			case afterComma:
				p.problem(n, "',' after ',' (an empty item)")
			}
			o.state = afterComma
			s = s[1:]
			continue
		}
		end := strings.IndexByte(s, ',')
		if end < 0 {
			end = len(s)
		}
		item := strings.TrimRight(s[:end], " ")
		if o.state == afterItem {
			p.problem(n, "missing ',' before %q", item)
		}
		if name, _, _ := strings.Cut(item, "="); strings.TrimRight(name, " ") == "mgid" {
			p.parseGroup(n, s) // takes the rest of the piece, as OpenSM does
			p.lineHasItem = true
			return
		}
		p.parseMember(n, item)
		p.lineHasItem = true
		o.state = afterItem
		s = s[end:]
	}
}

// checkRepeatedGUIDs reports GUIDs listed twice in the statement.
func (p *parser) checkRepeatedGUIDs(o *openStatement) {
	if o.ascending {
		return
	}
	first := make(map[fabric.GUID]int, len(o.Members))
	for _, m := range o.Members {
		if m.Keyword != "" {
			continue
		}
		if line, dup := first[m.GUID]; dup {
			p.problem(m.Line, "member %s listed twice in partition %s (first at line %d)", m.GUID, o.Name, line)
			continue
		}
		first[m.GUID] = m.Line
	}
}

// keywords lists the member keywords in the order OpenSM matches them by prefix.
var keywords = []Keyword{All, AllCAs, AllSwitches, AllRouters, Self}

func (p *parser) parseMember(n int, item string) {
	o := p.open
	if strings.Contains(item, ":") {
		p.problem(n, "%q is not a member: is the ';' ending the previous statement missing?", item)
		return
	}
	whoText, membership, hasMembership := strings.Cut(item, "=")
	whoText, membership = strings.TrimRight(whoText, " "), strings.TrimLeft(membership, " ")

	m := Member{Line: n}
	if reason := parseWho(whoText, p.flavour, &m); reason != "" {
		p.problem(n, "%s", reason)
		return
	}
	switch {
	case !hasMembership:
		p.problem(n, "member %s has no membership: write %s=full or %s=limited", whoText, whoText, whoText)
		return
	case membership == string(Full) || membership == string(Limited):
		m.Membership = Membership(membership)
	case membership == "both":
		p.problem(n, "member %s=both: write full or limited (both needs allow_both_pkeys, which we leave off)", whoText)
		return
	case membership == "":
		p.problem(n, "member %s= has an empty membership (OpenSM reads it as full): write full or limited", whoText)
		return
	default:
		p.problem(n, "member %s=%s: write full or limited (OpenSM would read %q as %s)",
			whoText, membership, membership, openSMMembership(membership))
		return
	}

	// A member listed twice: OpenSM keeps the last membership, which is rarely
	// meant. Repeated GUIDs are looked for at the end of the statement.
	if m.Keyword == "" {
		o.ascending = o.ascending && m.GUID > o.lastGUID
		o.lastGUID = m.GUID
	} else {
		for _, prev := range o.Members {
			if prev.Keyword == m.Keyword {
				p.problem(n, "member %s listed twice in partition %s (first at line %d)", m.Keyword, o.Name, prev.Line)
				return
			}
		}
	}

	if m.Keyword == "" || m.Keyword == Self {
		if o.firstSpecific.Line == 0 {
			o.firstSpecific = m
		}
	} else if first := o.firstSpecific; first.Line != 0 {
		p.problem(n, "%s=%s after %s=%s (line %d): OpenSM applies members in order, so %s would override it; list %s first",
			m.Keyword, m.Membership, first.Who(), first.Membership, first.Line, m.Keyword, m.Keyword)
		return
	}
	o.Members = append(o.Members, m)
}

// parseWho reads a port GUID or a keyword into m, or returns why it cannot.
func parseWho(who string, flavour fabric.Flavour, m *Member) string {
	if who == "" {
		return "member without a GUID or keyword"
	}
	if h, ok := cutHexPrefix(who); ok {
		v, isHex := parseHex(h)
		if len(h) != 16 || !isHex {
			return fmt.Sprintf("GUID %q: want 0x and exactly 16 hex digits", who)
		}
		if v == 0 {
			return fmt.Sprintf("GUID %s is no port's", who)
		}
		m.GUID = fabric.GUID(v)
		return ""
	}
	for _, k := range keywords {
		if who == string(k) {
			m.Keyword = k
			return ""
		}
	}
	switch {
	case who == string(AllVCAs) && flavour == fabric.NVIDIA:
		m.Keyword = AllVCAs
		return ""
	case who == string(AllVCAs):
		return "ALL_VCAS is not an upstream OpenSM keyword: OpenSM would reject the whole file"
	case who == "NONE":
		return "NONE adds no port: leave it out"
	}
	for _, k := range keywords {
		if strings.HasPrefix(string(k), who) {
			return fmt.Sprintf("%q: OpenSM reads it as %s; write the keyword in full", who, k)
		}
		if strings.EqualFold(string(k), who) {
			return fmt.Sprintf("%q: keywords are upper case: %s", who, k)
		}
	}
	return fmt.Sprintf("%q is neither a port GUID (0x and 16 hex digits) nor a keyword (%s)", who, joinKeywords())
}

func joinKeywords() string {
	names := make([]string, len(keywords))
	for i, k := range keywords {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// openSMMembership is what OpenSM makes of a membership word: a prefix of full or
// both, else limited.
func openSMMembership(word string) string {
	switch {
	case strings.HasPrefix("full", word):
		return "full"
	case strings.HasPrefix("both", word):
		return "both"
	}
	return "limited"
}

// parseGroup reads an mgid= item. OpenSM reads everything after the GID up to ";"
// or the end of the line as the group's flags, so a member written after it on
// its line would be silently ignored: here it is refused as an unknown flag. The
// end of the line ends the item: no "," is needed (or allowed) before the next.
func (p *parser) parseGroup(n int, rest string) {
	o := p.open
	if p.lineHasItem {
		p.problem(n, "mgid= must be the first item of its line")
	}
	parts := strings.Split(rest, ",")
	_, gidText, _ := strings.Cut(parts[0], "=")
	gidText = strings.TrimSpace(gidText)
	flagTexts := parts[1:]
	o.state = afterGroup
	if k := len(flagTexts); k > 0 && strings.TrimSpace(flagTexts[k-1]) == "" {
		p.problem(n, "',' ending an mgid= line: OpenSM reads it as an empty flag; the end of the line already ends the item")
		flagTexts = flagTexts[:k-1]
	}
	if len(flagTexts) == 0 {
		// OpenSM looks for the flags one byte past the end of the item: past the ";",
		// or past the end of the line, in what is left of longer earlier lines in its
		// buffer, which it then applies to the group or fails on.
		p.problem(n, "mgid= item without flags: OpenSM reads its flags from beyond the item (after ';', or stale bytes of earlier lines); give it at least one, e.g. scope=2")
	}

	g := MGroup{Line: n}
	valid := true
	for _, text := range flagTexts {
		f, reason := parseGroupFlag(strings.TrimSpace(text))
		if reason == "" {
			reason = repeatedFlag(g.Flags, f)
		}
		if reason != "" {
			p.problem(n, "%s", reason)
			valid = false
			continue
		}
		g.Flags = append(g.Flags, f)
	}

	gid, err := netip.ParseAddr(gidText)
	switch {
	case gidText == "":
		p.problem(n, "mgid= without a GID")
		return
	case err != nil || !gid.Is6() || gid.Zone() != "":
		p.problem(n, "mgid %q is not an IPv6-format GID", gidText)
		return
	case gid.As16()[0] != 0xff:
		p.problem(n, "mgid %s is not a multicast GID (it must begin with ff); OpenSM would skip it", gid)
		return
	}
	g.GID = gid
	if reason := checkIPoIBGroup(&o.Statement, &g); reason != "" {
		p.problem(n, "%s", reason)
		valid = false
	}
	key := effectiveGID(o.PKey, gid)
	if line, dup := p.groupLine[key]; dup {
		p.problem(n, "multicast group %s is already created at line %d; OpenSM would skip it", key, line)
		valid = false
	} else {
		p.groupLine[key] = n
	}
	if valid {
		o.MGroups = append(o.MGroups, g)
	}
}

// IPoIB multicast GIDs: ff1S:401b (IPv4) or ff1S:601b (IPv6), then the partition's
// pkey with the full-member bit, which OpenSM fills in when it is 0000.
func ipoibSignature(b [16]byte) bool {
	sig := uint16(b[2])<<8 | uint16(b[3])
	return sig == 0x401b || sig == 0x601b
}

func gidPKey(b [16]byte) uint16 { return uint16(b[4])<<8 | uint16(b[5]) }

// ipoibBroadcastTemplate is accepted by OpenSM in any partition, as is a 0000 pkey.
var ipoibBroadcastTemplate = netip.MustParseAddr("ff12:401b:ffff::ffff:ffff")

// checkIPoIBGroup refuses the IPoIB groups OpenSM skips with an error: a pkey that
// is not the partition's, or a rate or mtu other than the partition's broadcast group's.
func checkIPoIBGroup(s *Statement, g *MGroup) string {
	b := g.GID.As16()
	if !ipoibSignature(b) {
		return ""
	}
	want := uint16(s.PKey) | 0x8000
	if got := gidPKey(b); got != 0 && got != want && g.GID != ipoibBroadcastTemplate {
		return fmt.Sprintf("IPoIB mgid %s carries pkey 0x%04x: want 0000 or 0x%04x; OpenSM would skip it", g.GID, got, want)
	}
	for _, f := range []Flag{{Name: "rate", Value: "3"}, {Name: "mtu", Value: "4"}} { // OpenSM's defaults
		partition := flagValue(s.Flags, f.Name, f.Value)
		group := flagValue(g.Flags, f.Name, partition)
		if mustNumber(group) != mustNumber(partition) {
			return fmt.Sprintf("IPoIB mgid %s has %s=%s but its partition's broadcast group has %s=%s; OpenSM would skip it",
				g.GID, f.Name, group, f.Name, partition)
		}
	}
	return ""
}

func flagValue(flags []Flag, name, fallback string) string {
	for _, f := range flags {
		if f.Name == name {
			return f.Value
		}
	}
	return fallback
}

// effectiveGID is the group OpenSM creates: IPoIB GIDs get the pkey filled in.
func effectiveGID(pkey fabric.PKey, gid netip.Addr) netip.Addr {
	b := gid.As16()
	if ipoibSignature(b) && gidPKey(b) == 0 {
		p := uint16(pkey) | 0x8000
		b[4], b[5] = byte(p>>8), byte(p)
	}
	return netip.AddrFrom16(b)
}
