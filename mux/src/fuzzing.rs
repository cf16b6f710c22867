//! Entry point for the coverage-guided fuzz target `declarations` in `fuzz/` (feature
//! `fuzzing`; never in a release build).

use std::path::Path;

use crate::declare::{parse_declarations, plan, Action, DriftPolicy, RunningPane};

/// A `belfry.kdl` as a person may have written it: read or refused with an error naming its
/// place, never a panic. What is read names each agent once, with a valid session name, and
/// gives the same generations when read again. `belfry up` plans one launch per agent with
/// nothing running, and one adoption per agent with each running at its generation. Returns
/// how many agents were read.
pub fn declarations(data: &[u8]) -> usize {
    let Ok(text) = std::str::from_utf8(data) else {
        return 0;
    };
    let file = Path::new("/project/belfry.kdl");
    let Ok(decls) = parse_declarations(text, file) else {
        return 0;
    };
    let names: Vec<&str> = decls.agents.iter().map(|a| a.name.as_str()).collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "an agent named twice: {names:?}");
    for name in &names {
        if let Err(err) = belfry_proto::SessionName::parse(name) {
            panic!("agent {name:?} is not a session name: {err:?}");
        }
    }
    let again = parse_declarations(text, file).map(|d| d.agents);
    let generations = |agents: &[crate::declare::AgentDecl]| -> Vec<String> {
        agents.iter().map(|agent| agent.generation()).collect()
    };
    assert_eq!(
        again.as_deref().map(generations).ok(),
        Some(generations(&decls.agents)),
        "generations read twice"
    );
    let launches = plan(&decls, &[], DriftPolicy::Report);
    assert_eq!(launches.len(), names.len());
    assert!(
        launches.iter().all(|a| matches!(a, Action::Launch { .. })),
        "{launches:?}"
    );
    let running: Vec<RunningPane> = decls
        .agents
        .iter()
        .map(|agent| RunningPane {
            session: agent.name.clone(),
            generation: agent.generation(),
            exited: false,
        })
        .collect();
    let adopted = plan(&decls, &running, DriftPolicy::Replace);
    assert!(
        adopted.iter().all(|a| matches!(a, Action::Adopt { .. })),
        "{adopted:?}"
    );
    names.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declarations_target_reads_and_plans_agents() {
        let text = "agent \"shell\" {\n  command \"sh\" \"-i\"\n  env { PS1 \"$ \" }\n  \
                    size rows=40 cols=120\n}\nagent \"other\" {\n  command \"cat\"\n  \
                    cwd \"sub\"\n}\n";
        assert_eq!(declarations(text.as_bytes()), 2);
        assert_eq!(declarations(b"agent \"x\" { nonsense 1 }"), 0);
        assert_eq!(declarations(b"\xff"), 0);
    }
}
