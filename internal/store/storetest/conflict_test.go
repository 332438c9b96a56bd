package storetest

import (
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// onTwoGaleraNodes runs fn with two managers, each on a node of its own.
func onTwoGaleraNodes(t *testing.T, fn func(t *testing.T, a, b *store.Store)) {
	m := OpenGaleraManagers(t)
	fn(t, m[0], m[1])
}

func TestGaleraGroupLosingCertificationRunsAgain(t *testing.T) {
	onTwoGaleraNodes(t, testGaleraGroupConflict)
}

func TestGaleraJobIDsFromTwoNodes(t *testing.T) {
	onTwoGaleraNodes(t, testGaleraJobIDsFromTwoNodes)
}

func TestGaleraReadsAfterAnotherNodesCommit(t *testing.T) {
	onTwoGaleraNodes(t, testGaleraReadsAfterAnotherNodesCommit)
}

func TestGaleraJobNeverWithoutItsChange(t *testing.T) {
	onTwoGaleraNodes(t, testGaleraJobNeverWithoutItsChange)
}
