package retool

import "agentrl/envs"

// RulesHintCases are summaries that trigger every branch of the rules hinter, error messages at
// and past the quoted length included: the tests of what reaches the teacher (engine/hint, a
// run's hints) walk them.
var RulesHintCases = []envs.Summary{
	{ToolCalls: 1, Timeouts: 1, LastError: "timeout"},
	{ToolCalls: 1, Killed: 1},
	{ToolCalls: 1, ToolErrors: 1, LastError: "Traceback (most recent call last):\n  File \"<code>\", line 3\nNameError: name 'total_sum_of_all_the_values' is not defined"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "  File \"<code>\", line 1\n    print(1 +\nSyntaxError: '(' was never closed because the line ended early"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "ZeroDivisionError: division by zero, while computing the ratio of the two sums given"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "the code did something odd that is no exception at all but still failed to run properly"},
	{ToolCalls: 1, ToolErrors: 1, LastError: "code.star:3:5: undefined: x"},
	{FormatErrors: 1},
	{ToolCalls: 1},
	{Answered: true},
	{ToolCalls: 1, Answered: true, Answer: "12", LastOutput: "12"},
	{ToolCalls: 1, Answered: true, Answer: "12", LastOutput: "13"},
	{ToolCalls: 1, Answered: true, Answer: "123456789012345678901234567890123456789012345678901234567890", LastOutput: "line one\n3.14159265358979323846264338327950288419716939937510582097494459"},
	{ToolCalls: 1, Answered: true, Answer: "?", LastOutput: ""},
}
