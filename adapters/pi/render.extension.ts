// {{GENERATED_HEADER}}
//
// A Pi extension whose only logic is calling `belfry dispatch` and translating its answer
// (SPEC §10). Pi 0.73 extension events: tool_call returns {block, reason}; tool_result returns
// {content}; before_agent_start returns {message}; session_before_compact returns {cancel}.
// The answer read is belfry's {"decision","reason","context"} (or a dialect's "block").
import { spawnSync } from "node:child_process";

const HOOKS_FILE = {{HOOKS_FILE_JSON}};
const EVENTS: string[] = {{EVENTS_JSON}};
const TIMEOUT_MS = {{TIMEOUT_MS}};

type Answer = { deny: boolean; reason: string; context: string };

function dispatch(event: string, payload: Record<string, unknown>, cwd: string): Answer {
  const allow = { deny: false, reason: "", context: "" };
  if (!EVENTS.includes(event)) return allow;
  const run = spawnSync(
    "belfry",
    ["dispatch", "--event", event, "--native", "pi", "--hooks-file", HOOKS_FILE],
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

export default function (pi: any) {
  pi.on("session_start", async (_event: any, ctx: any) => {
    dispatch("session-start", {}, ctx.cwd);
  });
  pi.on("session_shutdown", async (_event: any, ctx: any) => {
    dispatch("session-end", {}, ctx.cwd);
  });
  pi.on("before_agent_start", async (event: any, ctx: any) => {
    const answer = dispatch("prompt-submit", { prompt: event.prompt }, ctx.cwd);
    if (answer.context) {
      return { message: { customType: "belfry", content: answer.context, display: false } };
    }
    return undefined;
  });
  pi.on("tool_call", async (event: any, ctx: any) => {
    const answer = dispatch("before-tool", { tool_name: event.toolName, tool_input: event.input }, ctx.cwd);
    if (answer.deny) return { block: true, reason: answer.reason || "denied by a belfry hook" };
    return undefined;
  });
  pi.on("tool_result", async (event: any, ctx: any) => {
    const answer = dispatch(
      "after-tool",
      { tool_name: event.toolName, tool_input: event.input, tool_response: event.content },
      ctx.cwd,
    );
    if (answer.context) return { content: [...event.content, { type: "text", text: answer.context }] };
    return undefined;
  });
  pi.on("agent_end", async (_event: any, ctx: any) => {
    dispatch("turn-stop", {}, ctx.cwd);
  });
  pi.on("session_before_compact", async (_event: any, ctx: any) => {
    const answer = dispatch("pre-compact", {}, ctx.cwd);
    if (answer.deny) return { cancel: true };
    return undefined;
  });
}
