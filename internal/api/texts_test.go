package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store/storetest"
)

// A body whose strings hold bytes that are not UTF-8 (a name in Latin-1)
// decodes, so it is recorded and answered 202 on every engine, as any other:
// the store cleans what the job keeps of it. PostgreSQL and MariaDB refused
// the raw body, and the change answered 500, which networking-mlnx counts
// against its retries, for ever.
func TestBodyOfInvalidUTF8IsRecorded(t *testing.T) {
	body := strings.Replace(testdata(t, "network_create_vlan.json"), `"name": "`, "\"name\": \"caf\xe9 ", 1)
	if !strings.Contains(body, "caf\xe9") {
		t.Fatal("the test's body has no Latin-1 byte")
	}
	for _, engine := range storetest.Engines {
		t.Run(engine, func(t *testing.T) {
			f := newFixture(t, engine)
			resp, answer := f.do("POST", "/ufmRestV3/cloudx/Network", body)
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("POST Network: %d %s", resp.StatusCode, answer)
			}
			path, _ := jobPath(t, answer)
			if resp, answer := f.do("GET", "/ufmRestV3/"+path, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET job: %d %s", resp.StatusCode, answer)
			}
		})
	}
}

// A job's texts are served with the characters a terminal acts on escaped,
// as the store now writes them, from a row written before it did too: a
// client's log or an operator's curl prints them.
func TestJobTextsServedEscaped(t *testing.T) {
	const raw = "Not completing: network net\x1b[8m\u202e\r\nclean"
	const want = `Not completing: network net\x1b[8m\u202e\r` + "\n" + "clean"
	for _, j := range []store.Job{{Status: store.StatusCompleted, Description: raw, Result: raw},
		{Status: store.StatusFailed, Description: raw, Error: raw}} {
		v := viewJob(j)
		if v.Description != want || v.Summary != want {
			t.Errorf("%s job served as %q, %q; want %q", j.Status, v.Description, v.Summary, want)
		}
	}
}

// Every answer writes DEL, the C1 controls and U+202E of a text it quotes
// (a node's description, a name in a refusal) as JSON escapes.
func TestAnswersEscapeTerminalControls(t *testing.T) {
	rec := httptest.NewRecorder()
	writeJSON(rec, http.StatusOK, map[string]string{"description": "h1\u202e\u009b2J\x7f\x1b"})
	if got, want := rec.Body.String(), `{"description":"h1\u202e\u009b2J\u007f\u001b"}`+"\n"; got != want {
		t.Errorf("answer %q, want %q", got, want)
	}
}
