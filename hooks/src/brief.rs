//! The guard brief (issue 45 (d), spec §14): one short block, rendered once by the core from
//! the canonical hook file, telling the model which guards apply to it here, what each
//! refuses and why, before it meets them.
//!
//! The brief lists the `enforce` hooks of one target (a hook that does not target the harness
//! does not apply there). Each line names the hook, says what it refuses in words (its event
//! and selector), and gives its `reason` when the file has one. `belfry hooks apply` writes it
//! into the target's compiled hooks file; dispatch tells it through the session context path
//! (`crate::session`).

use crate::canonical::{CanonicalHook, Intent, Selector};

/// The first line of every brief, so the model (and a reader of a request log) can tell it.
pub const BRIEF_HEADER: &str =
    "Guards in force here (belfry hooks): these actions are refused; do not attempt them.";

/// The brief for the hooks of one target, in file order; `None` when no enforce hook applies.
pub fn render(hooks: &[&CanonicalHook]) -> Option<String> {
    let lines: Vec<String> = hooks
        .iter()
        .filter(|hook| hook.intent == Intent::Enforce && hook.session.is_none())
        .map(|hook| {
            let mut line = format!("- {}: refuses {}", hook.id.name, refused(hook));
            if let Some(reason) = &hook.reason {
                line.push_str(&format!(". Why: {}", one_line(reason)));
            }
            line
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(format!("{BRIEF_HEADER}\n{}", lines.join("\n")))
}

/// What a guard refuses, in words: its selector at a tool event, else its event.
fn refused(hook: &CanonicalHook) -> String {
    let tools = match &hook.selector {
        Selector::Any => "any tool call".to_owned(),
        Selector::Native(name) => format!("calls of the tool named {name}"),
        Selector::Classes(classes) => {
            let words: Vec<&str> = classes.iter().map(|class| class_words(class)).collect();
            words.join(" or ")
        }
    };
    match hook.event.as_str() {
        "before-tool" => tools,
        "after-tool" => format!("the results of {tools}"),
        "prompt-submit" => "some prompts".to_owned(),
        "turn-stop" => "ending the turn early".to_owned(),
        "subagent-stop" => "a subagent stopping early".to_owned(),
        "pre-compact" => "compacting the context".to_owned(),
        other => format!("at {other}"),
    }
}

fn class_words(class: &str) -> &str {
    match class {
        "shell" => "shell commands",
        "edit" => "file edits",
        "read" => "file reads",
        "web" => "web access",
        "mcp" => "MCP tool calls",
        "any" => "any tool call",
        other => other,
    }
}

/// A reason on one line: the brief is one line per guard.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use crate::canonical::{parse, Scope};

    use super::*;

    fn targets() -> BTreeSet<String> {
        ["t".to_owned()].into_iter().collect()
    }

    #[test]
    fn the_brief_lists_each_enforce_guard_with_what_it_refuses_and_why() {
        let text = r#"
hook "no-force-push" { event "before-tool"; intent "enforce"; select tool="shell|edit"
  reason "force-pushes   rewrite\tshared history"; command "g"; targets "t" }
hook "notes" { event "prompt-submit"; command "n"; targets "t" }
hook "no-early-stop" { event "turn-stop"; intent "enforce"; command "s"; targets "t" }
"#;
        let file = parse(text, Path::new("b.kdl"), Scope::Project, &targets())
            .unwrap_or_else(|e| panic!("{e}"));
        let hooks: Vec<&CanonicalHook> = file.hooks.iter().collect();
        assert_eq!(
            render(&hooks).as_deref(),
            Some(
                "Guards in force here (belfry hooks): these actions are refused; do not attempt them.\n\
                 - no-force-push: refuses shell commands or file edits. Why: force-pushes rewrite shared history\n\
                 - no-early-stop: refuses ending the turn early"
            )
        );
        assert_eq!(render(&hooks[1..2]), None);
    }
}
