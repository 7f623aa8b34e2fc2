package mcp

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of HTTPOptions.
const (
	DefaultPath            = "/mcp"
	DefaultHealthPath      = "/healthz"
	DefaultMaxRequestBytes = 4 << 20
	DefaultSessionTimeout  = 30 * time.Minute
	// MinTokenLength is the shortest bearer token NewHTTPHandler accepts.
	MinTokenLength = 16
)

// HTTPOptions configure NewHTTPHandler.
type HTTPOptions struct {
	// Token is the bearer token every MCP request must carry
	// ("Authorization: Bearer TOKEN"); "" serves without one, which only a
	// server on a loopback address should do. At least MinTokenLength bytes.
	Token string
	// AllowedOrigins are the origins ("https://app.example.com") whose browser
	// pages may call the server. A request with an Origin header not listed is
	// refused (403), so that a page of another origin, or one reaching the server
	// through DNS rebinding, cannot; clients that are not browsers send none.
	AllowedOrigins []string
	// MaxRequestBytes bounds the body of a request (DefaultMaxRequestBytes when
	// 0); past it the request is refused (413).
	MaxRequestBytes int64
	// Path is where MCP is served (DefaultPath when ""), HealthPath the health
	// endpoint (DefaultHealthPath when ""): GET answers 200 "ok" while Ready
	// does, else 503 with its error. It needs no token: it says nothing else.
	Path, HealthPath string
	// Ready reports whether the server is ready (nil: always).
	Ready func() error
	// SessionTimeout closes sessions idle that long, and what their calls run
	// (DefaultSessionTimeout when 0, never when negative).
	SessionTimeout time.Duration
	// Logger receives the refused requests at debug level (nil: none).
	Logger *slog.Logger
}

// HTTPHandler is the handler NewHTTPHandler returns.
type HTTPHandler struct {
	mcp      http.Handler
	opts     HTTPOptions
	token    [sha256.Size]byte
	hasToken bool
	origins  map[string]bool
	log      *slog.Logger
	draining atomic.Bool
}

// NewHTTPHandler serves server over streamable HTTP (stateful sessions, so that
// a client can cancel a call) behind the checks of HTTPOptions. The error
// reports options that cannot be served safely: a token too short, an origin
// that is not scheme://host[:port].
func NewHTTPHandler(server *sdk.Server, opts *HTTPOptions) (*HTTPHandler, error) {
	h := &HTTPHandler{origins: map[string]bool{}}
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Token != "" {
		if len(h.opts.Token) < MinTokenLength {
			return nil, fmt.Errorf("the bearer token is %d bytes: at least %d are needed", len(h.opts.Token), MinTokenLength)
		}
		if strings.ContainsAny(h.opts.Token, " \t\r\n") {
			return nil, errors.New("the bearer token holds white space")
		}
		h.token, h.hasToken = sha256.Sum256([]byte(h.opts.Token)), true
	}
	for _, o := range h.opts.AllowedOrigins {
		n, err := normalOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		h.origins[n] = true
	}
	if h.opts.MaxRequestBytes <= 0 {
		h.opts.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if h.opts.Path == "" {
		h.opts.Path = DefaultPath
	}
	if h.opts.HealthPath == "" {
		h.opts.HealthPath = DefaultHealthPath
	}
	switch {
	case h.opts.SessionTimeout == 0:
		h.opts.SessionTimeout = DefaultSessionTimeout
	case h.opts.SessionTimeout < 0:
		h.opts.SessionTimeout = 0
	}
	h.log = h.opts.Logger
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.mcp = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{
		SessionTimeout:               h.opts.SessionTimeout,
		MaxRequestBodyBytes:          h.opts.MaxRequestBytes,
		PropagateRequestCancellation: true,
		Logger:                       h.opts.Logger,
	})
	return h, nil
}

// Drain makes the health endpoint answer 503 from now on (a server shutting
// down is no longer ready); MCP requests are still served.
func (h *HTTPHandler) Drain() { h.draining.Store(true) }

// normalOrigin is an origin as browsers send it: scheme://host[:port], lower
// case, without a default port.
func normalOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", errors.New("not an origin (scheme://host[:port])")
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return strings.ToLower(u.Scheme) + "://" + host, nil
}

func (h *HTTPHandler) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.log.Debug("refused request", "status", status, "reason", msg, "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
	http.Error(w, msg, status)
}

// ServeHTTP serves the health endpoint, and MCP once a request passes the
// checks: its Host on a loopback address, its Origin, its token, its size.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case h.opts.HealthPath:
		h.health(w, r)
		return
	case h.opts.Path:
	default:
		h.refuse(w, r, http.StatusNotFound, "not found (MCP is served at "+h.opts.Path+")")
		return
	}
	// DNS rebinding: a page of evil.example whose name now resolves to
	// 127.0.0.1 reaches a loopback server with its own name as Host, and its
	// own origin as Origin.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopbackAddr(local.String()) && !isLoopbackHost(r.Host) {
		h.refuse(w, r, http.StatusForbidden, "forbidden: the Host header must name a loopback address")
		return
	}
	if origins, ok := r.Header["Origin"]; ok {
		allowed := len(origins) == 1
		if allowed {
			n, err := normalOrigin(origins[0])
			allowed = err == nil && h.origins[n]
		}
		if !allowed {
			h.refuse(w, r, http.StatusForbidden, "forbidden: origin not allowed")
			return
		}
	}
	if h.hasToken {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		ok = ok && strings.EqualFold(scheme, "Bearer")
		sum := sha256.Sum256([]byte(tok))
		if !ok || subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pysandboxes"`)
			h.refuse(w, r, http.StatusUnauthorized, "unauthorized: a bearer token is required")
			return
		}
	}
	if r.ContentLength > h.opts.MaxRequestBytes {
		h.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("request too large (at most %d bytes)", h.opts.MaxRequestBytes))
		return
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxRequestBytes)
	}
	h.mcp.ServeHTTP(w, r)
}

func (h *HTTPHandler) health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if h.draining.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if h.opts.Ready != nil {
		if err := h.opts.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// isLoopbackAddr reports whether host:port (or a bare host) is a loopback IP.
func isLoopbackAddr(addr string) bool {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// isLoopbackHost reports whether a Host header names a loopback address:
// localhost or a loopback IP, with or without a port.
func isLoopbackHost(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// IsLoopback reports whether a listening address (host:port, as net.Listener
// reports it) is on a loopback interface only: an unspecified address
// (0.0.0.0, [::]) or any other is not.
func IsLoopback(addr net.Addr) bool {
	if ta, ok := addr.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	return isLoopbackAddr(addr.String())
}
