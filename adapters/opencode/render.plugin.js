// {{GENERATED_HEADER}}
//
// An OpenCode plugin whose only logic is calling `belfry dispatch --native opencode` and
// translating its answer (spec §10). The answer is the opencode dialect's one JSON object
// {"belfry_shim":1} plus at most one action: "throw" (before a tool: throw it, so OpenCode
// does not run the tool and the model sees the text), "append_output" (after a tool: the
// context after the tool's output), "add_text_part" (a prompt: the context added to the
// user's message). A belfry without that dialect answers {"decision","reason","context"},
// read the same way.
//
// One default export serves both majors, the shape OpenCode's plugin guide gives for it:
// OpenCode 1.x (1.18.29 and newer) calls `server()` and uses the hooks it returns; OpenCode
// 2.x reads `id` and calls `setup(ctx)`, which registers the same semantics on the 2.x
// domains (ctx.tool.hook, ctx.session.hook, ctx.event.subscribe). Neither API translates
// the other's hooks, so each is written out. It imports nothing from OpenCode's plugin
// packages, so it loads under either major without an install step.
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

// OpenCode 1.x: the hooks `server()` returns.
const serverHooks = async ({ directory }) => ({
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

// OpenCode 2.x: the same semantics registered on its domains. Hooks receive one mutable event.
async function setup(ctx) {
  const directory = ctx.location?.directory;
  await ctx.tool.hook("execute.before", (event) => {
    const answer = dispatch("before-tool", { session_id: event.sessionID, tool_name: event.tool, tool_input: event.input }, directory);
    if (answer.throw) throw new Error(answer.throw);
  });
  await ctx.tool.hook("execute.after", (event) => {
    if (event.status !== "completed" || !event.result) return;
    const output = event.result.output ?? (event.result.content ?? []).filter((part) => part.type === "text").map((part) => part.text).join("\n");
    const answer = dispatch(
      "after-tool",
      { session_id: event.sessionID, tool_name: event.tool, tool_input: event.input, tool_response: output },
      directory,
    );
    if (!answer.append_output) return;
    if (typeof event.result.output === "string") event.result.output = `${event.result.output}\n\n${answer.append_output}`;
    if (Array.isArray(event.result.content)) event.result.content = [...event.result.content, { type: "text", text: answer.append_output }];
  });
  await ctx.session.hook("prompt", (event) => {
    const answer = dispatch("prompt-submit", { session_id: event.sessionID, prompt: event.prompt.text ?? "" }, directory);
    if (answer.add_text_part) event.prompt.text = `${event.prompt.text ?? ""}\n\n${answer.add_text_part}`;
  });
  await ctx.session.hook("compaction", (event) => {
    dispatch("pre-compact", { session_id: event.sessionID }, directory);
  });
  const controller = new AbortController();
  void (async () => {
    for await (const event of ctx.event.subscribe({ signal: controller.signal })) {
      const semantic = { "session.created": "session-start", "session.execution.succeeded": "turn-stop", "session.execution.failed": "stop-failure" }[event.type];
      if (semantic) dispatch(semantic, { session_id: event.data?.sessionID ?? event.properties?.sessionID }, directory);
    }
  })().catch(() => {});
  return () => controller.abort();
}

export default { id: "belfry", setup, server: serverHooks };
