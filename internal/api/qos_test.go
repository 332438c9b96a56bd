package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

const qosPath = "/ufmRest/resources/pkeys/qos_conf"

// A QoS that UFM would not take is refused, saying what is wrong, and
// records nothing.
func TestPKeysQoSRefuseOddInput(t *testing.T) {
	f := newPKeysFixture(t, time.Second)
	add := `{"pkey":"0x1005","guids":["` + podGUID1 + `"],`
	tests := []struct {
		name, method, path, body, want string
	}{
		{"mtu 3", "PUT", qosPath, `{"pkey":"0x1005","mtu_limit":3}`, "mtu_limit 3: want 2 or 4 (KB)"},
		{"mtu as bytes", "PUT", qosPath, `{"pkey":"0x1005","mtu_limit":2048}`, "mtu_limit 2048: want 2 or 4"},
		{"mtu 2.5", "PUT", qosPath, `{"pkey":"0x1005","mtu_limit":2.5}`, "mtu_limit 2.5: want 2 or 4"},
		{"sl 16", "PUT", qosPath, `{"pkey":"0x1005","service_level":16}`, "service_level 16: want a whole number from 0 to 15"},
		{"sl -1", "PUT", qosPath, `{"pkey":"0x1005","service_level":-1}`, "service_level -1: want"},
		{"rate 7", "PUT", qosPath, `{"pkey":"0x1005","rate_limit":7}`, "rate_limit 7: want one of 2.5, 10, 30, 5, 20, 40, 60, 80, 120, 14, 56, 112, 168, 25, 100, 200, 300 (Gb/s)"},
		{"rate in Mb/s", "PUT", qosPath, `{"pkey":"0x1005","rate_limit":2500}`, "rate_limit 2500: want one of"},
		{"rate as a word", "PUT", qosPath, `{"pkey":"0x1005","rate_limit":"fast"}`, "not valid JSON for this resource"},
		{"nothing to set", "PUT", qosPath, `{"pkey":"0x1005"}`, "no QoS to set: give mtu_limit, service_level or rate_limit"},
		{"no pkey", "PUT", qosPath, `{"mtu_limit":4}`, `"pkey" is missing`},
		{"pkey outside the range", "PUT", qosPath, `{"pkey":"0x2000","mtu_limit":4}`, "outside [ufm_pkeys] pkey_range"},
		{"the default partition", "PUT", qosPath, `{"pkey":"0x7fff","mtu_limit":4}`, "pkey 0x7fff is the default partition's"},
		{"unknown field", "PUT", qosPath, `{"pkey":"0x1005","mtu":4}`, `unknown field "mtu"`},
		{"add: sl 99", "POST", "/ufmRest/resources/pkeys", add + `"service_level":99}`, "service_level 99: want"},
		{"add: rate 3", "POST", "/ufmRest/resources/pkeys", add + `"rate_limit":3}`, "rate_limit 3: want one of"},
		{"create: mtu 1", "POST", "/ufmRest/resources/pkeys/add", `{"pkey":"0x1005","mtu_limit":1}`, "mtu_limit 1: want 2 or 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			answer := f.must(tt.method, tt.path, tt.body, http.StatusBadRequest)
			var e struct{ Error string }
			if err := json.Unmarshal([]byte(answer), &e); err != nil || !strings.Contains(e.Error, tt.want) {
				t.Errorf("answer %s, want an error saying %q", answer, tt.want)
			}
			if r := f.revision(); r != 0 {
				t.Errorf("a refused request moved the revision to %d", r)
			}
		})
	}
	f.must("PUT", qosPath, `{"pkey":"0x1005","mtu_limit":4}`, http.StatusNotFound)
	f.must("GET", "/ufmRest/resources/pkeys?qos_conf=maybe", "", http.StatusBadRequest)
	if r := f.revision(); r != 0 {
		t.Errorf("QoS of an unknown pkey moved the revision to %d", r)
	}
}

// A pkey whose QoS no client set reads what OpenSM applies to it (its IPoIB
// group's 2048 bytes and 10 Gb/s, SL 0), not UFM's defaults, whose 2.5 Gb/s
// is not applied; PUT qos_conf changes what it names (the rest from UFM's
// defaults) and
// is answered once applied; every read with qos_conf=true shows the QoS, as
// UFM writes it (rate 2.5 as 2.5), and none without.
func TestPKeysQoSCycle(t *testing.T) {
	f := newAppliedPKeysFixture(t)
	f.must("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1005","ip_over_ib":true,"membership":"full","guids":["`+podGUID1+`"]}`, 200)
	const applied = `"qos_conf":{"mtu_limit":2,"rate_limit":10,"service_level":0}`
	if got := f.must("GET", "/ufmRest/resources/pkeys?qos_conf=true", "", 200); !strings.Contains(got, `"0x1005":{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,`+applied+`}`) {
		t.Errorf("list with qos_conf of a new pkey = %s", got)
	}

	answer := f.must("PUT", qosPath, `{"pkey":"0x1005","mtu_limit":4,"service_level":0,"rate_limit":200}`, 200)
	var done appliedView
	if err := json.Unmarshal([]byte(answer), &done); err != nil || !done.Applied || done.Job.Status != "Completed" ||
		done.Message != "Kubernetes pkey 0x1005 has QoS mtu_limit 4, service_level 0, rate_limit 200" {
		t.Fatalf("PUT qos_conf answered %s", answer)
	}
	want := `{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,"guids":[{"guid":"` + podGUID1 +
		`","membership":"full","index0":false}],"qos_conf":{"mtu_limit":4,"rate_limit":200,"service_level":0}}`
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1005?guids_data=true&qos_conf=true", "", 200); strings.TrimSpace(got) != want {
		t.Errorf("GET with guids_data and qos_conf =\n%s\nwant\n%s", got, want)
	}
	// A PUT that names one field keeps the others.
	f.must("PUT", qosPath, `{"pkey":"0x1005","service_level":5}`, 200)
	if got := f.must("GET", "/ufmRest/resources/pkeys/0x1005?qos_conf=true", "", 200); !strings.Contains(got, `"qos_conf":{"mtu_limit":4,"rate_limit":200,"service_level":5}`) {
		t.Errorf("after a PUT of service_level alone: %s", got)
	}
	// A POST that adds GUIDs without QoS keeps the pkey's; one with QoS sets it.
	f.must("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1005","guids":["`+podGUID2+`"]}`, 200)
	f.must("POST", "/ufmRest/resources/pkeys", `{"pkey":"0x1006","guids":["`+podGUID2+`"],"rate_limit":10,"mtu_limit":4}`, 200)
	f.must("POST", "/ufmRest/resources/pkeys/add", `{"pkey":"0x1007","service_level":15}`, 200)
	list := f.must("GET", "/ufmRest/resources/pkeys?qos_conf=true", "", 200)
	for _, w := range []string{
		`"0x1005":{"pkey":"0x1005","partition":"k8s-1005","ip_over_ib":true,"qos_conf":{"mtu_limit":4,"rate_limit":200,"service_level":5}}`,
		`"0x1006":{"pkey":"0x1006","partition":"k8s-1006","ip_over_ib":true,"qos_conf":{"mtu_limit":4,"rate_limit":10,"service_level":0}}`,
		`"0x1007":{"pkey":"0x1007","partition":"k8s-1007","ip_over_ib":true,"qos_conf":{"mtu_limit":2,"rate_limit":2.5,"service_level":15}}`,
	} {
		if !strings.Contains(list, w) {
			t.Errorf("list with qos_conf = %s\nwant it to hold %s", list, w)
		}
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys", "", 200); strings.Contains(got, "qos_conf") {
		t.Errorf("list without qos_conf = %s", got)
	}
	if got := f.must("GET", "/ufmRest/resources/pkeys?qos_conf=false", "", 200); strings.Contains(got, "qos_conf") {
		t.Errorf("list with qos_conf=false = %s", got)
	}
}
