package policy

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// String prints the policy back as a valid rule file: every rule in load order, with
// its effective value (after ${...} substitution; expose-* directories canonical;
// learn= absolute), each followed by a comment naming where it came from. Includes
// are already spliced in. Loading the printed text again, with the same environment,
// gives an equivalent policy (host names in net= rules are resolved again).
//
// A value that cannot be written literally (one holding "${", a '#' that would start
// a comment, a line break, or unbalanced quotes before the provenance comment) is
// printed as it was written, so that it resolves again to the same value; a
// file-scalar overridden by a rule given by code is left out, as it took no effect.
func (p *Policy) String() string {
	var b strings.Builder
	_, _ = p.WriteTo(&b)
	return b.String()
}

// WriteTo writes String's text to w.
func (p *Policy) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	cw := &countWriter{w: bw}
	if p.Path != "" {
		cw.printf("# Rules loaded from %s\n", commentText(p.Path))
	}
	printed := map[string]bool{} // eval scalar keys already printed
	nIgnore := 0                 // ignore= rules seen: p.ignores holds them in order
	for i, r := range p.rules {
		if r.Key == "ignore" && nIgnore < len(p.ignores) && p.ignores[nIgnore].Rule == r {
			// Print the pattern with "~" expanded, as expose-* prints its directory.
			ig := p.ignores[nIgnore]
			nIgnore++
			if ig.Pattern != strings.TrimSpace(r.Value) {
				r.Value = ig.Pattern
			}
		}
		if evalScalarKey(r.Key) {
			if printed[r.Key] {
				continue // a file value overridden by <arg>: it took no effect
			}
			printed[r.Key] = true
		}
		line := p.formatRule(i, r)
		if where := r.Ref.String(); where != "" {
			where = commentText(where)
			if c := line + "  # " + where; stripComment(c) == line {
				line = c
			} else {
				// The comment would be swallowed by an open quote of the rule: put it
				// on its own line.
				cw.printf("# %s\n", where)
			}
		}
		cw.printf("%s\n", line)
	}
	if cw.err == nil {
		cw.err = bw.Flush()
	}
	return cw.n, cw.err
}

// evalScalarKey reports whether key is a scalar eval-* key, with or without a
// profile suffix.
func evalScalarKey(key string) bool {
	base, _, _ := strings.Cut(key, ":")
	return strings.HasPrefix(base, "eval-") && slices.Contains(evalScalarKeyNames(), base)
}

// formatRule renders the rule of index i in p.rules with its effective value.
func (p *Policy) formatRule(i int, r Rule) string {
	key, value := r.Key, r.Value
	literal := true // value is the effective value, not the text as written
	switch r.Key {
	case "env", "unenv", "set-env", "unset-env":
		// env= and unenv= keep their values as written: the environment family
		// resolves them itself.
		literal = false
		switch key {
		case "set-env":
			key = "env"
		case "unset-env":
			key = "unenv"
		}
	case "expose-ro", "expose-rw", "bind", "ro-bind":
		if dir, ok := p.exposeAt[i]; ok {
			mode := ReadOnly
			if r.Key == "expose-rw" || r.Key == "bind" {
				mode = ReadWrite
			}
			key, value = "expose-"+mode.String(), dir
		}
	case "learn":
		if strings.EqualFold(strings.TrimSpace(r.Value), "false") {
			value = "false"
		} else if c := p.control["learn"]; c != nil && *c == r && p.learn != "" {
			value = p.learn
		}
	}
	line := key + "=" + value
	if !literal || writable(line, literal) {
		return line
	}
	// The effective value cannot be written as is: print the rule as written, which
	// resolves again to the same value (its meaning must not depend on the place of
	// the file, as a relative directory would).
	switch r.Key {
	case "expose-ro", "expose-rw", "bind", "ro-bind", "learn":
		return line
	}
	if raw := r.Raw; writable(raw, false) {
		if k, _, _ := strings.Cut(raw, "="); k == r.Key {
			return raw
		}
	}
	return line
}

// writable reports whether line reads back as itself: one line, valid UTF-8, no
// comment to strip, no surrounding space, and (when subst is true) no "${" that
// substitution would expand.
func writable(line string, subst bool) bool {
	return !strings.ContainsAny(line, "\n\r") && utf8.ValidString(line) &&
		stripComment(line) == line && !(subst && strings.Contains(line, "${"))
}

// commentText makes s safe inside a comment line.
func commentText(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return '?'
		}
		return r
	}, s)
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) printf(format string, args ...any) {
	if c.err != nil {
		return
	}
	var s string
	if len(args) == 0 {
		s = format
	} else {
		s = fmt.Sprintf(format, args...)
	}
	n, err := io.WriteString(c.w, s)
	c.n += int64(n)
	c.err = err
}
