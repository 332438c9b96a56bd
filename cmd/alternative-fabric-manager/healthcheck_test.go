package main

import "testing"

func TestHealthzURL(t *testing.T) {
	for _, tc := range []struct{ listen, want string }{
		{"127.0.0.1:8090", "http://127.0.0.1:8090/healthz"},
		{"0.0.0.0:8090", "http://127.0.0.1:8090/healthz"},
		{":8090", "http://127.0.0.1:8090/healthz"},
		{"[::]:8090", "http://[::1]:8090/healthz"},
		{"[fd00::5]:80", "http://[fd00::5]:80/healthz"},
		{"controller1:8090", "http://controller1:8090/healthz"},
	} {
		got, err := healthzURL(tc.listen)
		if err != nil || got != tc.want {
			t.Errorf("healthzURL(%q) = %q, %v; want %q", tc.listen, got, err, tc.want)
		}
	}
	if _, err := healthzURL("8090"); err == nil {
		t.Error("healthzURL(\"8090\") succeeded; want an error (no host:port)")
	}
}
