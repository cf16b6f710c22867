//! The ownership and mode check shared by the hooks file, dialect files and the spool.
//!
//! spec §8: a hooks file names programs that run on every tool call, so a file another user can
//! change is a way to run code as this user. spec §12: other users cannot write a spool, because
//! its text is injected into the model. Both checks look at the metadata of the already opened
//! file (`fstat`), not at the path, so the file checked is the file read.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Who may own a checked file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AllowedOwners {
    /// The current (effective) user or root: system-wide hooks files are root's.
    UserOrRoot,
    /// Only the current (effective) user.
    UserOnly,
}

/// Why a file failed the check, and the command that fixes it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Insecure {
    pub problem: String,
    pub fix: String,
}

/// Why [`read_checked`] read nothing.
#[derive(Debug)]
pub(crate) enum CheckedReadError {
    Io(std::io::Error),
    Insecure(Insecure),
}

/// Opens `path`, checks the opened file's owner and mode, and only then reads it: the file
/// checked is the file read.
///
/// The open is non-blocking and anything but a regular file is refused before a byte is read:
/// opening a FIFO with no writer, or reading one whose writer never closes, would otherwise hang
/// the dispatcher in front of every tool call (spec §8 fail-open needs an answer to give).
pub(crate) fn read_checked(
    path: &Path,
    owners: AllowedOwners,
) -> Result<Vec<u8>, CheckedReadError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(CheckedReadError::Io)?;
    let metadata = file.metadata().map_err(CheckedReadError::Io)?;
    if !metadata.file_type().is_file() {
        return Err(CheckedReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "it is not a regular file (it is {}); give the path of a JSON file",
                describe_file_type(&metadata.file_type())
            ),
        )));
    }
    check_owner_and_mode(path, &metadata, owners).map_err(CheckedReadError::Insecure)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(CheckedReadError::Io)?;
    Ok(bytes)
}

/// Names a file type that is not a regular file, for the error that refuses it.
fn describe_file_type(file_type: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Passes a file owned by an allowed owner and not writable by its group or by others.
pub(crate) fn check_owner_and_mode(
    path: &Path,
    metadata: &Metadata,
    owners: AllowedOwners,
) -> Result<(), Insecure> {
    let uid = rustix::process::geteuid().as_raw();
    check_with_uid(path, metadata.uid(), metadata.mode(), uid, owners)
}

fn check_with_uid(
    path: &Path,
    file_uid: u32,
    file_mode: u32,
    current_uid: u32,
    owners: AllowedOwners,
) -> Result<(), Insecure> {
    let owner_ok =
        file_uid == current_uid || (owners == AllowedOwners::UserOrRoot && file_uid == 0);
    if !owner_ok {
        let allowed = match owners {
            AllowedOwners::UserOrRoot => format!("you (uid {current_uid}) or root"),
            AllowedOwners::UserOnly => format!("you (uid {current_uid})"),
        };
        return Err(Insecure {
            problem: format!("is owned by uid {file_uid}, not by {allowed}"),
            fix: format!("chown {current_uid} {}", path.display()),
        });
    }
    let writable_by_others = file_mode & 0o022;
    if writable_by_others != 0 {
        return Err(Insecure {
            problem: format!(
                "is group- or world-writable (mode {:04o})",
                file_mode & 0o7777
            ),
            fix: format!("chmod go-w {}", path.display()),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;

    #[test]
    fn own_private_file_passes() {
        let path = Path::new("/x/hooks.json");
        assert_eq!(
            check_with_uid(path, ME, 0o100600, ME, AllowedOwners::UserOnly),
            Ok(())
        );
    }

    #[test]
    fn root_owned_file_passes_only_where_root_is_allowed() {
        let path = Path::new("/x/hooks.json");
        assert_eq!(
            check_with_uid(path, 0, 0o100644, ME, AllowedOwners::UserOrRoot),
            Ok(())
        );
        let refused = check_with_uid(path, 0, 0o100644, ME, AllowedOwners::UserOnly);
        assert_eq!(
            refused.map_err(|insecure| insecure.fix),
            Err("chown 1000 /x/hooks.json".to_string())
        );
    }

    #[test]
    fn other_users_file_names_owner_and_fix() {
        let path = Path::new("/x/hooks.json");
        let Err(insecure) = check_with_uid(path, 1001, 0o100644, ME, AllowedOwners::UserOrRoot)
        else {
            panic!("a file owned by another user passed the check");
        };
        assert_eq!(
            insecure.problem,
            "is owned by uid 1001, not by you (uid 1000) or root"
        );
    }

    #[test]
    fn group_or_world_writable_file_is_refused_with_chmod_fix() {
        let path = Path::new("/x/hooks.json");
        for mode in [0o100620, 0o100602, 0o100666] {
            let Err(insecure) = check_with_uid(path, ME, mode, ME, AllowedOwners::UserOrRoot)
            else {
                panic!("mode {mode:o} passed the check");
            };
            assert_eq!(insecure.fix, "chmod go-w /x/hooks.json");
            assert!(insecure.problem.contains(&format!("{:04o}", mode & 0o7777)));
        }
    }
}
