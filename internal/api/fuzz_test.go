package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/fabric"
	"github.com/alternative-fabric-manager/alternative-fabric-manager/internal/store"
)

// FuzzDecodeRequest feeds arbitrary bodies to the network and port decoders: they
// must never panic, refuse with a 4xx and a message, and accept only objects that
// are consistent (an id that passes checkID and agrees with the path, a port
// with its network, a GUID or a reason for none, never both).
func FuzzDecodeRequest(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "")
		f.Add(b, "3b9d6a52-7c1e-4f0a-9e2d-5a8c4b1f6e73")
	}
	f.Add([]byte(`{"id":"n","segments":[{"provider:network_type":"vxlan"},{"provider:network_type":"flat"}]}`), "")
	f.Add([]byte(`{"id":"p","network_id":"n","network":{"id":"m"}}`), "p")
	f.Add([]byte(`{"id":"p","network_id":"n","extra_dhcp_opts":[{"opt_name":"61","opt_value":"zz"}]}`), "")
	f.Fuzz(func(t *testing.T, body []byte, pathID string) {
		checkRefusal := func(err error) {
			var he *httpError
			if !errors.As(err, &he) || he.status < 400 || he.status > 499 || he.msg == "" {
				t.Fatalf("refusal %v is not a 4xx with a message", err)
			}
		}
		spec, err := decodeNetwork(body, pathID)
		if err != nil {
			checkRefusal(err)
		} else {
			if _, err := checkID("network", spec.ID); err != nil || (pathID != "" && spec.ID != pathID) {
				t.Fatalf("accepted network id %q with path id %q", spec.ID, pathID)
			}
		}
		c, err := decodePort(body, pathID)
		if err != nil {
			checkRefusal(err)
			return
		}
		if _, err := checkID("port", c.Port.ID); err != nil || (pathID != "" && c.Port.ID != pathID) {
			t.Fatalf("accepted port id %q with path id %q", c.Port.ID, pathID)
		}
		if c.Port.NetworkID == "" || (c.Network != nil && c.Network.ID != c.Port.NetworkID) {
			t.Fatalf("accepted port on network %q with embedded network %+v", c.Port.NetworkID, c.Network)
		}
		if c.Port.GUID != nil && c.ClientIDError != nil {
			t.Fatalf("port has both GUID %s and client-id error %v", *c.Port.GUID, c.ClientIDError)
		}
		if c.Port.GUID != nil && (uint64(*c.Port.GUID) == 0 || ^uint64(*c.Port.GUID) == 0) {
			t.Fatalf("port accepted with GUID %s", *c.Port.GUID)
		}
	})
}

// The decoder's refusals answer with the status the fuzz target expects.
func TestDecodeRefusalsAreBadRequests(t *testing.T) {
	for _, body := range []string{`[]`, `{"id": 1}`, `{}`, `{"id":"p"}`, `{"id":"p","network_id":"n","network":{"id":"m"}}`} {
		_, err := decodePort([]byte(body), "")
		var he *httpError
		if !errors.As(err, &he) || he.status != http.StatusBadRequest {
			t.Errorf("decodePort(%s) = %v, want a 400", body, err)
		}
	}
}

// FuzzDecodePKeysChange feeds arbitrary bodies to the pkeys API's add
// decoder: it must never panic, refuse with a 4xx and a message, and accept
// only a pkey without the membership bit and at least one distinct port GUID,
// each full or limited.
func FuzzDecodePKeysChange(f *testing.F) {
	f.Add([]byte(`{"pkey": "0x0005", "index0": true, "ip_over_ib": true, "membership": "full", "guids": ["020000000000003e"]}`))
	f.Add([]byte(`{"pkey": "0x1005", "guids": ["020000000000003e", "020000000000003f"], "memberships": ["full", "limited"]}`))
	f.Add([]byte(`{"pkey": "0x1005", "guids": ["02:00:00:00:00:00:00:3e"], "membership": "limited", "index0": false}`))
	f.Add([]byte(`{"pkey": "0xFFFF", "guids": []}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var b addBody
		err := decodeStrict(body, &b)
		var a store.KubernetesAddition
		if err == nil {
			a, err = b.addition()
		}
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status < 400 || he.status > 499 || he.msg == "" {
				t.Fatalf("refusal %v is not a 4xx with a message", err)
			}
			return
		}
		if a.PKey == 0 || a.PKey&0x8000 != 0 || len(a.Members) == 0 {
			t.Fatalf("accepted pkey %s with %d members", a.PKey, len(a.Members))
		}
		seen := map[fabric.GUID]bool{}
		for _, m := range a.Members {
			if m.GUID == 0 || ^uint64(m.GUID) == 0 || seen[m.GUID] ||
				(m.Membership != fabric.Full && m.Membership != fabric.Limited) {
				t.Fatalf("accepted member %+v of %+v", m, a.Members)
			}
			seen[m.GUID] = true
		}
	})
}

// FuzzPKeysGUIDList holds the pkeys API's reading of a GUID list, as an
// addition's and a removal's body carry it, to a reference reading: a list is
// accepted exactly when each entry is 16 hex digits (an optional 0x, either
// case) of a port GUID (not 0, not all ones) and no GUID comes twice, however
// written; the GUIDs keep their order; the request is answered 413 exactly
// when it lists more than max_guids_per_request, whatever its entries; and
// every refusal is a 4xx with a message. The list is the fuzzer's bytes cut
// at commas.
func FuzzPKeysGUIDList(f *testing.F) {
	f.Add("020000000000003e,020000000000003f", uint16(4))
	f.Add("0x020000000000003E,020000000000003e", uint16(4))
	f.Add("0000000000000000", uint16(1))
	f.Add("ffffffffffffffff,02:00:00:00:00:00:00:3e", uint16(1))
	f.Add("020000000000003e,020000000000003f,0200000000000040", uint16(2))
	f.Add("", uint16(0))
	f.Add("+20000000000003e,0x0x00000000003e", uint16(3))
	f.Fuzz(func(t *testing.T, text string, most uint16) {
		list := strings.Split(text, ",")
		want, wantOK := referenceGUIDs(list)

		pk := &pkeysAPI{o: PKeysOptions{MaxGUIDsPerRequest: int(most)}}
		limit := int(most)
		if limit == 0 {
			limit = DefaultMaxGUIDsPerRequest
		}
		err := pk.checkGUIDCount(len(list))
		var he *httpError
		if (len(list) > limit) != (err != nil) ||
			(err != nil && (!errors.As(err, &he) || he.status != http.StatusRequestEntityTooLarge || he.msg == "")) {
			t.Fatalf("%d GUIDs, at most %d: checkGUIDCount = %v", len(list), limit, err)
		}

		got, err := parseGUIDs(list)
		if err != nil {
			if !errors.As(err, &he) || he.status != http.StatusBadRequest || he.msg == "" {
				t.Fatalf("refusal %v is not a 400 with a message", err)
			}
		}
		if (err == nil) != wantOK || (wantOK && !slices.Equal(got, want)) {
			t.Fatalf("parseGUIDs(%q) = %v, %v; want %v, accepted %t", list, got, err, want, wantOK)
		}

		// The same list in the body ib-kubernetes sends (JSON carries only
		// valid UTF-8 as is).
		if !validUTF8(list) {
			return
		}
		body, merr := json.Marshal(map[string]any{"pkey": "0x1005", "guids": list, "membership": "limited"})
		if merr != nil {
			t.Fatal(merr)
		}
		var add addBody
		var a store.KubernetesAddition
		err = decodeStrict(body, &add)
		if err == nil {
			a, err = add.addition()
		}
		if (err == nil) != wantOK {
			t.Fatalf("addition of %q: %v, want accepted %t", list, err, wantOK)
		}
		for i, m := range a.Members {
			if m.GUID != want[i] || m.Membership != fabric.Limited {
				t.Fatalf("addition of %q: member %d is %+v, want %s limited", list, i, m, want[i])
			}
		}
	})
}

// referenceGUIDs reads a GUID list the way the pkeys API documents it,
// independently of parseGUIDs.
func referenceGUIDs(list []string) ([]fabric.GUID, bool) {
	if len(list) == 0 {
		return nil, false
	}
	var out []fabric.GUID
	for _, text := range list {
		h := strings.ToLower(text)
		h = strings.TrimPrefix(h, "0x")
		if len(h) != 16 {
			return nil, false
		}
		var v uint64
		for _, c := range h {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | uint64(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | uint64(c-'a'+10)
			default:
				return nil, false
			}
		}
		if v == 0 || v == ^uint64(0) || slices.Contains(out, fabric.GUID(v)) {
			return nil, false
		}
		out = append(out, fabric.GUID(v))
	}
	return out, true
}

func validUTF8(list []string) bool {
	return !slices.ContainsFunc(list, func(s string) bool { return !utf8.ValidString(s) })
}
