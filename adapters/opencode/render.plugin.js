// {{GENERATED_HEADER}}
//
// An OpenCode plugin whose only logic is calling `belfry dispatch --native opencode` and
// translating its answer (spec §10). The answer is the opencode dialect's one JSON object
// {"belfry_shim":1} plus at most one action: "throw" (tool.execute.before: throw it, so
// OpenCode does not run the tool and the model sees the text), "append_output"
// (tool.execute.after: the context after the tool's output), "add_text_part" (chat.message:
// one more text part of the user's message). A belfry without that dialect answers
// {"decision","reason","context"}, read the same way. OpenCode 1.18 plugin hooks.
import { spawnSync } from "node:child_process";

const HOOKS_FILE = {{HOOKS_FILE_JSON}};
const EVENTS = {{EVENTS_JSON}};
const TIMEOUT_MS = {{TIMEOUT_MS}};

function dispatch(event, payload, cwd) {
  if (!EVENTS.includes(event)) return {};
  const run = spawnSync(
    "belfry",
    ["dispatch", "--event", event, "--native", "opencode", "--hooks-file", HOOKS_FILE],
    { input: JSON.stringify({ hook_event_name: event, cwd, ...payload }), encoding: "utf8", timeout: TIMEOUT_MS },
  );
  if (run.status !== 0 || !run.stdout) return {};
  try {
    const answer = JSON.parse(run.stdout);
    if (answer.belfry_shim === 1) return answer;
    if (answer.decision === "deny") return { throw: answer.reason || "denied by a belfry hook" };
    return answer.context ? { append_output: answer.context, add_text_part: answer.context } : {};
  } catch {
    return {};
  }
}

export const BelfryHooks = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = dispatch("before-tool", { session_id: input.sessionID, tool_name: input.tool, tool_input: output.args }, directory);
    if (answer.throw) throw new Error(answer.throw);
  },
  "tool.execute.after": async (input, output) => {
    const answer = dispatch(
      "after-tool",
      { session_id: input.sessionID, tool_name: input.tool, tool_input: input.args, tool_response: output.output },
      directory,
    );
    if (answer.append_output) output.output = `${output.output ?? ""}\n\n${answer.append_output}`;
  },
  "chat.message": async (input, output) => {
    const prompt = (output.parts ?? []).filter((part) => part.type === "text").map((part) => part.text).join("\n");
    const answer = dispatch("prompt-submit", { session_id: input.sessionID, prompt }, directory);
    if (answer.add_text_part && output.parts) {
      const first = output.parts[0] ?? {};
      output.parts.push({ ...first, id: `${first.id ?? "prt"}-belfry`, type: "text", text: answer.add_text_part, synthetic: true });
    }
  },
  "experimental.session.compacting": async (input) => {
    dispatch("pre-compact", { session_id: input.sessionID }, directory);
  },
  event: async ({ event }) => {
    const semantic = { "session.created": "session-start", "session.idle": "turn-stop", "session.error": "stop-failure" }[event.type];
    if (semantic) dispatch(semantic, { session_id: event.properties?.sessionID ?? event.properties?.info?.id }, directory);
  },
});
