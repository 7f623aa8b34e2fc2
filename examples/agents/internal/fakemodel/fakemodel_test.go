package fakemodel

import (
	"net/http"
	"strings"
	"testing"
)

// post sends a request body to the server, with the key or not, and returns the
// status.
func post(t *testing.T, s *Server, path, body string, key bool) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key {
		req.Header.Set("Authorization", "Bearer "+Key)
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestScriptEnforced: the server refuses a request without the key, a tool the
// request does not declare, and a request that does not answer the tool call
// it made, each recorded in Errors; a request that answers it is served, and
// its result recorded.
func TestScriptEnforced(t *testing.T) {
	script := []Step{{Tool: "eval_python", Args: `{"source":"1"}`}, {Text: "done"}}
	tools := `"tools":[{"type":"function","function":{"name":"eval_python","parameters":{"type":"object"}}}]`
	first := `{"model":"m","messages":[{"role":"user","content":"q"}],` + tools + `}`
	s := OpenAI(t, script)
	if got := post(t, s, "/v1/chat/completions", first, false); got != http.StatusUnauthorized {
		t.Errorf("without the key: %d", got)
	}
	if got := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"q"}]}`, true); got != http.StatusBadRequest {
		t.Errorf("tool not declared: %d", got)
	}
	if got := post(t, s, "/v1/chat/completions", first, true); got != http.StatusOK {
		t.Fatalf("first step: %d %v", got, s.Errors())
	}
	unanswered := `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"call_9","content":"x"}],` + tools + `}`
	if got := post(t, s, "/v1/chat/completions", unanswered, true); got != http.StatusBadRequest {
		t.Errorf("another call answered: %d", got)
	}
	answered := `{"model":"m","messages":[{"role":"user","content":"q"},{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"value: 1"}]}],` + tools + `}`
	if got := post(t, s, "/v1/chat/completions", answered, true); got != http.StatusOK {
		t.Fatalf("answered: %d %v", got, s.Errors())
	}
	if !s.Done() {
		t.Error("script not done")
	}
	if r := s.Results(); len(r) != 1 || r[0] != (ToolResult{ID: "call_1", Content: "value: 1"}) {
		t.Errorf("results %+v", r)
	}
	if e := s.Errors(); len(e) != 3 || !strings.Contains(e[0], "was not sent") || !strings.Contains(e[1], "not declared") || !strings.Contains(e[2], "does not answer the tool call call_1") {
		t.Errorf("errors %q", e)
	}
}

// TestAnthropicResults: the Messages fake reads tool_result blocks, their text
// and is_error mark, from a user message.
func TestAnthropicResults(t *testing.T) {
	s := Anthropic(t, []Step{{Tool: "run_python", Args: `{"code":"1"}`}, {Text: "done"}})
	tools := `"tools":[{"name":"run_python","input_schema":{"type":"object"}}]`
	if got := post(t, s, "/v1/messages", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"q"}],`+tools+`}`, true); got != http.StatusOK {
		t.Fatalf("first step: %d %v", got, s.Errors())
	}
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"q"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"run_python","input":{"code":"1"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"refused","is_error":true}]}],` + tools + `}`
	if got := post(t, s, "/v1/messages", body, true); got != http.StatusOK {
		t.Fatalf("answered: %d %v", got, s.Errors())
	}
	if r := s.Results(); len(r) != 1 || r[0] != (ToolResult{ID: "call_1", Content: "refused", IsError: true}) {
		t.Errorf("results %+v", r)
	}
	s.Check(t)
}
