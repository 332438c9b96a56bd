package storetest

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/storeopen"
)

// helperEnv makes the test binary act as a manager process that is killed in
// the middle of a group commit (see runGroupCrashHelper) instead of running
// tests.
const helperEnv = "AFM_STORETEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "group-crash":
		runGroupCrashHelper()
	case "finish-crash":
		runFinishCrashHelper()
	}
	os.Exit(m.Run())
}

// The GUIDs of the crash: the first change's, held to form the group, and
// the group's, the third of which is held until the process is killed.
const (
	crashFirst = 0x0002c90300000e00
	crashGroup = 0x0002c90300000e01 // and the three after it
	crashHeld  = crashGroup + 2
)

// TestGroupCrash kills (SIGKILL) a process in the middle of a group commit:
// the group's first two changes have run their statements, its third is in
// the transaction, its fourth waits. After the kill, on every engine, the
// database holds what was committed before and nothing of the group, and
// the next change, from another process, is recorded at the next revision.
func TestGroupCrash(t *testing.T) {
	crashTest(t, func(t *testing.T, db Database, s *store.Store, _ store.Job) {
		said := killHelperAt(t, db, "group-crash", "mid-group")
		if want := []string{"first at revision 2"}; fmt.Sprint(said) != fmt.Sprint(want) {
			t.Errorf("the helper said %q; want %q", said, want)
		}

		if r := revision(t, s); r != 2 {
			t.Errorf("revision %d after the crash; want 2 (the first change's)", r)
		}
		st := readState(t, s, "first", "c1", "c2", "c3", "c4")
		want := fmt.Sprint([]string{`first:` + netA + `:0x0002c90300000e00:"h0"`, "c1:absent", "c2:absent", "c3:absent", "c4:absent"})
		if st.Ports != want {
			t.Errorf("ports after the crash %s; want %s", st.Ports, want)
		}
		if st.Jobs[store.StatusPending] != 2 || len(st.Jobs) != 1 {
			t.Errorf("jobs by status %v; want the network's and the first port's", st.Jobs)
		}
		if len(st.Members) == 0 || strings.Count(st.Members, "}") != 1 {
			t.Errorf("members %s; want the first port's only", st.Members)
		}
		if j, err := addPort(t, s, "c1", netA, crashGroup); err != nil || j.Revision != 3 {
			t.Errorf("a change after the crash: revision %d, %v; want 3", j.Revision, err)
		}
	})
}

// runGroupCrashHelper forms a group as the group tests do, in this process,
// on the database of AFM_STORETEST_ENGINE and AFM_STORETEST_DSN (migrated,
// with network netA), says "first at revision N" once the change before the
// group is committed and "mid-group" once the group's third change is inside
// the transaction, then waits to be killed.
func runGroupCrashHelper() {
	ctx := context.Background()
	fail, s := startHelper(ctx, "group crash helper")
	first, held := newGate(crashFirst), newGate(crashHeld)
	firstDone := make(chan error, 1)
	go func() {
		j, err := s.WithRules(first.rules()).RecordPort(ctx, boundPort("first", netA, crashFirst, "h0"))
		if err == nil {
			fmt.Printf("first at revision %d\n", j.Revision)
		}
		firstDone <- err
	}()
	<-first.entered
	for i := range 4 {
		g := uint64(crashGroup + i)
		rs := s
		if g == crashHeld {
			rs = s.WithRules(held.rules())
		}
		go func() {
			_, err := rs.RecordPort(ctx, boundPort(fmt.Sprintf("c%d", i+1), netA, g, "h1"))
			fail("change c%d answered (%v) before the process was killed", i+1, err)
		}()
		for s.QueuedChanges() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	close(first.open)
	if err := <-firstDone; err != nil {
		fail("the first change: %v", err)
	}
	<-held.entered
	fmt.Println("mid-group")
	select {}
}

// crashTest runs fn on every engine, with a new database of its own, a store
// on it and network netA recorded there (the job of it), for a helper
// process to crash in.
func crashTest(t *testing.T, fn func(t *testing.T, db Database, s *store.Store, network store.Job)) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			db := NewDatabase(t, engine)
			s := OpenDatabase(t, db)
			fn(t, db, s, addNetwork(t, s, netA, 101))
		})
	}
}

// startHelper opens, in a helper process, the store on the database its test
// named, and gives the helper a fail that says what went wrong as name and
// ends the process.
func startHelper(ctx context.Context, name string) (fail func(format string, args ...any), s *store.Store) {
	fail = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, name+": "+format+"\n", args...)
		os.Exit(2)
	}
	s, err := storeopen.Open(ctx, os.Getenv("AFM_STORETEST_ENGINE"), os.Getenv("AFM_STORETEST_DSN"), false,
		store.Rules{}, slog.New(slog.DiscardHandler))
	if err != nil {
		fail("open the store: %v", err)
	}
	return fail, s
}

// killHelperAt runs this test binary as the helper of mode on db, with env, and
// kills it (SIGKILL) as soon as it prints the line marker, which it prints
// from inside the transaction under test. It returns the lines printed
// before the marker; a helper that ends without printing it fails the test.
func killHelperAt(t *testing.T, db Database, mode, marker string, env ...string) (said []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	helper := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	helper.Env = append(append(os.Environ(), helperEnv+"="+mode,
		"AFM_STORETEST_ENGINE="+db.Engine, "AFM_STORETEST_DSN="+db.DSN), env...)
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != marker {
		said = append(said, lines.Text())
	}
	if lines.Text() != marker {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("the %s helper ended before it printed %q: %q", mode, marker, said)
	}
	if err := helper.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	return said
}
