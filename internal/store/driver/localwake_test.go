package driver

import "testing"

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
