package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"testing"
)

// TestSec3_HostsAndOrigins: the Host allow-list of dev mode and the Origin
// rule, edge cases included (ports, IPv6, look-alike names, userinfo).
func TestSec3_HostsAndOrigins(t *testing.T) {
	h := NewHosts("aml.lab", "box.lab:9000", "0.0.0.0:8080", "[::]")
	for host, want := range map[string]bool{
		"localhost:8080": true, "LOCALHOST": true, "127.0.0.5:1": true, "[::1]:80": true, "::1": true,
		"aml.lab": true, "aml.lab:1234": true, "box.lab:9000": true, "box.lab:9001": false, "box.lab": false,
		"evil.example": false, "": false, "0.0.0.0:8080": false, "[::]:8080": false,
		"localhost.evil.example": false, "evil.localhost": false, "127.0.0.1.evil.example": false,
	} {
		if got := h.AllowHost(host); got != want {
			t.Errorf("AllowHost(%q) = %v, want %v", host, got, want)
		}
	}
	for origin, ok := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "https://aml.lab:8080": true,
		"http://box.lab:9000": true, "http://localhost:3000": false, "http://aml.lab": false,
		"null": false, "file://": false, "https://evil.example": false,
		"http://127.0.0.1:8080.evil.example": false, "http://127.0.0.1:8080@evil.example": false,
		"chrome-extension://abc": false,
	} {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Host = "127.0.0.1:8080"
		r.Header.Set("Origin", origin)
		if err := h.CheckOrigin(r); (err == nil) != ok {
			t.Errorf("Origin %q: %v, want allowed %v", origin, err, ok)
		}
	}
	r := httptest.NewRequest("POST", "/x", nil)
	r.Host = "127.0.0.1:8080"
	if err := h.CheckOrigin(r); err != nil {
		t.Errorf("no browser headers: %v", err)
	}
	r.Header.Set("Sec-Fetch-Site", "none") // typed into the address bar
	if err := h.CheckOrigin(r); err != nil {
		t.Errorf("Sec-Fetch-Site none: %v", err)
	}
}

// TestSec3_DevCSRFTokenNotGuessable: in dev mode there is no session
// token, so the CSRF token of the UI's forms must not be a constant anyone
// can compute (it is keyed by a secret of the process); with a session it
// is the session's and differs per token.
func TestSec3_DevCSRFTokenNotGuessable(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	public := sha256.Sum256([]byte("aml-ui-csrf\x00"))
	if got := CSRFToken(r); got == hex.EncodeToString(public[:16]) || got != CSRFToken(r) {
		t.Fatalf("tokenless CSRF token %q is the public constant or unstable", got)
	}
	a, b := httptest.NewRequest("GET", "/", nil), httptest.NewRequest("GET", "/", nil)
	a.Header.Set("Authorization", "Bearer aml_a")
	b.Header.Set("Authorization", "Bearer aml_b")
	if CSRFToken(a) == CSRFToken(b) || CSRFToken(a) == CSRFToken(r) {
		t.Fatal("CSRF tokens of different sessions coincide")
	}
}
