package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// OpenAI starts a fake of the OpenAI Chat Completions API
// (POST /v1/chat/completions); its base URL for a client is URL + "/v1".
func OpenAI(t testing.TB, script []Step) *Server {
	return start(t, openaiWire{}, script)
}

type openaiWire struct{}

func (openaiWire) path() string { return "/v1/chat/completions" }

func (openaiWire) auth(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+Key
}

func (openaiWire) decode(body []byte) ([]string, []ToolResult, error) {
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name       string         `json:"name"`
				Parameters map[string]any `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, err
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return nil, nil, fmt.Errorf("no model or no messages")
	}
	var tools []string
	for _, t := range req.Tools {
		if t.Type != "function" || t.Function.Parameters["type"] != "object" {
			return nil, nil, fmt.Errorf("tool %q: not a function taking an object", t.Function.Name)
		}
		tools = append(tools, t.Function.Name)
	}
	var results []ToolResult
	for i, m := range req.Messages {
		if m.Role != "tool" {
			continue
		}
		c, err := text(m.Content)
		if err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		results = append(results, ToolResult{ID: m.ToolCallID, Content: c})
	}
	return tools, results, nil
}

func (openaiWire) encode(step Step, id string, n int) any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	if step.Tool != "" {
		msg["tool_calls"] = []any{map[string]any{
			"id":       id,
			"type":     "function",
			"function": map[string]any{"name": step.Tool, "arguments": step.Args},
		}}
		finish = "tool_calls"
	} else {
		msg["content"] = step.Text
	}
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", n),
		"object":  "chat.completion",
		"created": 1764547200 + n,
		"model":   "fake-model",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"finish_reason": finish,
			"logprobs":      nil,
		}},
		"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	}
}

func (openaiWire) fail(status int, msg string) any {
	return map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}}
}
