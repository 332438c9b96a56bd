package storetest

import "testing"

func TestGaleraGroupLosingCertificationRunsAgain(t *testing.T) {
	m := OpenGaleraManagers(t)
	testGaleraGroupConflict(t, m[0], m[1])
}
