package opensm

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Outcome says what a heavy sweep did with the partitions file.
type Outcome string

const (
	// Applied: a heavy sweep that started after the position ended with
	// "SUBNET UP": every P_Key table and enforcement Set of it was answered.
	// PKeyErrors may still name ports that did not get everything.
	Applied Outcome = "applied"
	// Rejected: OpenSM could not use the partitions file (parse error, missing
	// or unreadable file) and fell back to its built-in default, in which every
	// port is a full member of the default partition and no other partition
	// exists. The fabric runs that now.
	Rejected Outcome = "rejected"
	// QoSRejected: the sweep came up, but OpenSM could not use the QoS policy
	// file (qos_policy_file) and dropped the policy: the Kubernetes pkeys'
	// paths have no SL, MTU or rate limit of theirs.
	QoSRejected Outcome = "qos-rejected"
	// Failed: the sweep ended with "Errors during initialization" (a Set timed
	// out) and no later sweep succeeded before the deadline.
	Failed Outcome = "failed"
	// LostMastership: this OpenSM went to STANDBY (or DISCOVERING, NOTACTIVE)
	// during the sweep; another SM is master and whatever this one read does
	// not count.
	LostMastership Outcome = "lost-mastership"
	// Unknown: nothing proves anything either way: the log was truncated or
	// replaced, or no sweep ended before the deadline. Write the file again and
	// send another SIGHUP.
	Unknown Outcome = "unknown"
)

// SweepResult is what a SweepWatch found in the log.
type SweepResult struct {
	Outcome Outcome
	// PKeyErrors are the ERR 05xx lines of the pkey manager (but not its
	// enforcement errors, see enforcementError), and the ERR 3111/3113/3119
	// lines about a P_KeyTable or PortInfo Set, of the sweep that decided the
	// outcome (for Failed: the last failed sweep).
	PKeyErrors []string
	// Detail says why, when the outcome is not Applied.
	Detail string
	// TimedOut says the outcome was decided by the deadline: no sweep proved
	// anything within the timeout (Unknown), or none succeeded (Failed).
	TimedOut bool
	// InProgress, with TimedOut, says that a heavy sweep was still running at
	// the deadline: the one counted (its start is logged after the position,
	// so it reads the new file) or one that started before the position and
	// has logged its progress since, but not its end (the SIGHUP then waits
	// in OpenSM for it to end). Signalling again proves nothing sooner: a
	// SweepWatch's Wait follows on from where it stopped. Only an Unknown
	// result is in progress: a sweep that ended with errors is judged at the
	// deadline whatever retry of it runs.
	InProgress bool
}

// Lines of the log that a SweepWatch acts on. Each is matched where OpenSM's
// format puts it and nowhere else (see splitFunction): a box's title, a whole
// message, or the start of the text after the function name or error code.
const (
	titleHeavySweepStart = "INITIATING HEAVY SWEEP"
	msgSubnetUp          = "SUBNET UP"
	msgInitErrors        = "Errors during initialization"
)

// Starts of the texts (after the function name) saying the partitions file
// was not used. The %s are the file's path and the system's error.
const (
	textInError       = "Partition configuration in error" // "; retrying with default config" (osm_prtn_make_partitions)
	textNotAccessible = "Partition configuration "         // "%s is not accessible (%s)" (osm_prtn_make_partitions)
	textCannotOpen    = "Cannot open config file "         // "'%s': %s" (osm_prtn_config_parse_file)
)

var (
	madAboutPKeys = regexp.MustCompile(`P_KeyTable|PortInfo`)
	// madGet: a Get that failed is discovery, not programming. A PortInfo
	// Get times out when a port's link goes down as a sweep starts; OpenSM
	// drops the port and brings the subnet up (it counts only failed Sets as
	// errors during initialization), so the sweep's jobs are not failed.
	madGet    = regexp.MustCompile(`\bSubnGet\(`)
	notMaster = regexp.MustCompile(`^Entering (STANDBY|DISCOVERING|NOTACTIVE) state$`)
)

// SweepWatch follows the log from its position and reports the outcome of
// the first heavy sweep that started after it; a Tail's WatchSweep takes the
// position and returns the watch. Take it after the new partitions file is
// in place and before sending SIGHUP: a sweep whose start is logged after the
// position began after the rename, and every heavy sweep parses the
// partitions file after its discovery, so it read the new file. Sweeps that
// started earlier prove nothing and are ignored, including their ends.
//
// The rules, in the order of the log:
//   - the sweep counts from its "INITIATING HEAVY SWEEP" box; a newer one before
//     the end replaces it (OpenSM restarted discovery);
//   - "Partition configuration in error", "... is not accessible", "Cannot open
//     config file" in it: Rejected (reported at the sweep's end, once the
//     fallback tables are programmed, or at the deadline);
//   - "Entering STANDBY/DISCOVERING/NOTACTIVE state" after it: LostMastership;
//   - the header line "SUBNET UP" (not the box of the same name): Applied;
//   - an ERR 05xx line of the pkey manager, or an ERR 3111/3113/3119 about a
//     P_KeyTable or PortInfo Set: kept in PKeyErrors (enforcement errors, ERR
//     0507/0513 and "Clearing Enforcement bit", are not);
//   - "Errors during initialization": OpenSM retries with another heavy sweep at
//     its next sweep tick; wait for it. At the deadline: Failed.
//
// At the deadline without any of these the result is Unknown, as it is at once
// when the log is truncated or replaced; it is InProgress when a heavy sweep
// was still running then (see SweepResult.InProgress). After a result that is
// TimedOut and InProgress, Wait follows the same log from where it stopped,
// with what it has seen so far, so that a sweep longer than one timeout is
// proven without another SIGHUP.
//
// A restarted OpenSM needs no special case: its first sweep also starts after
// the position, and reads the new file. A SweepWatch is not safe for
// concurrent use.
type SweepWatch struct {
	tail   *Tail
	feed   *sweepFeed
	w      sweepWatch
	waited time.Duration // the timeouts of the Waits so far
	taken  time.Time     // when the watch was taken: just before the SIGHUP
	// now and nap are time.Now and sleep, which a test replaces to keep
	// time of its own.
	now func() time.Time
	nap func(ctx context.Context, d time.Duration) error
	// wake is the tail's, lent for the whole sweep (see logWake);
	// wakeTried: lent or refused. nearWakes counts the looks a write woke
	// at once near the sweep's end, up to maxWakes. looked: the start of
	// the last look.
	wake      *logWake
	wakeTried bool
	nearWakes int
	looked    time.Time
	// waitWake is logWake.wait, which a test replaces to write the log
	// as OpenSM would while the watch waits.
	waitWake func(w *logWake, ctx context.Context, d time.Duration) (bool, error)
}

// A watch waits for OpenSM's writes to the log (logWake) and looks at the
// log when one comes, but never sooner than its gap after its last look:
// a burst of lines (a VERBOSE line per port of a large fabric, written
// within milliseconds) is read in a few looks, and a quiet stretch (a
// large sweep waits hundreds of milliseconds on its MADs, logging nothing)
// costs none. The gap is watchPollInterval during the first watchFastFor
// (a small fabric's whole sweep: 6-15 ms, 21 ms at p95 on a loaded
// machine) and once the sweep is in its last steps, pollInterval
// otherwise; near the sweep's end (its switches configured: the links'
// boxes and its end follow, a handful of lines) there is none, for
// maxWakes looks. Polled instead every gap throughout, a 1,500-host sweep
// cost about 70 looks and, with the runtime's wake-ups around each, more
// than half the manager's CPU beside OpenSM's sweep (docs/performance.md).
const watchFastFor = 30 * time.Millisecond

// maxWakes bounds the looks a watch makes at once when woken by a write
// near its sweep's end: a log that keeps being written there (errors at
// every port of a large fabric, or a hostile writer in OpenSM's user's
// directory) would wake it at every write. Past it the gap holds again. A
// real sweep's end is a handful.
const maxWakes = 64

// provenPollInterval is how long a watch waits for a write, once writes
// to the file OpenSM writes have woken one (logWake.proven), before it
// looks anyway: a wake lost some other way than by a rotation (which wakes
// the watch and unproves the wake) is not known to happen. Until then, and
// without a wake, the watch looks every gap, as a poll: a log whose writes
// send no notification (a file system of another host) is read as soon as
// without the wake.
const provenPollInterval = 50 * time.Millisecond

// pause waits before the watch looks at the log again, until the deadline
// at most: until OpenSM's next write, and its gap after the last look (see
// watchFastFor). ctx's end is seen at the next look.
func (s *SweepWatch) pause(ctx context.Context, deadline time.Time) {
	if s.wake == nil && !s.wakeTried {
		s.wakeTried = true
		if s.wake = s.tail.lendWake(); s.wake != nil {
			return // look again at once: a write before the arming woke nobody
		}
	}
	if s.wake == nil {
		_ = s.nap(ctx, min(s.gap(), time.Until(deadline)))
		return
	}
	wait := s.gap()
	if s.wake.proven {
		wait = provenPollInterval
	}
	woken, err := s.waitWake(s.wake, ctx, min(wait, time.Until(deadline)))
	if err != nil && ctx.Err() == nil { // closed with its tail, or broken: poll
		s.tail.dropWake(s.wake)
		s.wake = nil
		return
	}
	if !woken {
		return
	}
	if s.w.near && s.nearWakes < maxWakes {
		s.nearWakes++
		return
	}
	// A write this soon after the last look waits for the rest of the gap,
	// with whatever else OpenSM writes meanwhile.
	if rest := s.gap() - s.now().Sub(s.looked); rest > 0 {
		_ = s.nap(ctx, min(rest, time.Until(deadline)))
	}
}

// releaseWake gives the tail's wake back, if the watch holds it.
func (s *SweepWatch) releaseWake() {
	if s.wake != nil {
		s.tail.returnWake(s.wake)
		s.wake = nil
	}
}

// gap is the least time between two looks at the log (see watchFastFor).
func (s *SweepWatch) gap() time.Duration {
	if s.w.ending || s.now().Sub(s.taken) < watchFastFor {
		return watchPollInterval
	}
	return pollInterval
}

// Close ends the watch.
func (s *SweepWatch) Close() error {
	s.releaseWake()
	s.tail.unwatch(s.feed)
	return nil
}

// Wait waits for the sweep, for at most timeout more (see SweepWatch). Call
// it again only after a result that is TimedOut and InProgress; any other
// result is final. ctx cancels it, and then Wait returns ctx.Err(); other
// errors are I/O errors reading the log.
func (s *SweepWatch) Wait(ctx context.Context, timeout time.Duration) (SweepResult, error) {
	deadline := time.Now().Add(timeout)
	s.waited += timeout
	for {
		// What the log holds is read before the deadline is looked at: a
		// sweep whose end is logged by then proves the change.
		s.looked = s.now()
		if err := s.tail.Pump(); err != nil {
			return SweepResult{}, fmt.Errorf("wait for sweep: %w", err)
		}
		entries, broken := s.tail.drain(s.feed)
		for _, e := range entries {
			if res, done := s.w.observe(e); done {
				return res, nil
			}
		}
		switch {
		case broken != nil:
			return SweepResult{Outcome: Unknown, Detail: "proof broken: " + broken.Error()}, nil
		case ctx.Err() != nil:
			return SweepResult{}, ctx.Err()
		case !time.Now().Before(deadline):
			res := s.w.atDeadline(s.waited)
			res.TimedOut = true
			// Only a sweep not yet judged is followed: a rejected file is
			// acted on at once, and so is a sweep that ended with errors,
			// whatever retry of it runs now. OpenSM retries a failed sweep
			// at its next tick, so one nearly always runs at the deadline;
			// following it would put off judging the jobs by their ports'
			// tables by several timeouts, and the next retry fails as the
			// last did while a host drops OpenSM's Sets.
			res.InProgress = (s.w.started || s.w.earlier) && res.Outcome == Unknown
			return res, nil
		}
		s.pause(ctx, deadline)
	}
}

// sweepWatch holds what a SweepWatch knows about the sweep it counts.
type sweepWatch struct {
	started    bool     // the counted sweep's start box has been seen
	rejected   []string // lines saying the partitions file was not used
	qosErrs    []string // lines saying the QoS policy file was not used
	parseErrs  []string
	pkeyErrs   []string
	failures   int      // sweeps that ended with errors
	lastFailed []string // PKeyErrors of the last failed sweep
	// earlier: before the counted sweep started, a heavy sweep that started
	// before the position logged a step of its progress and has not ended
	// since.
	earlier bool
	// ending: the counted sweep is in its last steps (lastSweepSteps).
	ending bool
	// near: the counted sweep has configured its switches (nearEndSteps):
	// it logs little more before its end.
	near bool
}

// nearEndSteps are the titles of the boxes a heavy sweep logs once its
// switches are configured: the links' configuration and its end follow,
// with a box for each of its last steps and little else logged (the
// modules the manager logs at VERBOSE are done; 1.7-7.5 ms of quiet before
// the links' boxes on 24 hosts, hundreds on a large fabric). A watch is
// woken by the log's writes from there (logWake).
var nearEndSteps = append([]string{
	"SWITCHES CONFIGURED FOR UNICAST",
	"SWITCHES CONFIGURED FOR MULTICAST",
	"ALIAS GUIDS CONFIGURED",
}, lastSweepSteps...)

// lastSweepSteps are the titles of the boxes a heavy sweep logs once it has
// programmed the switches and the P_Key tables: its end (SUBNET UP, or errors)
// follows within milliseconds, so the watch looks at the log more often.
var lastSweepSteps = []string{
	"LINKS PORTS CONFIGURED - SET LINKS TO ARMED STATE",
	"LINKS ARMED - SET LINKS TO ACTIVE STATE",
}

// heavySweepSteps are the titles of the boxes a heavy sweep logs on its way
// from discovery to its end (osm_state_mgr.c's do_sweep): seen after the
// position before any start, they show a sweep that started earlier still
// running.
var heavySweepSteps = []string{
	"HEAVY SWEEP COMPLETE",
	"PKEY setup completed - STARTING SM LID CONFIG",
	"SM LID ASSIGNMENT COMPLETE - STARTING SUBNET LID CONFIG",
	"LID ASSIGNMENT COMPLETE - STARTING SWITCH TABLE CONFIG",
	"SWITCHES CONFIGURED FOR UNICAST",
	"SWITCHES CONFIGURED FOR MULTICAST",
	"ALIAS GUIDS CONFIGURED",
	"LINKS PORTS CONFIGURED - SET LINKS TO ARMED STATE",
	"LINKS ARMED - SET LINKS TO ACTIVE STATE",
}

func (w *sweepWatch) observe(e Entry) (SweepResult, bool) {
	if e.Title == titleHeavySweepStart {
		*w = sweepWatch{started: true, failures: w.failures, lastFailed: w.lastFailed}
		return SweepResult{}, false
	}
	if !w.started {
		w.noteEarlier(e)
		return SweepResult{}, false
	}
	if e.Title != "" && slices.Contains(nearEndSteps, e.Title) {
		w.near = true
		w.ending = w.ending || slices.Contains(lastSweepSteps, e.Title)
		return SweepResult{}, false
	}
	// A large fabric's sweep logs a VERBOSE line per port: each is split at
	// its function name once, and compared by prefix, so that those lines
	// cost no regular expression and no joined text.
	m := e.Message
	_, rest, hasFunction := splitFunction(m)
	code, _, isError := errorCode(rest)
	switch {
	case hasFunction && isPartitionsRejected(rest):
		w.rejected = append(w.rejected, m)
	case hasFunction && strings.HasPrefix(rest, "PARSE ERROR"):
		w.parseErrs = append(w.parseErrs, m)
	case hasFunction && isQoSPolicyRejected(m, code):
		w.qosErrs = append(w.qosErrs, m)
	case isError && isPKeyError(e, code):
		w.pkeyErrs = append(w.pkeyErrs, e.Text())
	case strings.HasPrefix(m, "Entering ") && notMaster.MatchString(m):
		return SweepResult{
			Outcome:    LostMastership,
			PKeyErrors: w.pkeyErrs,
			Detail:     fmt.Sprintf("OpenSM logged %q during the sweep: another SM is master", e.Message),
		}, true
	case e.Message == msgSubnetUp:
		if len(w.rejected) > 0 {
			return w.rejectedResult(), true
		}
		if len(w.qosErrs) > 0 {
			return SweepResult{Outcome: QoSRejected, PKeyErrors: w.pkeyErrs,
				Detail: "OpenSM did not use the QoS policy file: " + strings.Join(w.qosErrs, "; ")}, true
		}
		return SweepResult{Outcome: Applied, PKeyErrors: w.pkeyErrs}, true
	case e.Message == msgInitErrors:
		if len(w.rejected) > 0 {
			return w.rejectedResult(), true
		}
		// OpenSM tries again at its next sweep; that one counts now.
		w.failures++
		w.lastFailed = w.pkeyErrs
		w.started, w.ending, w.near = false, false, false
	}
	return SweepResult{}, false
}

// noteEarlier follows a sweep that started before the position (see
// earlier), from entries logged before the counted sweep starts.
func (w *sweepWatch) noteEarlier(e Entry) {
	switch {
	case e.Title != "" && slices.Contains(heavySweepSteps, e.Title):
		w.earlier = true
	case e.Message == msgSubnetUp || e.Message == msgInitErrors || strings.HasPrefix(e.Message, "Entering ") && notMaster.MatchString(e.Message):
		w.earlier = false
	}
}

func (w *sweepWatch) rejectedResult() SweepResult {
	lines := append(append([]string{}, w.parseErrs...), w.rejected...)
	return SweepResult{
		Outcome:    Rejected,
		PKeyErrors: w.pkeyErrs,
		Detail: "OpenSM did not use the partitions file and applied its default (every port a full member " +
			"of the default partition, no other partition): " + strings.Join(lines, "; "),
	}
}

func (w *sweepWatch) atDeadline(timeout time.Duration) SweepResult {
	switch {
	case len(w.rejected) > 0:
		return w.rejectedResult()
	case w.failures > 0:
		return SweepResult{
			Outcome:    Failed,
			PKeyErrors: w.lastFailed,
			Detail: fmt.Sprintf("%d heavy sweep(s) ended with %q and none succeeded within %s",
				w.failures, msgInitErrors, timeout),
		}
	case w.started:
		return SweepResult{
			Outcome:    Unknown,
			PKeyErrors: w.pkeyErrs,
			Detail:     fmt.Sprintf("a heavy sweep started but did not end within %s", timeout),
		}
	default:
		return SweepResult{
			Outcome: Unknown,
			Detail:  fmt.Sprintf("no heavy sweep started within %s (not master, or the signal was not received)", timeout),
		}
	}
}

// isPartitionsRejected says whether the text after a message's function name
// says that the partitions file was not used.
func isPartitionsRejected(rest string) bool {
	switch {
	case strings.HasPrefix(rest, textInError), strings.HasPrefix(rest, textCannotOpen):
		return true
	case strings.HasPrefix(rest, textNotAccessible):
		return strings.Contains(rest, " is not accessible (")
	}
	return false
}

// qosPolicyRejections are the codes with which OpenSM's
// osm_qos_parse_policy_file says it dropped the QoS policy: the file could
// not be opened (AC01), parsed (AC03, after a syntax error's AC05) or held
// up (AC04, after a check's AC10-AC13), or no file is named (AC06). Other
// AC errors (a match rule's pkey with no partition, AC14) leave the policy
// in force.
var qosPolicyRejections = []string{"AC01", "AC03", "AC04", "AC06"}

// isQoSPolicyRejected says whether message m, of error code code (if any),
// says the QoS policy file was not used: a rejection above, or no file.
func isQoSPolicyRejected(m, code string) bool {
	fn, rest, _ := splitFunction(m)
	if fn != "osm_qos_parse_policy_file" {
		return false
	}
	return slices.Contains(qosPolicyRejections, code) || strings.HasPrefix(rest, "QoS policy file not found")
}

// isPKeyError says whether an error entry of the given code is one that
// PKeyErrors keeps: an ERR 05xx of the pkey manager that is not an
// enforcement error (those are watched for elsewhere), or an ERR
// 3111/3113/3119 about a P_KeyTable or PortInfo Set. The MAD errors' texts
// and continuation lines hold no fabric-supplied text: the attribute's and
// method's names are OpenSM's own.
func isPKeyError(e Entry, code string) bool {
	switch {
	case strings.HasPrefix(code, "05"):
		_, enforcement := ParseEnforcementError(e)
		return !enforcement
	case code == "3111" || code == "3113" || code == "3119":
		text := e.Text()
		return madAboutPKeys.MatchString(text) && !madGet.MatchString(text)
	}
	return false
}

// pkeyErrorNode reads where a pkey manager error happened: OpenSM's ERR 05xx
// lines name "node 0x<node GUID> port <n>".
var pkeyErrorNode = regexp.MustCompile(`\bnode 0x([0-9a-fA-F]{1,16}) port (\d{1,3})\b`)

// PKeyErrorPlace returns the node GUID and port number a pkey error line (one
// of SweepResult.PKeyErrors) names. ok is false when the line names no port:
// the error cannot be attributed to a change.
func PKeyErrorPlace(line string) (node uint64, port int, ok bool) {
	m := pkeyErrorNode.FindStringSubmatch(line)
	if m == nil {
		return 0, 0, false
	}
	node, errN := strconv.ParseUint(m[1], 16, 64)
	port, errP := strconv.Atoi(m[2])
	if errN != nil || errP != nil || node == 0 {
		return 0, 0, false
	}
	return node, port, true
}

// pkeyErrorPKey reads the pkey a pkey manager error names, in the formats of
// osm_pkey_mgr.c that name one: ERR 0503 "Failed to obtain P_Key 0x%04x",
// ERR 0505 "Failed to set PKey 0x%04x", ERR 0508 "Failed to set accum_pkeys
// PKey 0x%04x", ERR 0512 "Failed to set PKey 0x%04x because Pkey table is
// full". It is matched right at the line's first "ERR ", the code OpenSM
// wrote: the node description at the end of the line is the host's to choose,
// and a pkey written there must not be read as the one OpenSM names.
var pkeyErrorPKey = regexp.MustCompile(`^ERR 05(?:03: Failed to obtain P_Key|05: Failed to set PKey|08: Failed to set accum_pkeys PKey|12: Failed to set PKey) 0x([0-9a-fA-F]{1,4}) `)

// PKeyErrorPKey returns the pkey a pkey error line (one of
// SweepResult.PKeyErrors) says was not set, without its membership bit (ERR
// 0512 shows a full member's as 0x8065: pkey 0x0065). ok is false when the
// line names no pkey: the other errors (ERR 0502, 0506, 0509, 0511, the MAD
// errors) concern a port's whole table block or its PortInfo, not one pkey.
func PKeyErrorPKey(line string) (pkey uint16, ok bool) {
	i := strings.Index(line, "ERR ")
	if i < 0 {
		return 0, false
	}
	m := pkeyErrorPKey.FindStringSubmatch(line[i:])
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseUint(m[1], 16, 16)
	if err != nil || v&0x7fff == 0 { // 0x0000 and 0x8000 are no pkey
		return 0, false
	}
	return uint16(v & 0x7fff), true
}
