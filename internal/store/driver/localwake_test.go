package driver

import (
	"testing"
	"time"
)

// A commit that says its revision wakes the waiters of its fabric and of
// every fabric, and keeps the newest revision until it is taken, once; a
// commit that says none wakes every waiter and keeps nothing.
func TestLocalWakeKeepsTheCommittedRevision(t *testing.T) {
	var w LocalWake
	ctx := t.Context()
	all, def, storage := w.Wake(ctx), make(chan struct{}, 1), make(chan struct{}, 1)
	w.WakeInto(ctx, "default", def)
	w.WakeInto(ctx, "storage", storage)
	woken := func(chs ...<-chan struct{}) (n int) {
		for _, ch := range chs {
			select {
			case <-ch:
				n++
			default:
			}
		}
		return n
	}
	var c, older Committed
	c.Set("default", 7)
	older.Set("default", 6)
	w.NotifyCommitted(&c)
	w.NotifyCommitted(&older) // a group that committed before, answered later
	if n := woken(all, def); n != 2 || woken(storage) != 0 {
		t.Errorf("default's commit woke %d of its 2 waiters, or storage's", n)
	}
	if rev, ok := w.TakeCommitted("default"); !ok || rev != 7 {
		t.Errorf("TakeCommitted(default) = %d, %t; want 7", rev, ok)
	}
	if rev, ok := w.TakeCommitted("default"); ok {
		t.Errorf("TakeCommitted(default) again = %d; want none", rev)
	}
	w.Notify()
	if n := woken(all, def, storage); n != 3 {
		t.Errorf("a commit that says no revision woke %d of 3 waiters", n)
	}
	if rev, ok := w.TakeCommitted("storage"); ok {
		t.Errorf("TakeCommitted(storage) = %d; want none", rev)
	}
}

// The engine's notification of a revision this process's COMMIT will wake
// its waiters for is an echo, for that revision and the ones before it (a
// transaction of several changes is notified for each), until the newest
// one's echo came or echoWindow passed, and not once the COMMIT failed; any
// other notification wakes.
func TestLocalWakeEcho(t *testing.T) {
	type ask struct {
		fabric   string
		revision int64
		after    time.Duration // since the commit
		echo     bool
	}
	for _, tc := range []struct {
		name string
		asks []ask
	}{
		{"nothing committed", []ask{{"default", 7, 0, false}}},
		{"the commit's own", []ask{{"default", 7, 0, true}, {"default", 7, 0, false}}},
		{"a group's earlier revisions, then its own", []ask{{"default", 5, 0, true}, {"default", 6, 0, true},
			{"default", 7, 0, true}, {"default", 6, 0, false}}},
		{"a newer revision: another process's", []ask{{"default", 8, 0, false}, {"default", 7, 0, true}}},
		{"another fabric's", []ask{{"storage", 7, 0, false}}},
		{"past the window", []ask{{"default", 7, echoWindow + time.Millisecond, false}}},
		{"the COMMIT failed", []ask{{"default", 7, 0, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := time.Unix(1_800_000_000, 0)
			now := at
			w := LocalWake{now: func() time.Time { return now }}
			if tc.name != "nothing committed" {
				var c Committed
				c.Set("default", 7)
				if forget := w.ExpectEcho(&c); tc.name == "the COMMIT failed" {
					forget()
				}
			}
			for _, a := range tc.asks {
				now = at.Add(a.after)
				if got := w.Echo(a.fabric, a.revision); got != a.echo {
					t.Errorf("Echo(%s, %d) %v after the commit = %t, want %t", a.fabric, a.revision, a.after, got, a.echo)
				}
			}
		})
	}
}
