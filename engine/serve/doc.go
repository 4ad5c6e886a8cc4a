// Package serve is the OpenAI-compatible endpoint on the rollout engine: an agent that calls a
// model through the openai client (or any HTTP client) calls the policy being trained, and the
// server records what it sampled, token for token, per trajectory.
//
// # Endpoints
//
//   - POST /v1/chat/completions: messages (system, developer as system, user, assistant with
//     tool_calls, tool with tool_call_id; content a string, null or text parts), temperature,
//     top_p, top_k (vLLM's), max_tokens / max_completion_tokens, stop (a string or a list),
//     n = 1, seed, tools + tool_choice, stream with stream_options.include_usage, ignore_eos
//     (vLLM's). Accepted and ignored: user, metadata, store, service_tier, parallel_tool_calls,
//     and the fields a client echoes back from a reply's message (refusal, annotations, audio).
//     Refused with a 400 that names them: n ≠ 1, non-zero penalties, logit_bias, logprobs,
//     a response_format other than text, and any field the API does not have.
//   - POST /v1/completions: prompt (a string or token ids; one per request), max_tokens
//     (default 16, as OpenAI's), the sampling fields above, stream.
//   - GET /v1/models and GET /v1/models/{id}: the one served model.
//
// Replies share the generator's continuous batch with everything else it runs: each trajectory
// is a rollout.Session on the same *rollout.Generator. A reply ends at Options.StopIDs
// (<|im_end|>, <|endoftext|>), a stop string, max_tokens or the trajectory's context; its
// finish_reason is stop, tool_calls or length. usage counts the prompt (the whole context the
// reply was sampled after; prompt_tokens_details.cached_tokens of it were in the KV cache) and
// the sampled tokens.
//
// # Rollout-engine endpoints
//
// A trainer's rollout.engines (engine/remote) use a serve process as SGLang or vLLM: POST
// /generate (input_ids or text, sampling_params with sampling_seed, return_logprob,
// logprob_start_len for prompt log-probs), POST /update_weights_from_disk (model_path,
// weight_version; waits for the requests in flight, then reloads through Options.Reload), GET
// /get_model_info, GET /health, and vLLM's POST /v1/completions with return_token_ids or
// prompt_logprobs (token-exact, logprobs 0), POST /collective_rpc reload_weights (from
// Options.ModelPath) and POST /reset_prefix_cache; and this project's own PUT
// /upload_weights/VERSION/NAME, a weights file sent by a trainer that shares no filesystem with
// the server (rollout.remote.push: http; upload.go), then loaded with update_weights_from_disk.
// These requests are stateless: each takes a KV slot for its own reply only. Bodies follow engine/remote/wire. Options.APIKey, when set, is
// the one key every request must send (GET /health excepted).
//
// # Chat template and tool calls
//
// Chats render with tokenizer.RenderChat, Qwen3's chat template (the one in Qwen3's
// tokenizer_config.json; CheckTemplate says whether a model folder's template is that one).
// Tools render in its system block, assistant tool calls as <tool_call>{"name": …,
// "arguments": …}</tool_call>, tool messages as <tool_response> blocks in a user turn. With
// tools offered and tool_choice auto (the default), required or a named function, the reply's
// <tool_call> blocks whose JSON parses are returned as tool_calls, content being the text
// before the first call; required and named choices force nothing (the model may answer
// without a call). tool_choice none returns the text as it is. Options.CodeTool serves models
// that write <code>…</code> instead (the built-in one): see there. Options.DefaultSystem puts
// the system prompt a model was trained with first in a chat that has no system message (the
// serve command does so for the built-in model, which reads anything else as noise).
//
// # Token-exact trajectories
//
// A trajectory is the requests made with one API key. The server keeps, per trajectory, the
// tokens of its current segment: the prompt tokens it rendered and the exact ids it sampled,
// never re-tokenised. A chat request extends the previous one when its messages are the
// previous request's messages (equal in role, content, name, tool_call_id and tool calls, whose
// arguments compare as JSON values), then that request's reply as an assistant message (content
// equal but for whitespace at its ends, tool calls equal by name and arguments; the ids and
// the exact text the client echoes do not matter: the kept tokens win), then any new messages,
// with the same tools. Its prompt is then the kept tokens, an <|im_end|> if the reply did not
// end with one, and the new messages' turns as the template renders them after an assistant
// turn ("\n<|im_start|>user\n<tool_response>\n…</tool_response><|im_end|>\n<|im_start|>assistant\n"),
// and the same session continues with its KV cache. Any other request starts a new segment:
// the whole conversation is rendered and a fresh session prefills it. A completion extends
// the previous one when its prompt starts with the previous prompt and the completion returned
// for it (or, for token ids, with the segment's tokens).
//
// At each extension the server checks that the kept tokens decode to what the chat template
// renders for the conversation (each earlier reply as the model wrote it); the first mismatch
// is Trajectory.Drift, and the request is answered anyway. Expected mismatches: a reply cut by
// a stop string (its tokens are kept, the client never saw them), a completion that ended on
// an end-of-sequence token, and Qwen3's template dropping <think> blocks of turns before a new
// user query (the kept tokens keep them: it is what the model read).
//
// # Keys, trajectories and slots (the controller's wiring)
//
// The controller wires it this way for env.name external (engine/external.go):
//
//	srv, _ := serve.New(gen, tok, serve.Options{ModelName: "policy", MaxTotalTokens: n})
//	base, _ := srv.Start("127.0.0.1:0")            // http://127.0.0.1:PORT/v1
//	key := srv.Begin("task-7/3", serve.TrajectoryOptions{Seed: s, Sampling: &pol, Override: true})
//	// start the agent with OPENAI_BASE_URL=base OPENAI_API_KEY=key; wait for it
//	traj, _ := srv.Finish(key)                    // the key is refused from now on
//
// A key's requests run one at a time, in arrival order. A trajectory opens its session (a KV
// slot) on its first request and holds it until Finish, so with more live trajectories than
// slots, later ones wait for a slot; with Options.Preempt an idle trajectory's slot is taken
// instead and it re-prefills its kept tokens when it comes back. Finish cancels a request still
// in flight (its client gets a 401; nothing of it is recorded), waits for it, and frees the
// slot; every key must be finished before the generator releases its KV cache for training
// (ReleaseCache refuses while a slot is held). Each segment is one training sequence: Tokens,
// with Mask true on the sampled tokens only (the loss mask) and LogProbs the sampler's log-prob
// of each (0 elsewhere: the rollout log-probs of the importance ratio and the log-prob probe);
// the segments of a trajectory share its reward and advantage. A segment is at most the
// trajectory's MaxTotalTokens long. Drift is what the token-drift alarm reports; Turns are the
// transcript (a tool call's output is in the next turn's Messages, role tool). The generator
// must not be in lockstep (New refuses one): lockstep steps only once every held slot has asked
// for more, and an agent holds its slot while it runs its tools.
//
// A request that gives no seed (or any request, with TrajectoryOptions.Override) samples with
// one derived from TrajectoryOptions.Seed and its index, so a trajectory's samples are a
// function of its seed and its requests, and a group's trajectories differ by their seeds.
//
// # Errors
//
// Every error is OpenAI's {"error": {"message", "type", "param", "code"}}: malformed JSON, an
// unknown field (named), n > 1 and other bad values 400; a prompt that leaves no room in the
// trajectory's context 400 context_length_exceeded; a missing, unknown or revoked key 401
// invalid_api_key; an unknown model 404 model_not_found; an unknown path 404; a wrong method
// 405. The server goes on serving after each.
package serve
