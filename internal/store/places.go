package store

import (
	"fmt"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
)

// A job's proof obligation: the places its change touches, recorded with the
// job in the change's transaction, and what each must hold once the change is
// applied. The read-back proof ([opensm] verify = tables) reads exactly these
// places, whatever the applier remembers: a new term, a restart, a gate that
// reopened or a pkey error elsewhere in the sweep change nothing of what a job
// must show before it completes.

// Want is what a place must hold once its job's change is applied.
type Want string

const (
	WantFull    Want = "full"    // the port is a full member of the pkey
	WantLimited Want = "limited" // a limited member
	WantAbsent  Want = "absent"  // the port's table (and its switch port's) no longer holds the pkey
)

// Place is one host port and one pkey of its table that a job's change
// touches, with what the change promises there. The switch port facing the
// host port is read with it and must agree.
type Place struct {
	GUID fabric.GUID
	PKey fabric.PKey
	Want Want
}

func (p Place) String() string {
	return fmt.Sprintf("port %s, pkey %s: %s", p.GUID, p.PKey, p.Want)
}
