//! `belfry up`: the guard brief in a charter file (issue 45 (d)). Where an agent has a charter
//! and its harness has no exact session-start context (the adapter's `charter` declaration is
//! how it takes its rules, a system-prompt flag for one harness), the brief of the canonical hooks
//! that target its adapter goes at the end of the charter, as part of the system prompt, and
//! the agent's environment says so (`BELFRY_BRIEF_IN_CHARTER`), so dispatch does not tell it a
//! second time with the first prompt.
//!
//! The user's charter file is never changed: the charter with the brief is written to
//! `<state dir>/charters/<agent>-<digest of the charter path>.md` (0600) and the agent is
//! launched with that one.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

use belfry_hooks::canonical::Scope;
use belfry_hooks::session::{charter_brief, BRIEF_IN_CHARTER_ENV};

/// Puts the brief into the charter of each local agent of `decls` that takes one that way;
/// `file` is the declaration file, whose directory is the project whose hooks apply.
pub(crate) fn brief_into_charters(
    decls: &mut belfry_mux::declare::Declarations,
    file: &Path,
    state_dir: &Path,
) -> Result<()> {
    let dir = match file.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    for agent in decls.agents.iter_mut().filter(|a| a.host.is_none()) {
        let (Some(charter), Some(adapter)) = (&agent.charter, &agent.adapter) else {
            continue;
        };
        let mut briefs = Vec::new();
        for scope in [Scope::Project, Scope::User] {
            let context = crate::hooks::context_in(&dir, scope, std::env::vars().collect())?;
            if let Some(brief) = charter_brief(&context, adapter)
                .with_context(|| format!("agent {:?}: the guard brief", agent.name))?
            {
                briefs.push(brief);
            }
        }
        if briefs.is_empty() {
            continue;
        }
        let text = std::fs::read_to_string(charter)
            .with_context(|| format!("agent {:?}: charter {}", agent.name, charter.display()))?;
        let combined = format!("{}\n\n{}\n", text.trim_end(), briefs.join("\n\n"));
        let path = combined_path(state_dir, &agent.name, charter);
        write_private(&path, &combined)
            .with_context(|| format!("agent {:?}: {}", agent.name, path.display()))?;
        agent.charter = Some(path);
        agent
            .env
            .insert(BRIEF_IN_CHARTER_ENV.to_owned(), "1".to_owned());
    }
    Ok(())
}

fn combined_path(state_dir: &Path, agent: &str, charter: &Path) -> PathBuf {
    let digest =
        belfry_hooks::canonical::compile::sha256_hex(charter.as_os_str().as_encoded_bytes());
    let short = digest
        .trim_start_matches("sha256:")
        .get(..16)
        .unwrap_or("0");
    state_dir
        .join("charters")
        .join(format!("{agent}-{short}.md"))
}

/// Written through a fresh temporary file and renamed, mode 0600, never through a link.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new().recursive(true).create(dir)?;
    let temp = dir.join(format!(".charter.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&temp)?;
    file.write_all(text.as_bytes())?;
    std::fs::rename(&temp, path)
}
