//! Lowering of the session-scoped parts of a canonical file: a hook's `once` and `reason`
//! (read-once guards and the guard brief) and the top-level `memory` block (project memory).
//! Kept apart from the hook's other fields so the rules of the three mechanisms sit together.

use kdl::KdlNode;

use super::{Fields, Lowering};
use crate::canonical::{CanonicalError, Memory, MemorySource, Once, Problem};

const ONCE_EXAMPLE: &str = "once \"context\" (or once \"session\")";
const REASON_EXAMPLE: &str = "reason \"force-pushes rewrite shared history\"";
const MEMORY_EXAMPLE: &str = "memory { file \"NOTES.md\"; append \"scripts/note.sh\" }";
const MEMORY_NODES: &[&str] = &["file", "command", "append"];

impl Lowering<'_> {
    /// A hook's `once` (`session` or `context`) and `reason` (one non-empty string).
    pub(super) fn once_and_reason(
        &self,
        fields: &Fields<'_>,
    ) -> Result<(Option<Once>, Option<String>), CanonicalError> {
        let once = match fields.get("once") {
            None => None,
            Some(node) => {
                let (text, entry) = self.one_string(node, "once", ONCE_EXAMPLE)?;
                match Once::parse(&text) {
                    Some(once) => Some(once),
                    None => {
                        return Err(self.not_one_of(entry, "once", text, &["session", "context"]))
                    }
                }
            }
        };
        let reason = match fields.get("reason") {
            None => None,
            Some(node) => Some(self.one_string(node, "reason", REASON_EXAMPLE)?.0),
        };
        Ok((once, reason))
    }

    /// The top-level `memory { file "PATH" | command "PROGRAM" …; append "PROGRAM" … }` block.
    /// A relative `file` is resolved against the canonical file's directory, as a relative
    /// program path is, so the memory does not move with the directory a harness starts in.
    pub(super) fn memory(
        &self,
        node: &KdlNode,
        first: Option<&Memory>,
    ) -> Result<Memory, CanonicalError> {
        if let Some(first) = first {
            return Err(self.invalid(
                node.span().offset(),
                Problem::Repeated {
                    name: "memory".to_owned(),
                    block: "the top level".to_owned(),
                    first_line: first.at.line,
                },
            ));
        }
        self.no_properties(node, "memory", MEMORY_EXAMPLE)?;
        if let Some(entry) = node.entries().first() {
            return Err(self.invalid(
                entry.span().offset(),
                Problem::Shape {
                    node: "memory".to_owned(),
                    expected: "a `{ … }` block and no values",
                    example: MEMORY_EXAMPLE,
                },
            ));
        }
        let mut fields = Fields::default();
        for child in node.children().map(|c| c.nodes()).unwrap_or_default() {
            let name = child.name().value();
            let Some(&known) = MEMORY_NODES.iter().find(|known| **known == name) else {
                return Err(self.invalid(
                    child.span().offset(),
                    Problem::UnknownNode {
                        name: name.to_owned(),
                        block: "memory".to_owned(),
                        expected: MEMORY_NODES.join(", "),
                    },
                ));
            };
            if let Some(first) = fields.nodes.get(known) {
                return Err(self.invalid(
                    child.span().offset(),
                    Problem::Repeated {
                        name: name.to_owned(),
                        block: "memory".to_owned(),
                        first_line: self.location(first.span().offset()).line,
                    },
                ));
            }
            fields.nodes.insert(known, child);
        }
        let source = match (fields.get("file"), fields.get("command")) {
            (Some(file), None) => {
                let (path, _) = self.one_string(file, "file", MEMORY_EXAMPLE)?;
                let path = std::path::PathBuf::from(path);
                let base = self.file.parent().unwrap_or(std::path::Path::new(""));
                MemorySource::File(if path.is_relative() {
                    base.join(path)
                } else {
                    path
                })
            }
            (None, Some(command)) => MemorySource::Command(self.argv(command, "command")?),
            (Some(_), Some(second)) => {
                return Err(self.invalid(second.span().offset(), Problem::MemorySource))
            }
            (None, None) => return Err(self.invalid(node.span().offset(), Problem::MemorySource)),
        };
        let append = match fields.get("append") {
            None => None,
            Some(append) => {
                if matches!(source, MemorySource::Command(_)) {
                    return Err(
                        self.invalid(append.span().offset(), Problem::MemoryAppendNeedsFile)
                    );
                }
                Some(self.argv(append, "append")?)
            }
        };
        Ok(Memory {
            at: self.location(node.span().offset()),
            source,
            append,
        })
    }
}
