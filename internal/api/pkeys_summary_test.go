package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A change of thousands of GUIDs is answered as any other, with a job whose
// texts summarise the GUIDs (the first few, and how many) instead of listing
// every one; the job object keeps UFM's shape.
func TestPKeysManyGUIDsAnswerASummary(t *testing.T) {
	f := newAppliedPKeysFixture(t)

	guids := make([]string, 3000)
	for i := range guids {
		guids[i] = fmt.Sprintf("0200000000%06x", i+1)
	}
	body, _ := json.Marshal(map[string]any{"pkey": "0x1005", "guids": guids, "membership": "full"})
	answer := f.must("POST", "/ufmRest/resources/pkeys", string(body), 200)
	var applied struct {
		Applied bool                       `json:"applied"`
		Message string                     `json:"message"`
		Job     map[string]json.RawMessage `json:"job"`
	}
	if err := json.Unmarshal([]byte(answer), &applied); err != nil || !applied.Applied {
		t.Fatalf("add of 3,000 GUIDs answered %.300s (%v)", answer, err)
	}
	const wantMessage = "GUIDs 0200000000000001 (full), 0200000000000002 (full), 0200000000000003 (full), " +
		"0200000000000004 (full), 0200000000000005 (full), 0200000000000006 (full), 0200000000000007 (full), " +
		"0200000000000008 (full) and 2992 more (3000 in all) in Kubernetes pkey 0x1005"
	if applied.Message != wantMessage {
		t.Errorf("message %.300q, want %q", applied.Message, wantMessage)
	}
	var job jobView
	raw, _ := json.Marshal(applied.Job)
	if err := json.Unmarshal(raw, &job); err != nil || len(applied.Job) != 12 {
		t.Fatalf("job %s (%v): want UFM's job object, its 12 fields", raw, err)
	}
	if job.Status != "Completed" || job.Progress != 100 || job.Summary != wantMessage ||
		job.Description != "Add "+strings.TrimSuffix(wantMessage, " in Kubernetes pkey 0x1005")+" to Kubernetes pkey 0x1005" ||
		len(job.RelatedObjects) != 1 || job.RelatedObjects[0] != "0x1005" || job.CreatedBy != kubernetesPrincipal {
		t.Errorf("job %+v", job)
	}
}
