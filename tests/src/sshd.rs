//! A real OpenSSH server for the remote tests (spec §6.2): Debian's `/usr/sbin/sshd` on
//! 127.0.0.1 on a free high port, with a throwaway host key and user key in a temporary
//! directory and a test-only `sshd_config` (no PAM, the authorized keys file in the temporary
//! directory; passwords are offered, so a client without a key is asked for one, and none is
//! ever right). The far machine is this one: the sessions it
//! starts get the environment of another [`crate::Env`] (its runtime, state and log
//! directories, and a `PATH` whose `belfry` is the one under test, or none), so a test has a
//! "near" and a "far" belfry that share nothing but the ssh connection.
//!
//! [`Sshd::ssh_command`] is what the near side passes as `--ssh-command`: `ssh -F CONFIG`,
//! whose config names the host `box` with the user key, a known-hosts file pre-seeded with
//! the host key, `BatchMode yes` and `StrictHostKeyChecking yes`; and the host `pwbox`, the
//! same server with no key and `BatchMode no`, where ssh would ask for a password.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Env;

/// Where Debian's openssh-server puts the daemon (`.ci/run` installs it when missing).
pub const SSHD: &str = "/usr/sbin/sshd";

/// A running sshd and the client config that reaches it.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Child,
}

/// Whether a far session finds the `belfry` under test on its `PATH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FarBelfry {
    /// The far `PATH` starts with the directory of the binaries under test.
    Installed,
    /// The far `PATH` is `/usr/bin:/bin` only: no belfry there.
    Missing,
}

impl Sshd {
    /// Starts an sshd whose sessions run with `far`'s environment.
    pub fn start(far: &Env, belfry: FarBelfry) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: install Debian's openssh-server (apt-get install openssh-server; \
             .ci/run does this)"
        );
        let dir = tempfile::Builder::new()
            .prefix("belfry-sshd-")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let p = |name: &str| dir.path().join(name);
        for key in ["host_key", "user_key"] {
            let status = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(p(key))
                .status()
                .expect("run ssh-keygen");
            assert!(status.success(), "ssh-keygen {key} failed");
        }
        std::fs::copy(p("user_key.pub"), p("authorized_keys")).expect("authorized_keys");
        // sshd refuses to start without its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let mut set_env: Vec<(String, String)> = far
            .vars()
            .into_iter()
            .filter(|(key, _)| key != "PATH")
            .collect();
        let path = match belfry {
            FarBelfry::Installed => format!("{}:/usr/bin:/bin", crate::bin_dir().display()),
            FarBelfry::Missing => "/usr/bin:/bin".to_owned(),
        };
        set_env.push(("PATH".into(), path));
        let set_env: Vec<String> = set_env
            .iter()
            .map(|(key, value)| format!("\"{key}={value}\""))
            .collect();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n\
             AuthorizedKeysFile {authorized}\nPermitRootLogin prohibit-password\n\
             PasswordAuthentication yes\nKbdInteractiveAuthentication no\nUsePAM no\n\
             StrictModes no\nPidFile none\nPrintMotd no\nSetEnv {set_env}\n",
            host_key = p("host_key").display(),
            authorized = p("authorized_keys").display(),
            set_env = set_env.join(" "),
        );
        std::fs::write(p("sshd_config"), config).expect("sshd_config");
        let host_key = std::fs::read_to_string(p("host_key.pub")).expect("host key");
        std::fs::write(
            p("known_hosts"),
            format!("[127.0.0.1]:{port} {}", host_key.trim()),
        )
        .expect("known_hosts");
        let user = user_name();
        let client = format!(
            "Host pwbox\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n\
             PubkeyAuthentication no\n  PreferredAuthentications password\n\
             UserKnownHostsFile {known}\n  StrictHostKeyChecking yes\n  BatchMode no\n\
             NumberOfPasswordPrompts 1\n  LogLevel ERROR\n\
             Host box\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n\
             IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n\
             StrictHostKeyChecking yes\n  BatchMode yes\n  LogLevel ERROR\n\
             Host *\n  UserKnownHostsFile {known}\n  BatchMode yes\n  LogLevel ERROR\n",
            key = p("user_key").display(),
            known = p("known_hosts").display(),
        );
        std::fs::write(p("ssh_config"), client).expect("ssh_config");
        let log = std::fs::File::create(p("sshd.log")).expect("sshd.log");
        let child = Command::new(SSHD)
            .arg("-D")
            .arg("-e")
            .arg("-f")
            .arg(p("sshd_config"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start sshd");
        let sshd = Sshd { dir, port, child };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "sshd did not listen on 127.0.0.1:{port}: {}",
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sshd
    }

    /// The client config (`ssh -F`).
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    /// `--ssh-command` for the near side.
    pub fn ssh_command(&self) -> String {
        format!("ssh -F {}", self.config().display())
    }

    /// What sshd logged, to explain a failure.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- sshd log ---\n{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now (the kernel's pick for a throwaway listener).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// This process's user name, for the ssh login.
fn user_name() -> String {
    let out = Command::new("id").arg("-un").output().expect("run id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}
