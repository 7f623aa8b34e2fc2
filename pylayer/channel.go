package pylayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pysandboxes/pysandboxes/internal/pypool"
	"github.com/pysandboxes/pysandboxes/policy"
	"github.com/pysandboxes/pysandboxes/transport"
)

// Bounds of what the host accepts from the child. The child is untrusted: past
// any of them the host stops reading, and the program's whole tree is killed.
const (
	maxChildFrame = 1 << 20  // one frame from the child
	maxChildBytes = 64 << 20 // every frame from the child, together
	maxDenials    = 1000     // distinct refusals kept (more are counted)
	maxObserved   = 200_000  // learning observations kept, all families together
	maxHostFrame  = 32 << 20 // the frames the host writes (code, config)
)

// Denial is one refusal of the Python layer, as the child reported it. It comes
// from the sandboxed program: it is what that program says it was refused, no more.
type Denial struct {
	// Kind is the family: "file", "network", "import", "api" or "eval".
	Kind string `json:"kind"`
	// Exception is the Python exception class raised (RuleFileNotFoundError...).
	Exception string `json:"exc"`
	// Message is the exception's message.
	Message string `json:"msg"`
	// Target is what was refused: a path, an address, a module, a function.
	Target string `json:"target"`
	// Rule is the rule that refused, as written ("" when the implicit default
	// policy refused); Ref is its file(line).
	Rule string `json:"rule"`
	Ref  string `json:"ref"`
}

func (d Denial) String() string { return d.Exception + ": " + d.Message }

// ProtocolError reports a child that broke the channel's rules (a malformed or
// oversized frame, a flood): the host stopped reading and killed the program.
type ProtocolError struct {
	Err error
}

func (e *ProtocolError) Error() string {
	return "pysandboxes: the sandboxed Python program broke the channel protocol, its process tree was killed: " + e.Err.Error()
}

func (e *ProtocolError) Unwrap() error { return e.Err }

// StartError reports a Python layer that could not start in the child.
type StartError struct {
	Msg string
}

func (e *StartError) Error() string { return "pysandboxes: the Python layer could not start: " + e.Msg }

// Session is the host side of one sandboxed Python program: the channel, the
// frames to send, and what comes back.
type Session struct {
	ch     *pypool.Pipe // the child's end is passed as an extra file
	code   *codeBlob
	config []byte
	mode   string
	interp string // the interpreter's path (what it needs is not learned)

	mu       sync.Mutex
	denials  []Denial
	seen     map[string]bool
	dropped  int
	obs      obsSet
	hello    bool
	fatal    string
	protoErr error
	done     chan struct{}
	started  bool

	// Partial mode (worker.go): frames of the kinds of the worker protocol go to
	// onFrame, and the child's frames are bounded one by one (maxFrame) and per
	// call by the worker, not in total (a worker lives for many calls).
	onFrame  func(transport.Frame) error
	maxFrame int
}

// NewSession prepares the channel and the frames for one program.
func NewSession(ctx context.Context, in ConfigInput) (*Session, error) {
	if in.Policy == nil || in.Interp == nil {
		return nil, errors.New("pylayer: NewSession needs a policy and an interpreter")
	}
	cfg, err := buildConfig(in)
	if err != nil {
		return nil, err
	}
	if len(cfg)+1 > maxHostFrame {
		return nil, fmt.Errorf("pylayer: the policy is too large for the channel (%d bytes)", len(cfg))
	}
	code := guardCode(ctx, in.Interp)
	ch, err := pypool.NewPipe()
	if err != nil {
		return nil, fmt.Errorf("pylayer: %w", err)
	}
	s := &Session{
		ch:     ch,
		code:   code,
		config: cfg,
		mode:   in.Mode,
		interp: in.Interp.Path,
		seen:   map[string]bool{},
		done:   make(chan struct{}),
	}
	s.obs.init()
	return s, nil
}

// ChildFile is the child's end of the channel, to pass as an extra file.
func (s *Session) ChildFile() *os.File { return s.ch.Child }

// Command returns the interpreter's argv (argv[0] included) for a child that
// receives the channel as descriptor fd.
func Command(in *Interpreter, flags []string, fd int) []string {
	args := append([]string{in.Path}, flags...)
	return append(args, "-c", Boot, strconv.Itoa(fd))
}

// Started is called once the program runs: the host closes its copy of the
// child's end, sends the frames and serves the channel. kill is called, once, when
// the child breaks the protocol.
func (s *Session) Started(kill func(error)) {
	s.started = true
	s.ch.Child.Close()
	go func() {
		w := transport.NewWriter(s.ch.Host, maxHostFrame)
		if err := w.Write(transport.Kind(s.code.kind), s.code.payload); err != nil {
			return // the child is gone; the reader sees it
		}
		_ = w.Write(kindConfig, s.config)
	}()
	go s.serve(kill)
}

// Abort releases the channel of a program that did not start.
func (s *Session) Abort() {
	s.ch.Child.Close()
	s.ch.Host.Close()
}

type countingReader struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		return 0, fmt.Errorf("more than %d bytes sent on the channel", c.max)
	}
	if rest := c.max - c.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (s *Session) serve(kill func(error)) {
	defer close(s.done)
	maxFrame, total := maxChildFrame, int64(maxChildBytes)
	if s.onFrame != nil {
		maxFrame, total = s.maxFrame, math.MaxInt64
	}
	cr := &countingReader{r: s.ch.Host, max: total}
	r := transport.NewReader(cr, maxFrame)
	for {
		f, err := r.Read()
		if err == nil {
			err = s.handle(f)
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
			return
		}
		pe := &ProtocolError{Err: err}
		s.mu.Lock()
		s.protoErr = pe
		s.mu.Unlock()
		kill(pe)
		return
	}
}

func (s *Session) handle(f transport.Frame) error {
	switch f.Kind {
	case kindHello:
		s.mu.Lock()
		s.hello = true
		s.mu.Unlock()
	case kindFatal:
		s.mu.Lock()
		s.fatal = strings.ToValidUTF8(string(f.Payload), "?")
		s.mu.Unlock()
	case kindDenial:
		var d Denial
		if err := strictJSON(f.Payload, &d); err != nil {
			return fmt.Errorf("malformed denial frame: %w", err)
		}
		s.addDenial(d)
	case kindLearn:
		if s.mode != ModeLearn {
			return errors.New("learning frame outside learning mode")
		}
		var o wireObs
		if err := strictJSON(f.Payload, &o); err != nil {
			return fmt.Errorf("malformed learning frame: %w", err)
		}
		s.mu.Lock()
		s.obs.add(o)
		s.mu.Unlock()
	default:
		if s.onFrame != nil {
			return s.onFrame(f)
		}
		return fmt.Errorf("unknown frame kind %d", f.Kind)
	}
	return nil
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func (s *Session) addDenial(d Denial) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := d.Exception + "\x00" + d.Message
	if s.seen[key] {
		return
	}
	if len(s.denials) >= maxDenials {
		s.dropped++
		return
	}
	s.seen[key] = true
	s.denials = append(s.denials, d)
}

// Result is what the channel brought back.
type Result struct {
	// Denials are the distinct refusals the program reported, in order.
	Denials []Denial
	// DroppedDenials counts refusals beyond the bound.
	DroppedDenials int
	// Observations are what a learning run saw (empty otherwise).
	Observations policy.Observations
	// Armed reports that the guard was armed in the child.
	Armed bool
	// Err is a *ProtocolError when the child broke the protocol, a *StartError
	// when the layer could not start, else nil.
	Err error
}

// Finish waits (at most grace) for the channel to close once the program has
// ended, releases it, and returns what came back.
func (s *Session) Finish(grace time.Duration) *Result {
	if s.started {
		select {
		case <-s.done:
		case <-time.After(grace):
			s.ch.Host.SetReadDeadline(time.Now())
			<-s.done
		}
	}
	s.ch.Host.Close()
	s.mu.Lock()
	res := &Result{Denials: s.denials, DroppedDenials: s.dropped, Observations: s.obs.result(), Armed: s.hello}
	progs, dbs := s.obs.progs, s.obs.dbs
	s.mu.Unlock()
	// The programs run and the databases opened, as file accesses (the host
	// looks at the files now, after the run).
	res.Observations.Files = append(res.Observations.Files, dbAccesses(dbs)...)
	res.Observations.Files = append(res.Observations.Files, programAccesses(context.Background(), s.interp, progs)...)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.protoErr != nil:
		res.Err = s.protoErr
	case s.fatal != "":
		res.Err = &StartError{Msg: s.fatal}
	}
	return res
}

// Denials returns the refusals received so far.
func (s *Session) Denials() []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Denial(nil), s.denials...)
}

// wireObs is one learning frame.
type wireObs struct {
	Env     []string          `json:"env"`
	Files   []json.RawMessage `json:"files"`
	Net     []json.RawMessage `json:"net"`
	DNS     []json.RawMessage `json:"dns"`
	Imports []string          `json:"imports"`
	API     []string          `json:"api"`
	Exec    []json.RawMessage `json:"exec"`
	SQLite  []json.RawMessage `json:"sqlite"`
}

// obsSet accumulates observations without duplicates, within maxObserved.
type obsSet struct {
	n     int
	env   map[string]bool
	files map[policy.FileAccess]bool
	net   map[string]policy.NetAccess
	dns   map[string][]netip.Addr
	imps  map[string]bool
	api   map[string]bool
	progs []ranProgram
	dbs   []openedDB
	order struct {
		env, imps, api []string
		files          []policy.FileAccess
		net            []string
		dns            []string
	}
}

func (o *obsSet) init() {
	o.env, o.files, o.net = map[string]bool{}, map[policy.FileAccess]bool{}, map[string]policy.NetAccess{}
	o.dns, o.imps, o.api = map[string][]netip.Addr{}, map[string]bool{}, map[string]bool{}
}

func (o *obsSet) room() bool { return o.n < maxObserved }

func (o *obsSet) add(w wireObs) {
	for _, e := range w.Env {
		if o.room() && !o.env[e] {
			o.env[e] = true
			o.order.env = append(o.order.env, e)
			o.n++
		}
	}
	for _, raw := range w.Files {
		var t []any
		if json.Unmarshal(raw, &t) != nil || len(t) != 3 {
			continue
		}
		p, ok1 := t[0].(string)
		wr, ok2 := t[1].(bool)
		dir, ok3 := t[2].(bool)
		if !ok1 || !ok2 || !ok3 || p == "" {
			continue
		}
		fa := policy.FileAccess{Path: p, Write: wr, Dir: dir}
		if o.room() && !o.files[fa] {
			o.files[fa] = true
			o.order.files = append(o.order.files, fa)
			o.n++
		}
	}
	for _, raw := range w.Net {
		var t []any
		if json.Unmarshal(raw, &t) != nil || len(t) != 5 {
			continue
		}
		proto, _ := t[0].(string)
		dir, _ := t[1].(string)
		host, _ := t[2].(string)
		ips, _ := t[3].(string)
		port, ok := t[4].(float64)
		ip, err := netip.ParseAddr(ips)
		if !ok || err != nil || port < 0 || port > 65535 {
			continue
		}
		na := policy.NetAccess{Host: host, IP: ip, Port: uint16(port)}
		switch proto {
		case "tcp":
			na.Proto = policy.TCP
		case "udp":
			na.Proto = policy.UDP
		default:
			continue
		}
		switch dir {
		case "in":
			na.Dir = policy.In
		case "out":
			na.Dir = policy.Out
		default:
			continue
		}
		key := fmt.Sprint(na)
		if _, dup := o.net[key]; !dup && o.room() {
			o.net[key] = na
			o.order.net = append(o.order.net, key)
			o.n++
		}
	}
	for _, raw := range w.DNS {
		var t []any
		if json.Unmarshal(raw, &t) != nil || len(t) != 2 {
			continue
		}
		name, _ := t[0].(string)
		list, _ := t[1].([]any)
		if name == "" {
			continue
		}
		if _, ok := o.dns[name]; !ok {
			if !o.room() {
				continue
			}
			o.order.dns = append(o.order.dns, name)
			o.n++
		}
		for _, a := range list {
			s, _ := a.(string)
			if ip, err := netip.ParseAddr(s); err == nil && len(o.dns[name]) < 64 {
				dup := false
				for _, x := range o.dns[name] {
					dup = dup || x == ip
				}
				if !dup {
					o.dns[name] = append(o.dns[name], ip)
				}
			}
		}
	}
	for _, m := range w.Imports {
		if o.room() && !o.imps[m] {
			o.imps[m] = true
			o.order.imps = append(o.order.imps, m)
			o.n++
		}
	}
	for _, a := range w.API {
		if o.room() && !o.api[a] {
			o.api[a] = true
			o.order.api = append(o.order.api, a)
			o.n++
		}
	}
	for _, raw := range w.Exec {
		if r, ok := parseRan(raw); ok && len(o.progs) < maxPrograms && !slices.Contains(o.progs, r) {
			o.progs = append(o.progs, r)
		}
	}
	for _, raw := range w.SQLite {
		if d, ok := parseDB(raw); ok && len(o.dbs) < maxDatabases {
			o.dbs = append(o.dbs, d)
		}
	}
}

func (o *obsSet) result() policy.Observations {
	var out policy.Observations
	out.Env = append(out.Env, o.order.env...)
	out.Files = append(out.Files, o.order.files...)
	for _, k := range o.order.net {
		out.Net = append(out.Net, o.net[k])
	}
	for _, n := range o.order.dns {
		out.DNS = append(out.DNS, policy.DNSAnswer{Name: n, Addrs: o.dns[n]})
	}
	out.Imports = append(out.Imports, o.order.imps...)
	out.API = append(out.API, o.order.api...)
	return out
}
