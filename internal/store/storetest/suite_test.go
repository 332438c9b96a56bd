package storetest

import "testing"

func TestStore(t *testing.T) {
	for _, engine := range Engines {
		t.Run(engine, func(t *testing.T) { Run(t, engine) })
	}
}
