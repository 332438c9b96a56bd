package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

func TestPortLimit(t *testing.T) {
	dump := filepath.Join(t.TempDir(), FileName)
	// Three static partitions list H1; every host port carries the default.
	static := func(g fabric.GUID) []fabric.PKey {
		if g == 0x0002c90300000101 {
			return []fabric.PKey{0x7fff, 0x0200, 0x0201, 0x0202}
		}
		return []fabric.PKey{0x7fff}
	}
	l := &PortLimit{DumpFile: dump, Capacity: 5, Static: static}

	// No dump yet (OpenSM has not swept): H1 is checked on its own, for the
	// switch port it will be behind, whichever that is.
	refusal, err := l.Check(0x0002c90300000101, 0x0065)
	if err != nil || !strings.Contains(refusal, "would carry 5 pkeys") || !strings.Contains(refusal, "not on the fabric now") {
		t.Fatalf("without a dump: %q, %v; want H1 refused wherever it lands", refusal, err)
	}
	if refusal, err := l.Check(0x0002c90300000101); refusal != "" || err != nil {
		t.Fatalf("without a dump, H1 in no network: %q, %v", refusal, err)
	}
	real := writeTestdata(t, "good/ibsim-5-hosts-2-switches.lst", dump)
	// H1: default + 3 static + its network = 5 = the capacity: refused.
	refusal, err = l.Check(0x0002c90300000101, 0x0065)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"host port 0x0002c90300000101 would carry 5 pkeys", "switch port 0x0002c90300f00001:2",
		"switch_pkey_capacity", "at most 4"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("H1: refusal %q, want it to say %q", refusal, want)
		}
	}
	reached, err := l.Reached(map[fabric.GUID][]fabric.PKey{0x0002c90300000101: {0x0065}, 0x0002c90300000201: {0x0065}})
	if err != nil || len(reached) != 1 || reached[0] != (Reached{Host: 0x0002c90300000101,
		Behind: SwitchPort{0x0002c90300f00001, 2}, PKeys: 5}) {
		t.Errorf("Reached = %+v, %v; want H1 behind 0x0002c90300f00001:2 with 5 pkeys", reached, err)
	}
	// H2 carries 2; a port the dump does not place carries what it is given.
	for _, g := range []fabric.GUID{0x0002c90300000201, 0x0002c90300000601} {
		if refusal, err := l.Check(g, 0x0065); refusal != "" || err != nil {
			t.Errorf("%s: %q, %v", g, refusal, err)
		}
	}
	// A port the dump does not place (its link down, a virtual port) gets its
	// pkeys from OpenSM at the sweep that finds it: refused at the capacity,
	// like a placed one.
	refusal, err = l.Check(0x0002c90300000601, 0x1001, 0x1002, 0x1003, 0x1004)
	if err != nil || !strings.Contains(refusal, "host port 0x0002c90300000601 would carry 5 pkeys") ||
		!strings.Contains(refusal, "not on the fabric now") || !strings.Contains(refusal, "at most 4") {
		t.Errorf("a port not on the fabric with 5 pkeys: %q, %v; want refused", refusal, err)
	}
	// A new dump is read: H1 gone from the fabric (its link down), still
	// refused: it gets its pkeys when it comes back.
	if err := os.WriteFile(dump, []byte(strings.Join(filterLines(string(real), "H1"), "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if refusal, err := l.Check(0x0002c90300000101, 0x0065); !strings.Contains(refusal, "not on the fabric now") || err != nil {
		t.Errorf("after H1 left the dump: %q, %v; want refused wherever it comes back", refusal, err)
	}
	// A dump caught half written (OpenSM rewrites it in place) leaves the last
	// one read whole in force: H1 is still not placed, H2 still is.
	if err := os.WriteFile(dump, real, 0o644); err != nil {
		t.Fatal(err)
	}
	if refusal, _ := l.Check(0x0002c90300000101, 0x0065); !strings.Contains(refusal, "switch port 0x0002c90300f00001:2") {
		t.Fatalf("H1 is back in the dump: %q, want a refusal naming its switch port", refusal)
	}
	if err := os.WriteFile(dump, real[:len(real)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if refusal, err := l.Check(0x0002c90300000101, 0x0065); !strings.Contains(refusal, "switch port 0x0002c90300f00001:2") || err != nil {
		t.Errorf("half-written dump: %q, %v; want the last whole dump's refusal", refusal, err)
	}
}

// A host port moved to another switch port (its cable, or its HCA with
// its GUID, moved to another host) carries the same pkeys: the same count,
// checked against the switch port the latest dump puts it behind.
func TestPortLimitPortMoved(t *testing.T) {
	dump := filepath.Join(t.TempDir(), FileName)
	real := readTestdata(t, "good/ibsim-5-hosts-2-switches.lst")
	l := &PortLimit{DumpFile: dump, Capacity: 3}
	var moved []string
	for _, line := range strings.SplitAfter(string(real), "\n") {
		if strings.Contains(line, "{H1}") {
			line = strings.Replace(line, "{S1} LID:0002 PN:02 }", "{S1} LID:0002 PN:07 }", 1)
		}
		moved = append(moved, line)
	}
	for _, tt := range []struct {
		content, port string
	}{{string(real), "0x0002c90300f00001:2"}, {strings.Join(moved, ""), "0x0002c90300f00001:7"}} {
		if err := os.WriteFile(dump, []byte(tt.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if refusal, err := l.Check(0x0002c90300000101, 0x1001); refusal != "" || err != nil {
			t.Errorf("H1 behind %s with 2 pkeys: %q, %v", tt.port, refusal, err)
		}
		refusal, err := l.Check(0x0002c90300000101, 0x1001, 0x1002)
		if err != nil || !strings.Contains(refusal, "would carry 3 pkeys") || !strings.Contains(refusal, "switch port "+tt.port) {
			t.Errorf("H1 behind %s with 3 pkeys: %q, %v; want refused naming it", tt.port, refusal, err)
		}
	}
}

// filterLines drops the lines naming node description desc.
func filterLines(text, desc string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.Contains(line, "{"+desc+"}") {
			out = append(out, line)
		}
	}
	return append(out, "")
}

// TestPortLimitRefusesSwitchGUIDs: a switch's GUID (its port 0's) is no host
// port's, whatever the partitions: refused, naming the switch, once a dump
// lists it. Before OpenSM's first dump there is nothing to tell it by.
func TestPortLimitRefusesSwitchGUIDs(t *testing.T) {
	dump := filepath.Join(t.TempDir(), FileName)
	l := &PortLimit{DumpFile: dump, Capacity: 32}
	const sw = 0x0002c90300f00001
	if refusal, err := l.Check(sw, 0x0065); refusal != "" || err != nil {
		t.Fatalf("without a dump: %q, %v", refusal, err)
	}
	writeTestdata(t, "good/ibsim-5-hosts-2-switches.lst", dump)
	for _, pkeys := range [][]fabric.PKey{{0x0065}, nil} {
		refusal, err := l.Check(sw, pkeys...)
		if err != nil || !strings.Contains(refusal, "GUID 0x0002c90300f00001 is switch 0x0002c90300f00001's") ||
			!strings.Contains(refusal, "never a partition's member") {
			t.Errorf("switch GUID with pkeys %v: %q, %v", pkeys, refusal, err)
		}
	}
	if refusal, err := l.Check(0x0002c90300000101, 0x0065); refusal != "" || err != nil {
		t.Errorf("a host port: %q, %v", refusal, err)
	}
}

func TestPortLimitRoom(t *testing.T) {
	static := func(g fabric.GUID) []fabric.PKey {
		switch g {
		case 1:
			return []fabric.PKey{0x0200}
		case 2:
			return []fabric.PKey{0x7fff, 0x0200, 0x8200} // the default, and one pkey twice
		case 3:
			return []fabric.PKey{0x0200, 0x0201, 0x0202, 0x0203}
		}
		return nil
	}
	l := &PortLimit{Capacity: 4, Static: static}
	for g, want := range map[fabric.GUID]int{0: 2, 1: 1, 2: 1, 3: 0} {
		if got := l.Room(g); got != want {
			t.Errorf("Room(%s) = %d, want %d", g, got, want)
		}
	}
}
