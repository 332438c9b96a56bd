package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/testenv"
)

// waitStatusAgrees waits until the held job's reasons (its description's
// "Not completing: " line) are, in the same words and order, a run of the
// reasons --status --json lists: the job and --status say one verdict. It
// polls, since the job is described at the applier's next poll of the gates.
func (m *manager) waitStatusAgrees(job string) {
	m.t.Helper()
	var said string
	var listed []string
	agree := func() bool {
		_, said, _ = strings.Cut(m.job(job).Description, "Not completing: ")
		said, _, _ = strings.Cut(said, "\n")
		var s struct {
			NotCompleting []string `json:"not_completing"`
		}
		out, _ := m.tryOperator("--status", "--json")
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			return false
		}
		listed = s.NotCompleting
		return said != "" && isRunOf(said, listed)
	}
	testenv.Await(m.t, "job "+job+" and --status to say one verdict", time.Minute, 100*time.Millisecond, func() (bool, error) {
		return agree(), fmt.Errorf("job %s says %q; --status --json not_completing = %q", job, said, listed)
	})
}

// isRunOf says whether said is some consecutive reasons of listed, joined as
// a job's text joins them.
func isRunOf(said string, listed []string) bool {
	for i := range listed {
		for j := i + 1; j <= len(listed); j++ {
			if strings.Join(listed[i:j], "; ") == said {
				return true
			}
		}
	}
	return false
}
