package policy

import (
	"fmt"
	"strings"
)

// maxSubstDepth bounds the nesting of ${...} forms, so a hostile line cannot exhaust
// the stack.
const maxSubstDepth = 32

// maxSubstLen bounds the length of a substituted value, so that a short line repeating
// a long variable cannot exhaust memory.
const maxSubstLen = 1 << 20

// lookupFunc returns the host value of an environment variable.
type lookupFunc func(name string) (string, bool)

// substitute expands ${NAME}, ${NAME:-default} (and the legacy ${NAME:=default})
// in s. Forms nest in the name and in the default; a value taken from the
// environment is inserted verbatim and never expanded again. An unset variable
// without a default expands to the empty string. Any other form is an error.
func substitute(s string, lookup lookupFunc) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	p := substParser{src: s, lookup: lookup}
	out, err := p.text(0, false)
	if err != nil {
		return "", err
	}
	if p.pos != len(s) {
		// Only reachable through a stray '}' at top level, which text() keeps.
		return "", fmt.Errorf("unexpected '}' in %q", s)
	}
	return out, nil
}

type substParser struct {
	src    string
	pos    int
	lookup lookupFunc
}

// text reads literal text and ${...} forms until the end of the input, or until an
// unmatched '}' when inside is true (the '}' is left for the caller).
func (p *substParser) text(depth int, inside bool) (string, error) {
	var b strings.Builder
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '$' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '{':
			v, err := p.variable(depth + 1)
			if err != nil {
				return "", err
			}
			if b.Len()+len(v) > maxSubstLen {
				return "", fmt.Errorf("substitution gives a value longer than %d bytes", maxSubstLen)
			}
			b.WriteString(v)
		case c == '}' && inside:
			return b.String(), nil
		default:
			b.WriteByte(c)
			p.pos++
		}
	}
	return b.String(), nil
}

// variable parses one ${...} form starting at p.pos and returns its value.
func (p *substParser) variable(depth int) (string, error) {
	start := p.pos
	if depth > maxSubstDepth {
		return "", fmt.Errorf("substitution nested more than %d levels deep", maxSubstDepth)
	}
	p.pos += 2 // "${"
	// The name ends at ':' or '}' at this level; it may itself contain ${...}.
	var name strings.Builder
	for {
		if p.pos >= len(p.src) {
			return "", fmt.Errorf("unterminated substitution %q", p.src[start:])
		}
		c := p.src[p.pos]
		if c == '$' && p.pos+1 < len(p.src) && p.src[p.pos+1] == '{' {
			v, err := p.variable(depth + 1)
			if err != nil {
				return "", err
			}
			if name.Len()+len(v) > maxSubstLen {
				return "", fmt.Errorf("substitution gives a value longer than %d bytes", maxSubstLen)
			}
			name.WriteString(v)
			continue
		}
		if c == ':' || c == '}' {
			break
		}
		name.WriteByte(c)
		p.pos++
	}
	n := name.String()
	if !validEnvName(n) {
		end := min(p.pos+1, len(p.src))
		return "", fmt.Errorf("unsupported substitution %q: expected ${NAME} or ${NAME:-default}", p.src[start:end])
	}
	if p.src[p.pos] == '}' {
		p.pos++
		v, _ := p.lookup(n)
		return v, nil
	}
	// ':' must be followed by '-' (or the legacy '=').
	if p.pos+1 >= len(p.src) || (p.src[p.pos+1] != '-' && p.src[p.pos+1] != '=') {
		end := strings.IndexByte(p.src[p.pos:], '}')
		shown := p.src[start:]
		if end >= 0 {
			shown = p.src[start : p.pos+end+1]
		}
		return "", fmt.Errorf("unsupported substitution %q: expected ${NAME} or ${NAME:-default}", shown)
	}
	p.pos += 2
	def, err := p.text(depth, true)
	if err != nil {
		return "", err
	}
	if p.pos >= len(p.src) {
		return "", fmt.Errorf("unterminated substitution %q", p.src[start:])
	}
	p.pos++ // '}'
	if v, ok := p.lookup(n); ok && v != "" {
		return v, nil
	}
	return def, nil
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
