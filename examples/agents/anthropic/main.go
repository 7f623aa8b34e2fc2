// Command anthropic is an agent loop on the Anthropic Messages API
// (github.com/anthropics/anthropic-sdk-go/v2) whose model runs Python through
// the sandbox: it is given two tools, eval_python and run_python (package
// pytool), and each tool_use block runs the model's code under the policy. The
// outcome goes back as the tool_result block answering it, with is_error set
// when the code was rejected, refused or failed: a value, a rejection listing
// each violation with the rule line that would allow it, or the sandbox's
// refusals with the rule that refused; the model reads it and writes code the
// policy allows.
//
// Environment:
//
//	ANTHROPIC_API_KEY   the key (required)
//	ANTHROPIC_BASE_URL  the API's base URL (default https://api.anthropic.com)
//	ANTHROPIC_MODEL     the model (default: the SDK's ModelClaudeSonnet5_5)
//
//	go run ./anthropic -python /usr/bin/python3
package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/pysandboxes/pysandboxes/examples/agents/pytool"
)

func main() { pytool.Main("anthropic", "ANTHROPIC", run) }

// tool declares a pytool tool to the model.
func tool(name, description string, schema map[string]any) anthropic.ToolUnionParam {
	required, _ := schema["required"].([]string)
	return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
		Name:        name,
		Description: anthropic.String(description),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: schema["properties"],
			Required:   required,
		},
	}}
}

// run plays the conversation to the model's final answer, writing each tool
// call and its result to w, and returns the answer.
func run(ctx context.Context, cfg pytool.Config, w io.Writer) (string, error) {
	tools, err := pytool.New(ctx, cfg.Tools)
	if err != nil {
		return "", err
	}
	defer tools.Close()
	fmt.Fprintf(w, "sandbox: %s\n", tools.Provider())

	opts := []option.RequestOption{option.WithAPIKey(cfg.Key)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	client := anthropic.NewClient(opts...)
	model := cfg.Model
	if model == "" {
		model = anthropic.ModelClaudeSonnet5_5
	}
	params := anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 2048,
		System:    []anthropic.TextBlockParam{{Text: pytool.System}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(cfg.Task))},
		Tools: []anthropic.ToolUnionParam{
			tool(pytool.EvalName, pytool.EvalDescription, pytool.EvalSchema),
			tool(pytool.RunName, pytool.RunDescription, pytool.RunSchema),
		},
	}
	turns := cfg.MaxTurns
	if turns <= 0 {
		turns = 10
	}
	for range turns {
		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			return "", err
		}
		params.Messages = append(params.Messages, msg.ToParam())
		var (
			results []anthropic.ContentBlockParamUnion
			text    strings.Builder
		)
		for _, block := range msg.Content {
			switch block.Type {
			case "text":
				text.WriteString(block.Text)
			case "tool_use":
				fmt.Fprintf(w, "call %s %s\n", block.Name, block.Input)
				res, err := tools.Call(ctx, block.Name, block.Input)
				if err != nil {
					return "", err
				}
				fmt.Fprintf(w, "result (error=%v):\n%s\n", res.IsError, res.Text)
				results = append(results, anthropic.NewToolResultBlock(block.ID, res.Text, res.IsError))
			}
		}
		if len(results) == 0 {
			fmt.Fprintf(w, "answer: %s\n", text.String())
			return text.String(), nil
		}
		params.Messages = append(params.Messages, anthropic.NewUserMessage(results...))
	}
	return "", fmt.Errorf("no final answer after %d turns", turns)
}
