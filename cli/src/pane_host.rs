//! A pane host's start, shared by `belfry pane-host` and `belfry-pane`: the launch spec from
//! stdin, the pane's log, then `belfry_pty::host::run` until the pane ends.

use std::path::PathBuf;

/// Serves one pane with the directories the daemon gave, or says why it could not.
pub(crate) fn serve(
    runtime: PathBuf,
    daemon_socket: PathBuf,
    state: PathBuf,
) -> Result<(), String> {
    // The launch spec arrives on stdin, never on the command line (it carries the client's
    // environment).
    let mut spec = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut spec)
        .map_err(|err| format!("cannot read the launch spec from stdin: {err}"))?;
    let spec: belfry_proto::spec::LaunchSpec =
        serde_json::from_str(&spec).map_err(|err| format!("stdin is not a launch spec: {err}"))?;
    crate::logging::init_logging(&format!("pane-{}.log", spec.session));
    belfry_pty::host::run(belfry_pty::host::HostConfig {
        spec,
        runtime,
        daemon_socket,
        state_dir: state,
    })
    .map_err(|err| err.to_string())
}
