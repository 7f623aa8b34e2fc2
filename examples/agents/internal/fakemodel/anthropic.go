package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// Anthropic starts a fake of the Anthropic Messages API (POST /v1/messages);
// its base URL for a client is URL.
func Anthropic(t testing.TB, script []Step) *Server {
	return start(t, anthropicWire{}, script)
}

type anthropicWire struct{}

func (anthropicWire) path() string { return "/v1/messages" }

func (anthropicWire) auth(r *http.Request) bool {
	// The API takes the key as x-api-key; the SDK's WithAPIKey sends it as a
	// bearer token.
	key := r.Header.Get("X-Api-Key") == Key || r.Header.Get("Authorization") == "Bearer "+Key
	return key && r.Header.Get("Anthropic-Version") != ""
}

func (anthropicWire) decode(body []byte) ([]string, []ToolResult, error) {
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string         `json:"name"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, err
	}
	if req.Model == "" || req.MaxTokens <= 0 || len(req.Messages) == 0 {
		return nil, nil, fmt.Errorf("no model, max_tokens or messages")
	}
	var tools []string
	for _, t := range req.Tools {
		if t.InputSchema["type"] != "object" {
			return nil, nil, fmt.Errorf("tool %q: input_schema is not an object", t.Name)
		}
		tools = append(tools, t.Name)
	}
	var results []ToolResult
	for i, m := range req.Messages {
		if m.Role != "user" || len(m.Content) == 0 || m.Content[0] != '[' {
			continue
		}
		var blocks []struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error"`
		}
		if err := json.Unmarshal(m.Content, &blocks); err != nil {
			return nil, nil, fmt.Errorf("message %d: %w", i, err)
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			c, err := text(b.Content)
			if err != nil {
				return nil, nil, fmt.Errorf("message %d: %w", i, err)
			}
			results = append(results, ToolResult{ID: b.ToolUseID, Content: c, IsError: b.IsError})
		}
	}
	return tools, results, nil
}

func (anthropicWire) encode(step Step, id string, n int) any {
	var content []any
	stop := "end_turn"
	if step.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": step.Text})
	}
	if step.Tool != "" {
		content = append(content, map[string]any{
			"type":  "tool_use",
			"id":    id,
			"name":  step.Tool,
			"input": json.RawMessage(step.Args),
		})
		stop = "tool_use"
	}
	return map[string]any{
		"id":            fmt.Sprintf("msg_%d", n),
		"type":          "message",
		"role":          "assistant",
		"model":         "fake-model",
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage":         map[string]any{"input_tokens": 10, "output_tokens": 5},
	}
}

func (anthropicWire) fail(status int, msg string) any {
	return map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": msg}}
}
