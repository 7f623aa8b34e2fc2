package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// userHandler is the slog handler of the command: it prints what the library
// logs in the form people read, once each.
//
//	FILE(LINE): warning: MESSAGE                   a warning about a rule ("rule" attribute)
//	pysandboxes run: warning: MESSAGE (k: v; ...)  any other warning
//	pysandboxes run: error: MESSAGE
//	pysandboxes run: debug: MESSAGE (k: v; ...)    with -v only (info and debug)
//
// A line already printed is not printed again. When collect is set, warnings go
// to it instead of the writer (check prints them with the problems).
type userHandler struct {
	st    *handlerState
	attrs []slog.Attr
	group string
}

type handlerState struct {
	mu      sync.Mutex
	w       io.Writer
	prog    string
	verbose bool
	seen    map[string]bool
	collect func(warning)
}

// warning is a warning the library logged: where (a rule's "FILE(LINE)", or "")
// and what.
type warning struct {
	where string
	msg   string
}

// newLogger returns the command's logger: warnings and errors always, debug
// and info with verbose; prog prefixes lines that name no rule
// ("pysandboxes run").
func newLogger(w io.Writer, prog string, verbose bool) (*slog.Logger, *handlerState) {
	st := &handlerState{w: w, prog: prog, verbose: verbose, seen: map[string]bool{}}
	return slog.New(&userHandler{st: st}), st
}

func (h *userHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.st.verbose || l >= slog.LevelWarn
}

func (h *userHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := *h
	n.attrs = slices.Clone(h.attrs)
	for _, a := range attrs {
		if h.group != "" {
			a.Key = h.group + "." + a.Key
		}
		n.attrs = append(n.attrs, a)
	}
	return &n
}

func (h *userHandler) WithGroup(name string) slog.Handler {
	n := *h
	if h.group != "" {
		name = h.group + "." + name
	}
	n.group = name
	return &n
}

func (h *userHandler) Handle(_ context.Context, r slog.Record) error {
	where := ""
	var extra []string
	add := func(key string, a slog.Attr) {
		v := a.Value.Resolve().String()
		switch {
		case key == "rule" && where == "" && r.Level >= slog.LevelWarn && v != "" && !strings.Contains(v, "="):
			// Where the rule is: "FILE(LINE)", "FILE" or "<arg>".
			where = v
		case v == "" || strings.Contains(r.Message, v):
			// Already said by the message.
		default:
			extra = append(extra, key+": "+v)
		}
	}
	for _, a := range h.attrs {
		add(a.Key, a)
	}
	r.Attrs(func(a slog.Attr) bool {
		key := a.Key
		if h.group != "" {
			key = h.group + "." + key
		}
		add(key, a)
		return true
	})
	msg := r.Message
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, "; ") + ")"
	}
	var level string
	switch {
	case r.Level >= slog.LevelError:
		level = "error"
	case r.Level >= slog.LevelWarn:
		level = "warning"
	default:
		level = "debug"
	}
	st := h.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if level == "warning" && st.collect != nil {
		st.collect(warning{where: where, msg: msg})
		return nil
	}
	prefix := st.prog
	if where != "" {
		prefix = where
	}
	line := prefix + ": " + level + ": " + msg
	if level != "debug" {
		if st.seen[line] {
			return nil
		}
		st.seen[line] = true
	}
	_, err := fmt.Fprintln(st.w, line)
	return err
}

// refRE matches a rule's place as policy renders it: "NAME(LINE)", or "<arg>".
var refRE = regexp.MustCompile(`^(.+)\((\d+)\)$|^<arg>$`)

// splitRef splits "NAME(LINE)" into NAME and LINE ("<arg>" and other text: line 0).
func splitRef(s string) (string, int) {
	m := refRE.FindStringSubmatch(s)
	if m == nil || m[1] == "" {
		return s, 0
	}
	n, _ := strconv.Atoi(m[2])
	return m[1], n
}
