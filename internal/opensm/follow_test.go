package opensm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/opensm/opensmtest"
)

const (
	subnetUpLine  = "Nov 29 19:22:53 283290 [8507C6C0] 0x02 -> SUBNET UP\n"
	masterLine    = "Nov 29 19:22:53 258832 [8507C6C0] 0x80 -> Entering MASTER state\n"
	exitingLine   = "Nov 29 19:23:09 105493 [88083740] 0x80 -> Exiting SM\n"
	startBoxLines = "Nov 29 19:22:58 999349 [8507C6C0] 0x04 -> state_mgr_sweep_hop_0:\n\n\n" +
		"******************************************************************\n" +
		"********************* INITIATING HEAVY SWEEP *********************\n" +
		"******************************************************************\n\n\n"
)

// nextWithin calls Next with a generous deadline, only so that a broken
// follower fails the test instead of hanging it.
func nextWithin(t *testing.T, l *LogFollower) (Entry, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return l.Next(ctx)
}

func mustNext(t *testing.T, l *LogFollower, wantMessage string) Entry {
	t.Helper()
	e, err := nextWithin(t, l)
	if err != nil {
		t.Fatalf("Next: %v, want %q", err, wantMessage)
	}
	if e.Message != wantMessage {
		t.Fatalf("Next: %q, want %q", e.Message, wantMessage)
	}
	return e
}

// nothingYet asserts that Next returns no entry for a while (the data is not
// complete); a slower machine only makes this more certain.
func nothingYet(t *testing.T, l *LogFollower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if e, err := l.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next = %+v, %v; want nothing yet", e, err)
	}
}

func TestLogPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	pos, err := LogPosition(path)
	if err != nil || pos != (Position{}) {
		t.Fatalf("missing file: %+v, %v; want the zero position", pos, err)
	}
	opensmtest.AppendLog(t, path, subnetUpLine)
	pos, err = LogPosition(path)
	fi, _ := os.Stat(path)
	if err != nil || pos.Offset != int64(len(subnetUpLine)) || pos.Inode != inodeOf(fi) || pos.Inode == 0 {
		t.Errorf("position %+v, %v; want offset %d and the file's inode", pos, err, len(subnetUpLine))
	}
}

func TestFollowerWaitsForFileAndCompleteLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	l := FollowLog(path, Position{}) // taken before the file existed
	defer l.Close()
	// An open box is handed out after the patience: here never, so that a
	// slow machine cannot make the box below look abandoned
	// (TestFollowerHandsOutAnAbandonedBox checks the patience).
	l.patience = time.Hour
	nothingYet(t, l)

	opensmtest.AppendLog(t, path, subnetUpLine[:30])
	nothingYet(t, l)
	opensmtest.AppendLog(t, path, subnetUpLine[30:])
	mustNext(t, l, "SUBNET UP")

	// A box's header line alone is not handed out: its title is still to come.
	opensmtest.AppendLog(t, path, startBoxLines[:70])
	nothingYet(t, l)
	opensmtest.AppendLog(t, path, startBoxLines[70:])
	if e := mustNext(t, l, "state_mgr_sweep_hop_0:"); e.Title != "INITIATING HEAVY SWEEP" {
		t.Errorf("box title %q", e.Title)
	}
}

func TestFollowerStartsAtPosition(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, masterLine+subnetUpLine[:20])
	pos, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	// The position is inside the SUBNET UP line: its tail is no line.
	opensmtest.AppendLog(t, path, subnetUpLine[20:]+exitingLine)
	l := FollowLog(path, pos)
	defer l.Close()
	mustNext(t, l, "Exiting SM")
}

func TestFollowerTruncationInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, masterLine+subnetUpLine)
	l := FollowLog(path, Position{})
	defer l.Close()
	mustNext(t, l, "Entering MASTER state")
	mustNext(t, l, "SUBNET UP")

	// log_max_size: OpenSM truncates the file to 0 and goes on writing.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, exitingLine)
	if _, err := nextWithin(t, l); !errors.Is(err, ErrLogReset) {
		t.Fatalf("Next after truncation: %v, want ErrLogReset", err)
	}
	mustNext(t, l, "Exiting SM")
}

// followThenRotate follows a log that has read its first entry, then moves
// the file away as logrotate does; it returns the log's path (no file there
// now) and the follower, closed when the test ends.
func followThenRotate(t *testing.T) (string, *LogFollower) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, masterLine)
	l := FollowLog(path, Position{})
	t.Cleanup(func() { l.Close() })
	mustNext(t, l, "Entering MASTER state")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	return path, l
}

// logrotate moves the file; OpenSM writes on into the old one until it
// reopens (SIGUSR1), then into a new file.
func TestFollowerRotation(t *testing.T) {
	path, l := followThenRotate(t)
	opensmtest.AppendLog(t, path+".1", subnetUpLine)
	opensmtest.AppendLog(t, path, exitingLine)

	mustNext(t, l, "SUBNET UP")  // the old file is read to its end first
	mustNext(t, l, "Exiting SM") // then the new one, with nothing lost: no reset
}

// logrotate creates the new file before OpenSM reopens its log: until the new
// file holds data, OpenSM's lines still go to the old one, and are read.
func TestFollowerRotationNewFileCreatedFirst(t *testing.T) {
	path, l := followThenRotate(t)
	opensmtest.AppendLog(t, path, "") // logrotate's create
	nothingYet(t, l)
	opensmtest.AppendLog(t, path+".1", subnetUpLine) // OpenSM, not yet reopened
	mustNext(t, l, "SUBNET UP")
	opensmtest.AppendLog(t, path, exitingLine) // reopened
	mustNext(t, l, "Exiting SM")
}

func TestFollowerPositionInAnotherFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, masterLine)
	pos, err := LogPosition(path)
	if err != nil {
		t.Fatal(err)
	}
	// Replaced by a longer file between the position and the follower. (The
	// old file is kept: a deleted file's inode could be reused at once.)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	opensmtest.AppendLog(t, path, exitingLine+subnetUpLine)

	l := FollowLog(path, pos)
	defer l.Close()
	if _, err := nextWithin(t, l); !errors.Is(err, ErrLogReset) {
		t.Fatalf("Next: %v, want ErrLogReset", err)
	}
	mustNext(t, l, "Exiting SM") // from the beginning of the new file
}

// A box whose title never comes is handed out once the patience is over.
func TestFollowerHandsOutAnAbandonedBox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "opensm.log")
	opensmtest.AppendLog(t, path, startBoxLines[:70])
	l := FollowLog(path, Position{})
	defer l.Close()
	l.patience = 10 * time.Millisecond
	if e := mustNext(t, l, "state_mgr_sweep_hop_0:"); e.Title != "" {
		t.Errorf("box title %q, want none yet", e.Title)
	}
}

// TestFollowerNeverReadsThroughALink: OpenSM's user owns the log's directory
// and could put a link there to a file only the manager may read; its lines
// are never handed out as OpenSM's.
func TestFollowerNeverReadsThroughALink(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "afm.conf")
	opensmtest.AppendLog(t, secret, subnetUpLine)
	path := filepath.Join(dir, "opensm.log")
	if err := os.Symlink(secret, path); err != nil {
		t.Fatal(err)
	}
	l := FollowLog(path, Position{})
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if e, err := l.Next(ctx); err == nil || !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("Next = %+v, %v; want ELOOP, nothing of the linked file", e, err)
	}
}
