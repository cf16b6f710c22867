//! Guarded-send transactions as the wire names them: the id a requester chooses and the state
//! a pane host's journal answers for it (the journal itself is the pane host's, `belfry_pty::txn`).

/// A transaction id: `[A-Za-z0-9._-]{1,64}`, chosen by the requester.
pub fn validate_txn_id(txn: &str) -> Result<(), String> {
    let valid_chars = txn
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if txn.is_empty() || txn.len() > 64 || !valid_chars {
        return Err(format!(
            "transaction id {txn:?} must match [A-Za-z0-9._-]{{1,64}}"
        ));
    }
    Ok(())
}

/// The answer to a query, as the wire spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    /// Nothing was written and nothing ever will be.
    NeverWritten,
    /// The transaction is being written; ask again when it has ended.
    Running,
    /// It was written (completely, or partly before a write error).
    Written,
    /// The journal lost track of started transactions and cannot prove anything.
    Unknown,
}

impl TxnState {
    /// `never-written`, `running`, `written` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            TxnState::NeverWritten => "never-written",
            TxnState::Running => "running",
            TxnState::Written => "written",
            TxnState::Unknown => "unknown",
        }
    }

    /// Parses the wire word.
    pub fn parse(word: &str) -> Option<Self> {
        match word {
            "never-written" => Some(TxnState::NeverWritten),
            "running" => Some(TxnState::Running),
            "written" => Some(TxnState::Written),
            "unknown" => Some(TxnState::Unknown),
            _ => None,
        }
    }
}
