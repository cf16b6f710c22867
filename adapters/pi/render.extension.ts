// {{GENERATED_HEADER}}
//
// A Pi extension whose only logic is calling `belfry dispatch --native pi` and translating its
// answer (spec §10). The answer is the pi dialect's one JSON object {"belfry_shim":1} plus at
// most one action: "return" (return it as is: tool_call {block, reason},
// session_before_compact {cancel}) or "append_text" (tool_result: one more text part of the
// content; input: the prompt text with the context after it). A belfry without that dialect
// answers {"decision","reason","context"}, read the same way. The extension events of Pi 0.73
// (@mariozechner/pi-coding-agent) and Pi 1.x (@earendil-works/pi-coding-agent), which still
// resolves the old package name for extensions.
import { spawnSync } from "node:child_process";
import { VERSION } from "@mariozechner/pi-coding-agent";

const HOOKS_FILE = {{HOOKS_FILE_JSON}};
const EVENTS: string[] = {{EVENTS_JSON}};
const TIMEOUT_MS = {{TIMEOUT_MS}};

// From Pi 0.80.4 on, agent_end ends one low-level run, after which Pi may still retry,
// compact and retry, or run a queued message; agent_settled is the end after which it does
// nothing more by itself. Before 0.80.4 there is no agent_settled and agent_end is the end.
const SETTLES = ((version: string) => {
  const [major, minor, patch] = version.split(".").map((part) => parseInt(part, 10) || 0);
  return major > 0 || minor > 80 || (minor === 80 && patch >= 4);
})(String(VERSION));

// The session's id keys belfry's read-once guards and its once-per-session context.
function sessionId(ctx: any): string | undefined {
  try {
    return ctx?.sessionManager?.getSessionId?.();
  } catch {
    return undefined;
  }
}

function dispatch(event: string, payload: Record<string, unknown>, ctx: any): any {
  if (!EVENTS.includes(event)) return {};
  const input = { hook_event_name: event, cwd: ctx?.cwd, session_id: sessionId(ctx), ...payload };
  const run = spawnSync(
    "belfry",
    ["dispatch", "--event", event, "--native", "pi", "--hooks-file", HOOKS_FILE],
    { input: JSON.stringify(input), encoding: "utf8", timeout: TIMEOUT_MS },
  );
  if (run.status !== 0 || !run.stdout) return {};
  try {
    const answer = JSON.parse(run.stdout);
    if (answer.belfry_shim === 1) return answer;
    if (answer.decision === "deny") return { return: { block: true, cancel: true, reason: answer.reason } };
    return answer.context ? { append_text: answer.context } : {};
  } catch {
    return {};
  }
}

export default function (pi: any) {
  // Pi's `/new` starts a fresh conversation in the same process, what the canonical source
  // "clear" names; its other reasons (startup, reload, resume, fork) are passed as Pi says them.
  pi.on("session_start", async (event: any, ctx: any) => {
    const source = event?.reason === "new" ? "clear" : event?.reason;
    dispatch("session-start", source ? { source } : {}, ctx);
  });
  pi.on("session_shutdown", async (_event: any, ctx: any) => {
    dispatch("session-end", {}, ctx);
  });
  pi.on("input", async (event: any, ctx: any) => {
    const answer = dispatch("prompt-submit", { prompt: event.text }, ctx);
    if (answer.append_text) return { action: "transform", text: `${event.text}\n\n${answer.append_text}` };
    return undefined;
  });
  pi.on("tool_call", async (event: any, ctx: any) => {
    const answer = dispatch("before-tool", { tool_name: event.toolName, tool_input: event.input }, ctx);
    return answer.return;
  });
  pi.on("tool_result", async (event: any, ctx: any) => {
    const answer = dispatch(
      "after-tool",
      { tool_name: event.toolName, tool_input: event.input, tool_response: event.content },
      ctx,
    );
    if (answer.append_text) return { content: [...event.content, { type: "text", text: answer.append_text }] };
    return undefined;
  });
  pi.on("agent_end", async (_event: any, ctx: any) => {
    if (!SETTLES) dispatch("turn-stop", {}, ctx);
  });
  pi.on("agent_settled", async (_event: any, ctx: any) => {
    if (SETTLES) dispatch("turn-stop", {}, ctx);
  });
  pi.on("session_before_compact", async (_event: any, ctx: any) => {
    const answer = dispatch("pre-compact", {}, ctx);
    return answer.return;
  });
}
