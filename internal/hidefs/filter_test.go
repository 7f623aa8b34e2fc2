package hidefs

import "testing"

func TestPolicyFilter(t *testing.T) {
	f := ignores("/srv/p", ".env", "*.log", "/srv/p/keys/*.pem", "/srv/p/*/secret", "/elsewhere/x")
	for rel, want := range map[string]bool{
		".env":         true,
		"a/b/.env":     true,
		".env.example": false,
		"x.log":        true,
		"keys/a.pem":   true,
		"keys/a.txt":   false,
		"a/keys/a.pem": false,
		"a/secret":     true,
		"a/b/secret":   false,
		"x":            false,
	} {
		if got := f.Hidden(rel); got != want {
			t.Errorf("Hidden(%q) = %v, want %v", rel, got, want)
		}
	}
	for rel, want := range map[string]bool{
		"keys":   true,  // keys/*.pem
		"a":      true,  // */secret
		"a/b":    false, // nothing three levels down
		"keys/x": false,
	} {
		if got := f.HidesBelow(rel); got != want {
			t.Errorf("HidesBelow(%q) = %v, want %v", rel, got, want)
		}
	}
	if ignores("/srv/p", ".env").HidesBelow("a") {
		t.Error("base-name rules move with their directory: HidesBelow must be false")
	}
	root := ignores("/", "/etc/shadow")
	if !root.Hidden("etc/shadow") || root.Hidden("etc/passwd") || !root.HidesBelow("etc") {
		t.Error("a filter for the root directory")
	}
}
