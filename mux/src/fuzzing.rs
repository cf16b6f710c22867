//! Entry points for the coverage-guided fuzz targets `declarations` and `remote_words` in
//! `fuzz/` (feature `fuzzing`; never in a release build).

use std::path::Path;

use crate::declare::{parse_declarations, plan, Action, DriftPolicy, RunningPane};
use crate::remote::{shell_quote, Host, HostsConfig, Ssh};

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

/// What `belfry --host` reads and writes for ssh: a host as given (`[user@]box[:port]`), a
/// `hosts` config, an `--ssh-command`, and the words of a far command. `data` is cut at its
/// NUL bytes: the first piece is the text given, the rest are words. Panics when:
/// - a host read from the text (given as a host, or in a config) does not read back as the
///   same host from what it shows;
/// - the words, each quoted for the far shell and joined, do not split back (as
///   `--ssh-command` splits words) into the same words.
///
/// Returns how many words it quoted.
pub fn remote_words(data: &[u8]) -> usize {
    let mut pieces = data.split(|&b| b == 0);
    let given = String::from_utf8_lossy(pieces.next().unwrap_or_default());
    let reads_back = |host: &Host| {
        let shown = host.to_string();
        assert_eq!(
            Host::parse(&shown).ok().as_ref(),
            Some(host),
            "{host:?} shows as {shown:?}"
        );
    };
    if let Ok(host) = Host::parse(&given) {
        reads_back(&host);
    }
    if let Ok(config) = HostsConfig::parse(&given, Path::new("/home/u/.config/belfry/config.kdl")) {
        for (alias, host) in &config.hosts {
            assert!(
                belfry_proto::SessionName::parse(alias).is_ok(),
                "alias {alias:?}"
            );
            reads_back(host);
        }
    }
    let _ = Ssh::parse_command(&given);
    let words: Vec<String> = pieces
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    if words.is_empty() {
        return 0;
    }
    let quoted: Vec<String> = words.iter().map(|word| shell_quote(word)).collect();
    let line = quoted.join(" ");
    match Ssh::parse_command(&line) {
        Ok(split) => assert_eq!(split, words, "{line:?}"),
        Err(err) => panic!("{words:?} quoted as {line:?} does not split: {err}"),
    }
    words.len()
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

    #[test]
    fn the_remote_target_reads_hosts_and_quotes_words() {
        let words = ["it's", "a\\b", "=ls", "", "two words", "~"].join("\0");
        for given in ["me@box:2222", "[::1]:22", "u@[fe80::1]", "box"] {
            assert_eq!(remote_words(format!("{given}\0{words}").as_bytes()), 6);
        }
        let config = "hosts {\n  gpu \"me@[::1]:2222\"\n  ci \"ci@build1\"\n}\n";
        assert_eq!(remote_words(config.as_bytes()), 0);
        assert_eq!(remote_words(b""), 0);
    }
}
