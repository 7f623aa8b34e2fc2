// Command langchain is an agent on langchaingo (github.com/tmc/langchaingo)
// whose model runs Python through the sandbox: the sandboxed eval_python and
// run_python of package pytool are langchaingo tools (tools.Tool, one string
// input: the Python source), driven by langchaingo's OpenAI functions agent and
// its executor. Each tool call runs the model's code under the policy, and the
// observation the model reads next is the outcome: a value, a rejection listing
// each violation with the rule line that would allow it, or the sandbox's
// refusals with the rule that refused. A rejection or a refusal is an
// observation, not an error, so the executor goes on and the model can write
// code the policy allows.
//
// The model is reached through langchaingo's OpenAI client (any server of the
// Chat Completions API with tool calls). Environment:
//
//	OPENAI_API_KEY   the key (required)
//	OPENAI_BASE_URL  the API's base URL (default https://api.openai.com/v1)
//	OPENAI_MODEL     the model (default gpt-5.4-mini)
//
//	go run ./langchain -python /usr/bin/python3
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	"github.com/tmc/langchaingo/llms/openai"
	"github.com/tmc/langchaingo/tools"

	"github.com/pysandboxes/pysandboxes/examples/agents/pytool"
)

func main() { pytool.Main("langchain", "OPENAI", run) }

// sandboxTool is one pytool tool as a langchaingo tool: its input is the
// Python source, its output what the model reads.
type sandboxTool struct {
	name, description string
	call              func(ctx context.Context, src string) (pytool.Result, error)
	w                 io.Writer
}

var _ tools.Tool = sandboxTool{}

func (t sandboxTool) Name() string        { return t.name }
func (t sandboxTool) Description() string { return t.description }

// Call runs the source. Only a failure of the sandbox itself is an error (it
// ends the executor); a rejection or a refusal is the observation.
func (t sandboxTool) Call(ctx context.Context, src string) (string, error) {
	fmt.Fprintf(t.w, "call %s %q\n", t.name, src)
	res, err := t.call(ctx, src)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(t.w, "result (error=%v):\n%s\n", res.IsError, res.Text)
	return res.Text, nil
}

// run plays the conversation to the model's final answer, writing each tool
// call and its result to w, and returns the answer.
func run(ctx context.Context, cfg pytool.Config, w io.Writer) (string, error) {
	sandbox, err := pytool.New(ctx, cfg.Tools)
	if err != nil {
		return "", err
	}
	defer sandbox.Close()
	fmt.Fprintf(w, "sandbox: %s\n", sandbox.Provider())

	model := cfg.Model
	if model == "" {
		model = "gpt-5.4-mini"
	}
	opts := []openai.Option{openai.WithToken(cfg.Key), openai.WithModel(model)}
	if cfg.BaseURL != "" {
		opts = append(opts, openai.WithBaseURL(cfg.BaseURL))
	}
	llm, err := openai.New(opts...)
	if err != nil {
		return "", err
	}
	toolset := []tools.Tool{
		sandboxTool{
			name:        pytool.EvalName,
			description: pytool.EvalDescription + " The input is one Python expression.",
			call: func(ctx context.Context, src string) (pytool.Result, error) {
				return sandbox.Eval(ctx, pytool.EvalArgs{Source: src})
			},
			w: w,
		},
		sandboxTool{
			name:        pytool.RunName,
			description: pytool.RunDescription + " The input is the program's source.",
			call: func(ctx context.Context, src string) (pytool.Result, error) {
				return sandbox.Run(ctx, pytool.RunArgs{Code: src})
			},
			w: w,
		},
	}
	turns := cfg.MaxTurns
	if turns <= 0 {
		turns = 10
	}
	agent := agents.NewOpenAIFunctionsAgent(llm, toolset, agents.NewOpenAIOption().WithSystemMessage(pytool.System))
	executor := agents.NewExecutor(agent, agents.WithMaxIterations(turns))
	answer, err := chains.Run(ctx, executor, cfg.Task)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(w, "answer: %s\n", answer)
	return answer, nil
}
