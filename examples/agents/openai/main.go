// Command openai is an agent loop on the OpenAI Chat Completions API
// (github.com/openai/openai-go/v3) whose model runs Python through the
// sandbox: it is given two function tools, eval_python and run_python (package
// pytool), and each tool call runs the model's code under the policy. The
// outcome goes back as the tool message: a value, a rejection listing each
// violation with the rule line that would allow it, or the sandbox's refusals
// with the rule that refused; the model reads it and writes code the policy
// allows.
//
// Environment:
//
//	OPENAI_API_KEY   the key (required)
//	OPENAI_BASE_URL  the API's base URL (default https://api.openai.com/v1/;
//	                 any server of the Chat Completions API with tool calls)
//	OPENAI_MODEL     the model (default: the SDK's ChatModelGPT5_4Mini)
//
//	go run ./openai -python /usr/bin/python3
package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/pysandboxes/pysandboxes/examples/agents/pytool"
)

func main() { pytool.Main("openai", "OPENAI", run) }

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
	client := openai.NewClient(opts...)
	model := shared.ChatModel(cfg.Model)
	if model == "" {
		model = openai.ChatModelGPT5_4Mini
	}
	params := openai.ChatCompletionNewParams{
		Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage(pytool.System),
			openai.UserMessage(cfg.Task),
		},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:        pytool.EvalName,
				Description: openai.String(pytool.EvalDescription),
				Parameters:  shared.FunctionParameters(pytool.EvalSchema),
			}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
				Name:        pytool.RunName,
				Description: openai.String(pytool.RunDescription),
				Parameters:  shared.FunctionParameters(pytool.RunSchema),
			}),
		},
	}
	turns := cfg.MaxTurns
	if turns <= 0 {
		turns = 10
	}
	for range turns {
		completion, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			return "", err
		}
		if len(completion.Choices) == 0 {
			return "", errors.New("the model answered no choice")
		}
		msg := completion.Choices[0].Message
		if len(msg.ToolCalls) == 0 {
			fmt.Fprintf(w, "answer: %s\n", msg.Content)
			return msg.Content, nil
		}
		params.Messages = append(params.Messages, msg.ToParam())
		for _, call := range msg.ToolCalls {
			fmt.Fprintf(w, "call %s %s\n", call.Function.Name, call.Function.Arguments)
			res, err := tools.Call(ctx, call.Function.Name, []byte(call.Function.Arguments))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(w, "result (error=%v):\n%s\n", res.IsError, res.Text)
			// The Chat Completions API has no error mark on a tool message: the
			// text says it.
			params.Messages = append(params.Messages, openai.ToolMessage(res.Text, call.ID))
		}
	}
	return "", fmt.Errorf("no final answer after %d turns", turns)
}
