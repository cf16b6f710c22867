// {{GENERATED_HEADER}}
//
// An OpenCode plugin whose only logic is calling `belfry dispatch` and translating its answer
// (SPEC §10). OpenCode 1.18 plugin hooks mutate `output`; throwing in tool.execute.before
// blocks the call and the model sees the error text. The answer read is belfry's
// {"decision","reason","context"} (or a dialect's "block").
import { spawnSync } from "node:child_process";

const HOOKS_FILE = {{HOOKS_FILE_JSON}};
const EVENTS = {{EVENTS_JSON}};
const TIMEOUT_MS = {{TIMEOUT_MS}};

function dispatch(event, payload, cwd) {
  const allow = { deny: false, reason: "", context: "" };
  if (!EVENTS.includes(event)) return allow;
  const run = spawnSync(
    "belfry",
    ["dispatch", "--event", event, "--native", "opencode", "--hooks-file", HOOKS_FILE],
    { input: JSON.stringify({ hook_event_name: event, cwd, ...payload }), encoding: "utf8", timeout: TIMEOUT_MS },
  );
  if (run.status !== 0 || !run.stdout) return allow;
  try {
    const answer = JSON.parse(run.stdout);
    const deny = answer.decision === "deny" || answer.block === true;
    return { deny, reason: String(answer.reason ?? ""), context: String(answer.context ?? "") };
  } catch {
    return allow;
  }
}

export const BelfryHooks = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = dispatch("before-tool", { session_id: input.sessionID, tool_name: input.tool, tool_input: output.args }, directory);
    if (answer.deny) throw new Error(answer.reason || "denied by a belfry hook");
  },
  "tool.execute.after": async (input, output) => {
    const answer = dispatch(
      "after-tool",
      { session_id: input.sessionID, tool_name: input.tool, tool_input: input.args, tool_response: output.output },
      directory,
    );
    if (answer.context) output.output = `${output.output ?? ""}\n${answer.context}`;
  },
  "chat.message": async (input, output) => {
    const prompt = (output.parts ?? []).filter((part) => part.type === "text").map((part) => part.text).join("\n");
    const answer = dispatch("prompt-submit", { session_id: input.sessionID, prompt }, directory);
    if (answer.context && output.parts) {
      const first = output.parts[0] ?? {};
      output.parts.push({ ...first, id: `${first.id ?? "prt"}-belfry`, type: "text", text: answer.context, synthetic: true });
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
