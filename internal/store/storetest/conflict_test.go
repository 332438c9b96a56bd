package storetest

import "testing"

func TestGaleraGroupLosingCertificationRunsAgain(t *testing.T) {
	m := OpenGaleraManagers(t)
	testGaleraGroupConflict(t, m[0], m[1])
}

func TestGaleraJobIDsFromTwoNodes(t *testing.T) {
	m := OpenGaleraManagers(t)
	testGaleraJobIDsFromTwoNodes(t, m[0], m[1])
}

func TestGaleraReadsAfterAnotherNodesCommit(t *testing.T) {
	m := OpenGaleraManagers(t)
	testGaleraReadsAfterAnotherNodesCommit(t, m[0], m[1])
}

func TestGaleraJobNeverWithoutItsChange(t *testing.T) {
	m := OpenGaleraManagers(t)
	testGaleraJobNeverWithoutItsChange(t, m[0], m[1])
}
