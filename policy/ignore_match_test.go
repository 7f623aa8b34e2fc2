package policy

import "testing"

func TestIgnoredEntryAndByAbsolute(t *testing.T) {
	ignores := []Ignore{
		{Rule: Rule{Key: "ignore", Value: ".env"}, Pattern: ".env"},
		{Rule: Rule{Key: "ignore", Value: "/srv/secret*"}, Pattern: "/srv/secret*", Absolute: true},
	}
	for _, c := range []struct {
		path          string
		entry, absolu bool
		rule          string
	}{
		{"/app/.env", true, false, ".env"},
		{"/app/env", false, false, ""},
		{"/srv/secrets", true, true, "/srv/secret*"},
		{"/srv/secrets/key", false, true, "/srv/secret*"}, // an entry is matched by its own path only
		{"/srv/public", false, false, ""},
	} {
		ig, ok := IgnoredEntry(c.path, ignores)
		if ok != c.entry || (ok && ig.Value != c.rule) {
			t.Errorf("IgnoredEntry(%s) = %v, %v", c.path, ig.Value, ok)
		}
		ig, ok = IgnoredByAbsolute(c.path, ignores)
		if ok != c.absolu || (ok && ig.Value != c.rule) {
			t.Errorf("IgnoredByAbsolute(%s) = %v, %v", c.path, ig.Value, ok)
		}
	}
}
